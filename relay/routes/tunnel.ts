/**
 * The HTTP tunnel's routes (docs/api.md, "HTTP tunnel"):
 *
 * - `/api/tunnel/runner/{runnerId}/{port}/*` (and the legacy
 *   `/api/tunnel/{sessionId}/{port}/*`): the owner's browser session only
 *   (an API key is refused). A browser opening a page there (a navigation)
 *   is sent on to a preview address; anything else is forwarded as is.
 * - `/api/tunnel/g/{token}/*`: a preview address. The token is a grant
 *   (tunnel_grants.ts) for one user's runner and port, and is all it
 *   takes: the previewed page runs in an opaque origin (CSP sandbox) whose
 *   sub-requests carry no cookie, and it reaches that one port, nothing else
 *   of the relay. With `BATON_TUNNEL_ORIGIN` the navigation goes to the
 *   tunnel's own origin instead (tunnel_origin.ts).
 *
 * The caller's cookie and key headers never reach the service; a WebSocket
 * upgrade is passed through (tunnel_ws.ts). See docs/security.md, "Tunnel
 * isolation".
 *
 * @module
 */
import { type Context, Hono } from "hono";
import type { Auth, Credential } from "../auth.ts";
import { HttpError, type RelayEnv } from "../_http.ts";
import { notFound, RelayError } from "../errors.ts";
import type { AsyncStore } from "../store/mod.ts";
import type { StreamLink, TunnelRegistry } from "../tunnel_link.ts";
import { failure, preflight, proxyHttp, TunnelFailure } from "../tunnel_proxy.ts";
import { isUpgrade, proxyWebSocket } from "../tunnel_ws.ts";

/** Options of {@linkcode tunnelRoutes}. */
export interface TunnelRoutesOptions {
  auth: Pick<Auth, "authenticate" | "principalLive">;
  tunnels: TunnelRegistry;
  store: Pick<AsyncStore, "sessions">;
  originAllowed: (req: Request) => boolean;
}

/** The tunnel routes, mounted at `/api/tunnel` (before the API's key-or-cookie check). */
export function tunnelRoutes(o: TunnelRoutesOptions): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const grants = o.tunnels.grants;
  // Set by createRelay (tunnelOriginMiddleware): the handshakes, and the tunnel's own origin.
  const previews = o.tunnels.previews;
  const ownerOf = async (c: Context<RelayEnv>) => {
    const h = c.req.raw.headers;
    // A service's own Basic or Bearer auth passes the check (and is stripped);
    // a baton key is refused, as the spec has the tunnel take cookies only.
    const bearer = h.get("authorization")?.match(/^\s*bearer\s+(\S+)/i)?.[1] ?? "";
    if (h.has("x-api-key") || /^(bk|brt)_/.test(bearer)) {
      throw new HttpError(
        401,
        "cookie_required",
        "The tunnel takes the browser session cookie only, not API keys",
      );
    }
    const cookieOnly = new Headers(h);
    cookieOnly.delete("authorization");
    const p = await o.auth.authenticate(cookieOnly);
    if (!p || p.via !== "cookie") throw new HttpError(401, "unauthorized", "Sign in first");
    const m = c.req.method;
    // A WebSocket handshake is a GET that acts: another site's page may not open one.
    const acts = (m !== "GET" && m !== "HEAD") || isUpgrade(c.req.raw);
    if (acts && !o.originAllowed(c.req.raw)) {
      throw new HttpError(403, "bad_origin", "Request origin is not allowed");
    }
    return p;
  };

  // A preview address: the grant in the path is the credential (no cookie, no Origin check:
  // an opaque origin sends `Origin: null`, and the grant reaches one port only).
  app.all("/g/:token/*", async (c) => {
    const token = c.req.param("token");
    const req = c.req.raw;
    const grant = await grants.check(token);
    const live = grant !== null &&
      await o.auth.principalLive({
        via: "cookie",
        keyId: null,
        authSessionId: grant.authSessionId,
      });
    if (!grant || !live) {
      if (grant) await grants.revoke(token);
      return failure(
        req,
        new TunnelFailure(
          401,
          "preview_expired",
          "This preview address has expired: open the port again from baton",
        ),
        true,
      );
    }
    let link: StreamLink;
    try {
      link = await o.tunnels.connected(grant.userId, grant.runnerId);
    } catch (err) {
      return relayFailure(req, err);
    }
    const prefix = `/api/tunnel/g/${token}`;
    const url = new URL(req.url);
    if (url.pathname === prefix) return c.redirect(`${prefix}/${url.search}`, 308);
    const pre = preflight(req);
    if (pre) return pre;
    const target = {
      port: grant.port,
      prefix,
      sandbox: true,
      cors: true,
      path: (url.pathname.slice(prefix.length) || "/") + url.search,
    };
    if (isUpgrade(req)) return proxyWebSocket(req, link, target, previews.upgrade);
    return await proxyHttp(req, link, target);
  });

  app.all("/runner/:runnerId/:port/*", async (c) => {
    const p = await ownerOf(c);
    const runnerId = c.req.param("runnerId");
    const link = await o.tunnels.connected(p.userId, runnerId);
    return await direct(c, p, link, `/api/tunnel/runner/${runnerId}`);
  });
  app.all("/:sessionId/:port/*", async (c) => {
    const p = await ownerOf(c);
    const sessionId = c.req.param("sessionId");
    const session = await o.store.sessions.getOwned(p.userId, sessionId);
    if (!session) throw notFound("Session");
    const link = await o.tunnels.connected(p.userId, session.runnerId);
    return await direct(c, p, link, `/api/tunnel/${sessionId}`);
  });

  /** The owner's own request: a navigation goes to a preview address, the rest is forwarded. */
  async function direct(
    c: Context<RelayEnv>,
    p: Credential & { userId: string },
    link: StreamLink,
    base: string,
  ): Promise<Response> {
    const portText = c.req.param("port") ?? "";
    const port = /^\d{1,5}$/.test(portText) ? Number(portText) : 0;
    if (port < 1 || port > 65535) {
      throw new HttpError(400, "bad_port", `Port must be 1 to 65535: '${portText.slice(0, 20)}'`);
    }
    const prefix = `${base}/${port}`;
    const req = c.req.raw;
    const url = new URL(req.url);
    // Relative links of the service's pages need the trailing slash.
    if (url.pathname === prefix) return c.redirect(`${prefix}/${url.search}`, 308);
    // The raw path (percent-encoding kept), after the prefix.
    const path = (url.pathname.slice(prefix.length) || "/") + url.search;
    if (isNavigation(req)) {
      const token = await grants.mint({
        userId: p.userId,
        runnerId: link.runnerId,
        port,
        authSessionId: p.authSessionId,
      });
      const to = previews.handoff
        ? await previews.handoff(token, { userId: p.userId, runnerId: link.runnerId, port }, path)
        : `/api/tunnel/g/${token}${path}`;
      return new Response(null, {
        status: 303,
        headers: { location: to, "cache-control": "no-store", "referrer-policy": "no-referrer" },
      });
    }
    const target = { port, prefix, sandbox: true, path };
    if (isUpgrade(req)) return proxyWebSocket(req, link, target, previews.upgrade);
    return await proxyHttp(req, link, target);
  }
  return app;
}

/**
 * Whether a browser is opening a page (a top-level or frame navigation):
 * those get a preview address, whose sub-requests work without the cookie.
 */
function isNavigation(req: Request): boolean {
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  const mode = req.headers.get("sec-fetch-mode");
  return mode === "navigate";
}

/** A 404 or 503 of the registry, as the tunnel's page or JSON. */
function relayFailure(req: Request, err: unknown): Response {
  if (!(err instanceof RelayError)) throw err;
  const status = err.kind === "offline" ? 503 : 404;
  return failure(req, new TunnelFailure(status, err.code, err.message), true);
}
