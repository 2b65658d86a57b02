import type { MiddlewareHandler } from "hono";
import type { Auth } from "./auth.ts";
import { HttpError, type RelayEnv } from "./_http.ts";

/**
 * Whether a browser request comes from the relay's own origin (or a
 * configured one). A request without an Origin header is not a browser's
 * cross-site request and passes.
 */
export function originCheck(baseUrl: string, trustedOrigins: string[]): (req: Request) => boolean {
  const protocol = new URL(baseUrl).protocol;
  return (req) => {
    const origin = req.headers.get("origin");
    if (!origin) return true;
    if (trustedOrigins.includes(origin)) return true;
    const host = req.headers.get("host");
    return host !== null && origin === `${protocol}//${host}`;
  };
}

/**
 * Sets the caller (cookie or API key) on the context, or answers 401; a
 * browser's changing request from a foreign origin is 403 (CSRF).
 */
export function requirePrincipal(
  auth: Pick<Auth, "authenticate" | "principalLive">,
  originAllowed: (req: Request) => boolean,
): MiddlewareHandler<RelayEnv> {
  return async (c, next) => {
    const p = await auth.authenticate(c.req.raw.headers);
    if (!p) throw new HttpError(401, "unauthorized", "Sign in or send an API key");
    const m = c.req.method;
    if (p.via === "cookie" && m !== "GET" && m !== "HEAD" && !originAllowed(c.req.raw)) {
      throw new HttpError(403, "bad_origin", "Request origin is not allowed");
    }
    c.set("principal", p);
    c.set("principalLive", () => auth.principalLive(p));
    await next();
  };
}
