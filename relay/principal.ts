import type { MiddlewareHandler } from "hono";
import type { Auth } from "./auth.ts";
import { HttpError, type RelayEnv } from "./_http.ts";

/** Options of {@linkcode browserAccess}. */
export interface BrowserAccessOptions {
  /** The relay's public address. */
  baseUrl: string;
  /** The port the relay listens on, for its loopback names; default the base URL's. */
  port?: number;
  /** Further names browsers use for the relay: `host[:port]` or `http(s)://host[:port]`. */
  allowedHosts?: string[];
  /** Other sites whose pages may call the relay with the user's cookie. */
  trustedOrigins?: string[];
}

/** Which `Host` headers and `Origin`s the relay accepts from browsers. */
export interface BrowserAccess {
  /** Every origin whose pages act as the user (for better-auth too). */
  origins: string[];
  /**
   * Whether a browser request comes from an allowed origin. A request
   * without an Origin header is not a browser's cross-site request and passes.
   */
  originAllowed(req: Request): boolean;
  /** Whether the request was addressed to one of the relay's own names. */
  hostAllowed(req: Request): boolean;
}

/**
 * The relay's names and origins: those of its base URL, `localhost`,
 * `127.0.0.1` and `[::1]` on its port, and the ones configured. Not "any
 * Host the request names": a page on a name an attacker points at the
 * relay's address (DNS rebinding) would pass that.
 */
export function browserAccess(options: BrowserAccessOptions): BrowserAccess {
  const base = new URL(options.baseUrl);
  const port = options.port ?? Number(base.port || (base.protocol === "https:" ? 443 : 80));
  const hosts = new Set<string>();
  const origins = new Set<string>([base.origin, ...(options.trustedOrigins ?? [])]);
  // A Host header names the default port or leaves it out: both count.
  const addHost = (host: string, scheme: string) => {
    const url = new URL(`${scheme}//${host.toLowerCase()}`);
    hosts.add(url.host);
    hosts.add(`${url.hostname}:${url.port || (scheme === "https:" ? 443 : 80)}`);
  };
  addHost(base.host, base.protocol);
  for (const name of ["localhost", "127.0.0.1", "[::1]"]) {
    addHost(`${name}:${port}`, "http:");
    origins.add(`http://${name}:${port}`);
  }
  for (const entry of options.allowedHosts ?? []) {
    if (/^https?:\/\//i.test(entry)) {
      const url = new URL(entry);
      addHost(url.host, url.protocol);
      origins.add(url.origin);
    } else {
      addHost(entry, "http:");
      origins.add(new URL(`http://${entry}`).origin);
      origins.add(new URL(`https://${entry}`).origin);
    }
  }
  return {
    origins: [...origins],
    originAllowed(req) {
      const origin = req.headers.get("origin");
      return origin === null || origins.has(origin);
    },
    hostAllowed(req) {
      const host = req.headers.get("host") ?? new URL(req.url).host;
      return hosts.has(host.toLowerCase());
    },
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
