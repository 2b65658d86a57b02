import { Hono } from "hono";
import { RUNNER_WS_PATH, VIEWER_WS_PATH } from "../shared/protocol.ts";
import type { Auth, Principal } from "./auth.ts";
import { HttpError, type RelayEnv } from "./_http.ts";
import type { Hub } from "./hub.ts";
import { acceptRunnerSocket } from "./runner_link.ts";
import type { RunnerCalls } from "./runner_link.ts";
import { acceptViewerSocket, VIEWER_SCOPE_MESSAGE } from "./viewer.ts";
import { FORBIDDEN_SCOPE, isUnrestricted } from "./scopes.ts";

/** What the two WebSocket upgrades need. */
export interface SocketRoutesOptions {
  auth: Pick<Auth, "authenticate" | "principalFromKey" | "principalLive">;
  hub: Hub;
  /** Answers the runner's calls (its agents' trigger tools). */
  calls: RunnerCalls;
  originAllowed: (req: Request) => boolean;
}

/**
 * The runner's control channel and the viewers' channel. A runner proves
 * itself with its first message; a browser viewer by its cookie (and its
 * Origin), an API client by its key header or its first message.
 */
export function socketRoutes(options: SocketRoutesOptions): Hono<RelayEnv> {
  const { auth, hub, calls, originAllowed } = options;
  const app = new Hono<RelayEnv>();

  app.get(RUNNER_WS_PATH, (c) => {
    requireUpgrade(c.req.raw);
    const { socket, response } = upgrade(c.req.raw, 30);
    acceptRunnerSocket(socket, { hub, principalFromKey: auth.principalFromKey, calls });
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
    const { socket, response } = upgrade(c.req.raw, 60);
    acceptViewerSocket(socket, {
      hub,
      principal: p,
      principalFromKey: auth.principalFromKey,
      principalLive: auth.principalLive,
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

/** Upgrades to a WebSocket; a malformed handshake is the client's fault (400), not ours. */
function upgrade(req: Request, idleTimeout: number): { socket: WebSocket; response: Response } {
  try {
    return Deno.upgradeWebSocket(req, { idleTimeout });
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    throw new HttpError(400, "bad_upgrade", `Invalid WebSocket handshake: ${err.message}`);
  }
}
