/**
 * The relay's end of a runner's tunnel channel (`/_tunnel`): the register
 * message that proves the runner, then binary frames of the stream layer
 * (shared/streams.ts). One tunnel per runner; a newer one replaces the older.
 *
 * @module
 */
import { CloseCode } from "../shared/protocol.ts";
import { type MuxStream, StreamMux } from "../shared/streams.ts";
import type { TunnelRegister } from "../shared/tunnel_api.ts";
import type { Principal } from "./auth.ts";
import type { Bus } from "./bus/mod.ts";
import { notFound, offline } from "./errors.ts";
import type { AsyncStore } from "./store/mod.ts";
import type { ChannelSocket, Upgraded, UpgradeOptions } from "./ws_transport.ts";
import { refused, RUNNER_ID, runnerKeyOwner } from "./_runner_key.ts";
import { TunnelGrants } from "./tunnel_grants.ts";

const OPEN = 1;

/** One runner's tunnel: its multiplexer, and who it belongs to. */
export class TunnelLink {
  readonly mux: StreamMux;

  constructor(
    readonly socket: ChannelSocket,
    readonly runnerId: string,
    readonly userId: string,
    readonly keyId: string | null,
  ) {
    this.mux = new StreamMux({
      dialer: true,
      send: (frame) => {
        if (socket.readyState === OPEN) (socket as unknown as BinarySocket).send(frame);
      },
    });
  }

  close(code: number, reason: string): void {
    this.mux.close(reason);
    try {
      this.socket.close(code, reason);
    } catch {
      // Gone already.
    }
  }
}

interface BinarySocket {
  send(data: Uint8Array): void;
}

/**
 * What the tunnel proxy and the terminal open streams on: a runner's tunnel
 * link on this node, or a channel over the bus to the node that holds it.
 */
export interface StreamLink {
  readonly runnerId: string;
  readonly userId: string;
  readonly mux: { open(header: Uint8Array): MuxStream };
}

/** How previews are served beyond plain HTTP. */
export interface PreviewSettings {
  /** Completes WebSocket handshakes (serve.ts's transport); none in-process. */
  upgrade?: ((req: Request, options: UpgradeOptions) => Upgraded) | undefined;
  /**
   * Where a navigation with a fresh grant goes when previews have their own
   * origin (`BATON_TUNNEL_ORIGIN`, tunnel_origin.ts): its handoff address.
   */
  handoff?: (
    token: string,
    grant: { userId: string; runnerId: string; port: number },
    path: string,
  ) => Promise<string>;
}

/** The tunnel links by runner id. */
export class TunnelRegistry {
  readonly #links = new Map<string, TunnelLink>();
  /** Stops serving each link's streams to other nodes over the bus. */
  readonly #served = new Map<TunnelLink, () => void>();
  /** Preview grants (the capability of a previewed page's sub-requests), in the store. */
  readonly grants: TunnelGrants;
  /** How previews are served (set by createRelay through tunnelOriginMiddleware). */
  readonly previews: PreviewSettings = {};

  /**
   * `bus`: other nodes open streams to the runners whose tunnel is here, and
   * this one to the runners whose tunnel is elsewhere (none: this node alone).
   */
  constructor(
    readonly store: Pick<AsyncStore, "runners" | "tunnelGrants">,
    readonly bus?: Bus,
  ) {
    this.grants = new TunnelGrants(store.tunnelGrants);
  }

  /** Registers a link, closing an older one of the same runner. */
  attach(link: TunnelLink): void {
    const old = this.#links.get(link.runnerId);
    if (old && old !== link) old.close(CloseCode.replaced, "Replaced by a newer tunnel");
    this.#links.set(link.runnerId, link);
    const serve = this.bus?.serveStreams(link.runnerId, {
      userId: link.userId,
      open: (header) => link.mux.open(header),
    });
    if (serve) this.#served.set(link, serve);
  }

  detach(link: TunnelLink): void {
    this.#served.get(link)?.();
    this.#served.delete(link);
    if (this.#links.get(link.runnerId) === link) this.#links.delete(link.runnerId);
  }

  links(): TunnelLink[] {
    return [...this.#links.values()];
  }

  /**
   * The tunnel of a runner `userId` owns, here or through the node that holds
   * it: 404 for a foreign or unknown runner, 503 offline.
   */
  async connected(userId: string, runnerId: string): Promise<StreamLink> {
    const link = this.#links.get(runnerId);
    // A tunnel's owner is its link's (its register was checked against the runner's row):
    // a previewed page's every request is served without a read of the store.
    if (link) {
      if (link.userId !== userId) throw notFound("Runner");
      return link;
    }
    const remote = RUNNER_ID.test(runnerId) ? await this.bus?.streamsTo(runnerId) : null;
    if (remote) {
      if (remote.userId !== userId) throw notFound("Runner");
      return { runnerId, userId, mux: remote };
    }
    if (!await this.store.runners.getOwned(userId, runnerId)) throw notFound("Runner");
    throw offline("Runner");
  }

  closeAll(code: number, reason: string): void {
    for (const l of this.links()) l.close(code, reason);
  }
}

/** Options of {@linkcode acceptTunnelSocket}. */
export interface AcceptTunnelOptions {
  registry: TunnelRegistry;
  store: Pick<AsyncStore, "runners">;
  principalFromKey: (key: string) => Promise<Principal | null>;
  /** The key of the handshake's headers, if any: the register must carry the same. */
  headerKey: string | null;
  /** Lifts the transport's first-message limit. */
  authenticated: () => void;
  registerTimeoutMs: number;
  log: (line: string) => void;
}

/**
 * Drives one tunnel socket: waits for the register message, checks the key
 * as the control channel does (same close codes, so a runner stops on a bad
 * key), then feeds binary frames to the link's multiplexer.
 */
export function acceptTunnelSocket(socket: ChannelSocket, options: AcceptTunnelOptions): void {
  let link: TunnelLink | null = null;
  let registering = false;
  const timer = setTimeout(() => {
    if (!link) refuse(CloseCode.badHello, "register_timeout", "No register message in time");
  }, options.registerTimeoutMs);

  function refuse(code: number, errCode: string, message: string): void {
    clearTimeout(timer);
    try {
      socket.send(JSON.stringify({ t: "error", code: errCode, message }));
      socket.close(code, message.slice(0, 120));
    } catch {
      // Gone already.
    }
  }

  async function onRegister(msg: Partial<TunnelRegister>): Promise<void> {
    if (msg.t !== "register" || typeof msg.runnerId !== "string" || !RUNNER_ID.test(msg.runnerId)) {
      return refuse(CloseCode.badHello, "bad_register", "First message must be a register");
    }
    const principal = await runnerKeyOwner(msg.apiKey, msg.runnerId, options);
    if (refused(principal)) return refuse(principal.close, principal.code, principal.message);
    // The control channel makes the runner known; the tunnel follows it.
    const runner = await options.store.runners.get(msg.runnerId);
    if (!runner || runner.userId !== principal.userId) {
      return refuse(CloseCode.forbidden, "forbidden", "Unknown runner: connect /_runner first");
    }
    if (socket.readyState !== OPEN) return;
    clearTimeout(timer);
    options.authenticated();
    link = new TunnelLink(socket, msg.runnerId, principal.userId, principal.keyId);
    options.registry.attach(link);
    socket.send(JSON.stringify({ t: "registered" }));
  }

  socket.onmessage = (ev) => {
    const data = ev.data;
    if (link) {
      if (data instanceof Uint8Array) link.mux.receive(data);
      return;
    }
    if (typeof data !== "string") {
      return refuse(CloseCode.badHello, "bad_register", "First message must be a register");
    }
    if (registering) return;
    registering = true;
    let msg: Partial<TunnelRegister>;
    try {
      msg = JSON.parse(data);
    } catch {
      return refuse(CloseCode.badHello, "bad_register", "Register is not JSON");
    }
    if (typeof msg !== "object" || msg === null) {
      return refuse(CloseCode.badHello, "bad_register", "Register is not a JSON object");
    }
    onRegister(msg).catch((err) => {
      options.log(`tunnel register failed: ${err}`);
      refuse(CloseCode.internalError, "internal", "Relay failed to accept the tunnel");
    }).finally(() => registering = false);
  };
  socket.onclose = () => {
    clearTimeout(timer);
    if (!link) return;
    link.mux.close("runner tunnel lost");
    options.registry.detach(link);
  };
  socket.onerror = () => {};
}
