/**
 * The tunnel's own origin (`BATON_TUNNEL_ORIGIN`): previews served from a
 * host that is not the relay's, so a previewed page runs with its own
 * origin (no CSP sandbox: storage, cookies and same-origin requests of the
 * page work) and still can neither read the relay's cookie nor call its API
 * with it, as the browser keeps those to the relay's host.
 *
 * Two forms:
 * - a wildcard, `https://*.tunnel.example.com`: each preview (user, runner,
 *   port) gets a host of its own, `p5173-<16 hex>.tunnel.example.com`, and
 *   is served at `/` there (no path rewriting needed; previews are isolated
 *   from each other too);
 * - one origin, `https://tunnel.example.com`: previews share it under
 *   `/<label>/…` (paths rewritten; one preview's page can reach another
 *   preview of the same browser, never the relay).
 *
 * The handoff: the owner opens `/api/tunnel/runner/{runnerId}/{port}/…` on
 * the relay with the session cookie; the relay mints a grant
 * (tunnel_grants.ts) and a one-time ticket and redirects to
 * `<tunnel origin>[/<label>]/__baton_tunnel/handoff?ticket=…`, which spends
 * the ticket, sets the grant as an HttpOnly cookie of the tunnel origin
 * (Path: the label's prefix), and redirects to the page. Requests there are
 * then answered with that cookie only, for that preview only.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import type { Auth } from "./auth.ts";
import { RelayError } from "./errors.ts";
import type { TunnelGrant } from "./tunnel_grants.ts";
import type { PreviewSettings, TunnelRegistry } from "./tunnel_link.ts";
import { failure, proxyHttp, TunnelFailure } from "./tunnel_proxy.ts";
import { isUpgrade, proxyWebSocket } from "./tunnel_ws.ts";

/** The path on the tunnel origin that spends a handoff ticket. */
export const HANDOFF_PATH = "/__baton_tunnel/handoff";

const LABEL = /^p\d{1,5}-[0-9a-f]{16}$/;

/** What serving the tunnel origin needs. */
export interface TunnelOriginDeps {
  tunnels: TunnelRegistry;
  auth: Pick<Auth, "principalLive">;
  upgrade?: PreviewSettings["upgrade"];
}

/**
 * Sets how `tunnels` serves previews (WebSocket handshakes through
 * `options.upgrade`; the handoff to `options.tunnelOrigin` when set), and
 * the middleware that answers requests addressed to the tunnel origin
 * (registered before the relay's host check; a pass-through without one).
 * A bad `tunnelOrigin` throws a RangeError.
 */
export function tunnelOriginMiddleware(
  tunnels: TunnelRegistry,
  auth: Pick<Auth, "principalLive">,
  options: {
    tunnelOrigin?: string;
    baseUrl: string;
    /** The relay's signing secret, which every node of a cluster shares: the labels' key. */
    secret: string;
    upgrade?: PreviewSettings["upgrade"];
  },
): MiddlewareHandler {
  tunnels.previews.upgrade = options.upgrade;
  if (!options.tunnelOrigin) return async (_c, next) => await next();
  const origin = new TunnelOrigin(options.tunnelOrigin, {
    relayHost: new URL(options.baseUrl).host,
    secret: options.secret,
  });
  tunnels.previews.handoff = (token, grant, path) =>
    origin.handoff(token, grant, path, tunnels.grants);
  const deps = { tunnels, auth, upgrade: options.upgrade };
  return async (c, next) => {
    if (!origin.matches(c.req.raw)) return await next();
    return await origin.handle(c.req.raw, deps);
  };
}

/** A parsed `BATON_TUNNEL_ORIGIN`. */
export class TunnelOrigin {
  readonly scheme: "http:" | "https:";
  /** `.tunnel.example.com[:port]` for a wildcard, `tunnel.example.com[:port]` otherwise. */
  readonly host: string;
  readonly wildcard: boolean;
  readonly #key: Promise<CryptoKey>;

  /**
   * Parses `value`; a RangeError names what is wrong. `relayHost` (the base
   * URL's host) may not be the tunnel's: the relay's cookie would reach it.
   * Labels are keyed by `secret` (the relay's signing secret).
   */
  constructor(value: string, { relayHost, secret }: { relayHost: string; secret: string }) {
    const m = value.trim().match(/^(https?):\/\/(\*\.)?([a-z0-9.-]+(?::\d{1,5})?)\/?$/i);
    if (!m) {
      throw new RangeError(
        `Invalid BATON_TUNNEL_ORIGIN: '${value}' (expected an origin such as https://*.tunnel.example.com)`,
      );
    }
    this.scheme = `${m[1]!.toLowerCase()}:` as "http:" | "https:";
    this.wildcard = m[2] !== undefined;
    const host = m[3]!.toLowerCase();
    this.host = this.wildcard ? `.${host}` : host;
    if (!this.wildcard && host === relayHost.toLowerCase()) {
      throw new RangeError(
        `Invalid BATON_TUNNEL_ORIGIN: '${value}' is the relay's own host (its cookie would reach previews)`,
      );
    }
    // Labels are unguessable from outside, and the same on every node of a
    // cluster and across restarts (they share the secret): a handoff made on
    // one node is spent on another, and a preview keeps its host.
    this.#key = labelKey(secret);
  }

  /** Whether `req` was addressed to the tunnel origin. */
  matches(req: Request): boolean {
    const host = (req.headers.get("host") ?? "").toLowerCase();
    if (!this.wildcard) return host === this.host;
    return host.endsWith(this.host) && LABEL.test(host.slice(0, -this.host.length));
  }

  /** The label of a preview: its own host (wildcard) or path segment. */
  async label(g: Pick<TunnelGrant, "userId" | "runnerId" | "port">): Promise<string> {
    const mac = await crypto.subtle.sign(
      "HMAC",
      await this.#key,
      new TextEncoder().encode(`${g.userId}\n${g.runnerId}\n${g.port}`),
    );
    const hex = [...new Uint8Array(mac).slice(0, 8)].map((b) => b.toString(16).padStart(2, "0"))
      .join("");
    return `p${g.port}-${hex}`;
  }

  /** Where a preview's page is on this origin, and the prefix its paths go under. */
  #base(label: string): { origin: string; prefix: string } {
    return this.wildcard
      ? { origin: `${this.scheme}//${label}${this.host}`, prefix: "" }
      : { origin: `${this.scheme}//${this.host}`, prefix: `/${label}` };
  }

  /** The handoff address for a grant just minted, going on to `path`. */
  async handoff(
    token: string,
    g: Pick<TunnelGrant, "userId" | "runnerId" | "port">,
    path: string,
    grants: TunnelRegistry["grants"],
  ): Promise<string> {
    const { origin, prefix } = this.#base(await this.label(g));
    const ticket = await grants.ticket(token, path);
    return `${origin}${prefix}${HANDOFF_PATH}?ticket=${ticket}`;
  }

  /** Answers a request addressed to the tunnel origin (nothing else of the relay is there). */
  async handle(req: Request, deps: TunnelOriginDeps): Promise<Response> {
    const url = new URL(req.url);
    const host = (req.headers.get("host") ?? "").toLowerCase();
    let label: string;
    let rest: string;
    if (this.wildcard) {
      label = host.slice(0, -this.host.length);
      rest = url.pathname;
    } else {
      const m = url.pathname.match(/^\/([^/]+)(\/.*)?$/);
      label = m?.[1] ?? "";
      rest = m?.[2] ?? "/";
      if (LABEL.test(label) && m?.[2] === undefined) {
        return Response.redirect(`${url.origin}/${label}/${url.search}`, 308);
      }
    }
    const expired = new TunnelFailure(
      401,
      "preview_expired",
      "This preview is closed or has expired: open the port again from baton",
    );
    if (!LABEL.test(label)) return failure(req, expired, false);
    const { prefix } = this.#base(label);
    const cookieName = `baton_tunnel_${label.replace(/-/g, "_")}`;
    const grants = deps.tunnels.grants;

    if (rest === HANDOFF_PATH) {
      const spent = await grants.redeem(url.searchParams.get("ticket") ?? "");
      const grant = spent && await grants.check(spent.grant);
      if (!spent || !grant || await this.label(grant) !== label) {
        return failure(req, expired, false);
      }
      const secure = this.scheme === "https:" ? "; Secure" : "";
      return new Response(null, {
        status: 303,
        headers: {
          // At `/` of its own host, `//other.example/` would leave it: one slash.
          location: `${prefix}/${spent.next.replace(/^[/\\]+/, "")}`,
          "set-cookie": `${cookieName}=${spent.grant}; Path=${
            prefix || "/"
          }; HttpOnly; SameSite=Lax${secure}`,
          "cache-control": "no-store",
          "referrer-policy": "no-referrer",
        },
      });
    }

    const token = cookieOf(req.headers.get("cookie"), cookieName);
    const grant = token ? await grants.check(token) : null;
    const live = grant !== null &&
      await deps.auth.principalLive({
        via: "cookie",
        keyId: null,
        authSessionId: grant.authSessionId,
      });
    if (!grant || !live || await this.label(grant) !== label) return failure(req, expired, false);
    let link;
    try {
      link = await deps.tunnels.connected(grant.userId, grant.runnerId);
    } catch (err) {
      if (!(err instanceof RelayError)) throw err;
      const status = err.kind === "offline" ? 503 : 404;
      return failure(req, new TunnelFailure(status, err.code, err.message), false);
    }
    // On its own origin the service's cookies are its own: they pass, the grant does not.
    const cookie = (req.headers.get("cookie") ?? "").split(";").map((c) => c.trim())
      .filter((c) => c && !c.startsWith("baton_tunnel_")).join("; ");
    const target = {
      port: grant.port,
      prefix,
      sandbox: false,
      path: rest + url.search,
      ...(cookie ? { cookie } : {}),
    };
    if (isUpgrade(req)) return await proxyWebSocket(req, link, target, deps.upgrade);
    return await proxyHttp(req, link, target);
  }
}

/** HMAC-SHA256 key of the labels: HKDF-SHA256 of the relay's secret, with its own purpose. */
async function labelKey(secret: string): Promise<CryptoKey> {
  const enc = new TextEncoder();
  const base = await crypto.subtle.importKey("raw", enc.encode(secret), "HKDF", false, [
    "deriveKey",
  ]);
  return await crypto.subtle.deriveKey(
    {
      name: "HKDF",
      hash: "SHA-256",
      salt: enc.encode("baton"),
      info: enc.encode("baton tunnel origin labels"),
    },
    base,
    { name: "HMAC", hash: "SHA-256", length: 256 },
    false,
    ["sign"],
  );
}

function cookieOf(header: string | null, name: string): string | null {
  for (const part of (header ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return v.join("=");
  }
  return null;
}
