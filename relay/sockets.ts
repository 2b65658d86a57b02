import { Hono } from "hono";
import { RUNNER_WS_PATH, VIEWER_WS_PATH } from "../shared/protocol.ts";
import { type Auth, keyFromHeaders, type Principal } from "./auth.ts";
import { clientIp, HttpError, type RelayEnv } from "./_http.ts";
import type { Hub } from "./hub.ts";
import { acceptRunnerSocket } from "./runner_socket.ts";
import { TUNNEL_WS_PATH } from "../shared/tunnel_api.ts";
import { acceptTunnelSocket } from "./tunnel_link.ts";
import { TERMINAL_WS_PATH } from "../shared/terminal_api.ts";
import { acceptTerminalSocket } from "./terminal_socket.ts";
import type { RunnerCalls } from "./runner_socket.ts";
import { acceptViewerSocket, VIEWER_SCOPE_MESSAGE } from "./viewer.ts";
import { FORBIDDEN_SCOPE, isUnrestricted } from "./scopes.ts";
import type { Channel, Upgraded, UpgradeOptions } from "./ws_transport.ts";

/** Completes a WebSocket handshake (serve.ts's WsTransport); throws an HttpError when it cannot. */
export type Upgrader = (req: Request, options: UpgradeOptions) => Upgraded;

/** What the two WebSocket upgrades need. */
export interface SocketRoutesOptions {
  auth: Pick<Auth, "authenticate" | "principalFromKey" | "principalLive">;
  hub: Hub;
  /** Answers the runner's calls (its agents' trigger tools). */
  calls: RunnerCalls;
  originAllowed: (req: Request) => boolean;
  /** Completes handshakes; without one (the app served in-process) every upgrade is refused. */
  upgrade?: Upgrader;
  /** Take the client address from X-Forwarded-For (see clientIp). */
  trustProxy?: boolean;
  /** How long a socket may stay unauthenticated (runner hello, viewer auth); default 10 s. */
  authTimeoutMs?: number;
}

/**
 * The runner's control channel and the viewers' channel. A runner proves
 * itself with its first message, the hello (and may show the same key in a
 * header first, which lets that hello be as large as its sessions need); a
 * browser viewer by its cookie (and its Origin), an API client by its key
 * header or its first message.
 */
export function socketRoutes(options: SocketRoutesOptions): Hono<RelayEnv> {
  const { auth, hub, calls, originAllowed } = options;
  const authTimeoutMs = options.authTimeoutMs ?? 10_000;
  const app = new Hono<RelayEnv>();
  const upgrade = (req: Request, channel: Channel, address: string, authenticated: boolean) => {
    if (!options.upgrade) {
      throw new HttpError(400, "bad_upgrade", "Invalid WebSocket handshake: not an upgrade");
    }
    return options.upgrade(req, { channel, address, authenticated });
  };

  app.get(RUNNER_WS_PATH, async (c) => {
    requireUpgrade(c.req.raw);
    // A key shown at the handshake lifts the small limit on the first
    // message (MAX_RUNNER_HELLO_BYTES), so that a hello listing many sessions
    // fits; the hello must carry the same key, and is where a bad one is
    // refused (with the close code a runner stops on).
    const headerKey = keyFromHeaders(c.req.raw.headers);
    const keyed = headerKey !== null && (await auth.principalFromKey(headerKey)) !== null;
    const address = clientIp(c, options.trustProxy ?? false);
    const { socket, response, authenticated } = upgrade(c.req.raw, "runner", address, keyed);
    acceptRunnerSocket(socket, {
      hub,
      headerKey,
      principalFromKey: auth.principalFromKey,
      calls,
      authenticated,
      helloTimeoutMs: authTimeoutMs,
    });
    return response;
  });

  app.get(TUNNEL_WS_PATH, async (c) => {
    requireUpgrade(c.req.raw);
    const headerKey = keyFromHeaders(c.req.raw.headers);
    const keyed = headerKey !== null && (await auth.principalFromKey(headerKey)) !== null;
    const address = clientIp(c, options.trustProxy ?? false);
    const { socket, response, authenticated } = upgrade(c.req.raw, "tunnel", address, keyed);
    acceptTunnelSocket(socket, {
      registry: hub.tunnels,
      store: hub.store,
      headerKey,
      principalFromKey: auth.principalFromKey,
      authenticated,
      registerTimeoutMs: authTimeoutMs,
      log: (line) => hub.log(line),
    });
    return response;
  });

  // A web terminal: the owner's browser (cookie and Origin) only, checked at the handshake.
  app.get(TERMINAL_WS_PATH, async (c) => {
    requireUpgrade(c.req.raw);
    if (!originAllowed(c.req.raw)) {
      throw new HttpError(403, "bad_origin", "WebSocket origin is not allowed");
    }
    const p: Principal | null = await auth.authenticate(c.req.raw.headers);
    if (!p || p.keyId !== null) {
      throw new HttpError(401, "unauthorized", "A terminal attaches with the browser session");
    }
    const runnerId = c.req.query("runnerId") ?? "";
    const terminalId = c.req.query("terminalId") ?? "";
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(runnerId) || !/^t_[A-Za-z0-9]{1,40}$/.test(terminalId)) {
      throw new HttpError(404, "not_found", "Terminal not found");
    }
    const link = await hub.tunnels.connected(p.userId, runnerId);
    const address = clientIp(c, options.trustProxy ?? false);
    const { socket, response } = upgrade(c.req.raw, "terminal", address, true);
    acceptTerminalSocket(socket, link, terminalId);
    return response;
  });

  app.get(VIEWER_WS_PATH, async (c) => {
    requireUpgrade(c.req.raw);
    if (!originAllowed(c.req.raw)) {
      throw new HttpError(403, "bad_origin", "WebSocket origin is not allowed");
    }
    const p: Principal | null = await auth.authenticate(c.req.raw.headers);
    if (!p && (c.req.header("x-api-key") || c.req.header("authorization"))) {
      throw new HttpError(401, "unauthorized", "Invalid API key");
    }
    if (p && !isUnrestricted(p)) throw new HttpError(403, FORBIDDEN_SCOPE, VIEWER_SCOPE_MESSAGE);
    const address = clientIp(c, options.trustProxy ?? false);
    const { socket, response, authenticated } = upgrade(c.req.raw, "viewer", address, p !== null);
    acceptViewerSocket(socket, {
      hub,
      principal: p,
      principalFromKey: auth.principalFromKey,
      principalLive: auth.principalLive,
      authenticated,
      authTimeoutMs,
    });
    return response;
  });

  return app;
}

function requireUpgrade(req: Request): void {
  if (req.headers.get("upgrade")?.toLowerCase() !== "websocket") {
    throw new HttpError(426, "upgrade_required", "Connect with a WebSocket");
  }
}
