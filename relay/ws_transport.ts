/**
 * The relay's WebSocket server, on npm:ws rather than `Deno.upgradeWebSocket`.
 *
 * Deno's built-in upgrade reads every message whole before handing it over
 * and has no size option (denoland/deno#15809; its fastwebsockets reader
 * takes up to 64 MiB): twenty unauthenticated sockets sending 60 MB each
 * took the relay from 137 MB to 1.15 GB. ws reads the length in a frame's
 * header and closes with 1009 before buffering the payload (`maxPayload`,
 * per channel), which needs the raw socket of node:http's `upgrade` event;
 * that is why serve.ts serves on node:http (docs/architecture.md has the
 * measurements behind the choice).
 *
 * Besides the size of a message, a socket that has not authenticated yet
 * may receive only `firstMessageBytes` in all (its auth or hello), and each
 * address may hold only `unauthenticatedPerAddress` such sockets at once.
 * Liveness is a ping every half idle period; a socket that answered nothing
 * for a whole period is dropped (what Deno's `idleTimeout` did).
 *
 * @module
 */
import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { WebSocket, WebSocketServer } from "ws";
import { CloseCode } from "../shared/protocol.ts";
import { AddressCounter } from "./address_limits.ts";
import { HttpError } from "./_http.ts";

/** What the viewer and runner channels use of a server-side WebSocket. */
export interface ChannelSocket {
  readonly readyState: number;
  readonly bufferedAmount: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  /** Stops reading from the peer (its messages wait in the kernel; ws has these). */
  pause?(): void;
  /** Reads again. */
  resume?(): void;
}

/** The channels; each has its own message limit and idle period. */
export type Channel = "viewer" | "runner" | "tunnel" | "terminal" | "preview";

/** Limits of {@linkcode WsTransport}. */
export interface WsLimits {
  /** Largest message per channel, in bytes (a larger one closes the socket with 1009). */
  maxMessageBytes: Record<Channel, number>;
  /** Seconds without any frame from the peer before it is dropped, per channel. */
  idleSeconds: Record<Channel, number>;
  /** Bytes a socket may receive before it has authenticated, per channel. */
  firstMessageBytes: Record<Channel, number>;
  /** Sockets not yet authenticated one address may hold (0: no limit). */
  unauthenticatedPerAddress: number;
}

/** One upgraded socket, as the channel handlers get it. */
export interface Upgraded {
  socket: ChannelSocket;
  /** The answer the route returns; serve.ts does not write it (see isUpgraded). */
  response: Response;
  /** Lifts the first-message limit and frees the address's unauthenticated slot. */
  authenticated(): void;
}

/** Options of {@linkcode WsTransport.upgrade}. */
export interface UpgradeOptions {
  channel: Channel;
  /** The client's address, for the per-address count of unauthenticated sockets. */
  address: string;
  /** Whether the upgrade request itself authenticated (a cookie or key header). */
  authenticated: boolean;
  /** The subprotocol to answer with (a tunnelled WebSocket: the one the service chose). */
  protocol?: string;
}

interface RawUpgrade {
  req: IncomingMessage;
  socket: Socket;
  head: Buffer;
}

interface Live {
  ws: WebSocket;
  alive: boolean;
  /** Sweeps in a row that found the socket paused (see #sweep). */
  pausedSweeps: number;
}

/**
 * Sweeps (two per idle period) a paused socket lives through: three idle
 * periods. A socket paused while its messages wait for a slow store
 * (_in_order.ts) reads no pongs, and one idle period would drop every busy
 * link at the first stall of a few seconds more than it.
 */
const PAUSED_SWEEPS = 6;

const KEY = /^[+/0-9A-Za-z]{22}==$/;

/** Accepts WebSockets from node:http's upgrade event, with the limits above. */
export class WsTransport {
  readonly #raw = new WeakMap<Request, RawUpgrade>();
  readonly #upgraded = new WeakSet<Request>();
  #servers: Record<Channel, WebSocketServer> | null = null;
  #loading: Promise<void> | null = null;
  readonly #live: Record<Channel, Set<Live>> = {
    viewer: new Set(),
    runner: new Set(),
    tunnel: new Set(),
    terminal: new Set(),
    preview: new Set(),
  };
  /** The subprotocol chosen for a handshake in progress (UpgradeOptions.protocol). */
  readonly #protocols = new WeakMap<IncomingMessage, string>();
  readonly #timers: ReturnType<typeof setInterval>[] = [];
  readonly #unauthenticated: AddressCounter;

  constructor(readonly limits: WsLimits) {
    this.#unauthenticated = new AddressCounter(limits.unauthenticatedPerAddress);
    for (const channel of ["viewer", "runner", "tunnel", "terminal", "preview"] as const) {
      const timer = setInterval(() => this.#sweep(channel), limits.idleSeconds[channel] * 500);
      Deno.unrefTimer(timer as unknown as number);
      this.#timers.push(timer);
    }
  }

  /**
   * Loads npm:ws, on the first upgrade: a relay no runner or browser has
   * connected to yet does without it.
   */
  ready(): Promise<void> {
    this.#loading ??= import("ws").then(({ WebSocketServer }) => {
      const server = (channel: Channel) =>
        new WebSocketServer({
          noServer: true,
          maxPayload: this.limits.maxMessageBytes[channel],
          perMessageDeflate: false,
          clientTracking: false,
          ...(channel === "preview"
            ? {
              handleProtocols: (offered: Set<string>, req: IncomingMessage) => {
                const chosen = this.#protocols.get(req);
                return chosen !== undefined && offered.has(chosen) ? chosen : false;
              },
            }
            : {}),
        });
      this.#servers = {
        viewer: server("viewer"),
        runner: server("runner"),
        tunnel: server("tunnel"),
        terminal: server("terminal"),
        preview: server("preview"),
      };
    }).catch((err) => {
      this.#loading = null;
      throw err;
    });
    return this.#loading;
  }

  /** Keeps node's upgrade request for the route that will handle `request`. */
  hold(request: Request, raw: RawUpgrade): void {
    this.#raw.set(request, raw);
  }

  /**
   * Whether `request` was upgraded (its socket speaks WebSocket now, so the
   * route's answer is not written; middleware may have replaced that answer
   * with a copy, so the request is what is remembered).
   */
  isUpgraded(request: Request): boolean {
    return this.#upgraded.has(request);
  }

  /**
   * Completes the handshake of `request`; throws an HttpError (400) for a
   * malformed one or (429) when the address holds too many sockets that have
   * not authenticated.
   */
  upgrade(request: Request, options: UpgradeOptions): Upgraded {
    const raw = this.#raw.get(request);
    if (!raw) {
      throw new HttpError(400, "bad_upgrade", "Invalid WebSocket handshake: not an upgrade");
    }
    this.#raw.delete(request);
    const h = raw.req.headers;
    if (!KEY.test(h["sec-websocket-key"] ?? "")) {
      throw new HttpError(400, "bad_upgrade", "Invalid WebSocket handshake: Sec-WebSocket-Key");
    }
    if (h["sec-websocket-version"] !== "13") {
      throw new HttpError(400, "bad_upgrade", "Invalid WebSocket handshake: version must be 13", {
        "sec-websocket-version": "13",
      });
    }
    const { address, channel } = options;
    let pending = !options.authenticated;
    if (pending && !this.#unauthenticated.tryAcquire(address)) {
      throw new HttpError(
        429,
        "too_many_connections",
        "Too many unauthenticated WebSockets from this address",
      );
    }
    const release = () => {
      if (pending) this.#unauthenticated.release(address);
      pending = false;
    };
    let ws: WebSocket | null = null;
    if (options.protocol) this.#protocols.set(raw.req, options.protocol);
    if (!this.#servers) throw new Error("WsTransport: upgrade before ready()");
    this.#servers[channel].handleUpgrade(raw.req, raw.socket, raw.head, (w) => ws = w);
    const accepted = ws as WebSocket | null;
    if (!accepted) {
      release();
      throw new HttpError(400, "bad_upgrade", "Invalid WebSocket handshake: connection closed");
    }
    const live: Live = { ws: accepted, alive: true, pausedSweeps: 0 };
    this.#live[channel].add(live);
    accepted.on("pong", () => live.alive = true);
    accepted.on("message", () => live.alive = true);
    accepted.on("close", () => {
      this.#live[channel].delete(live);
      release();
    });
    if (pending) {
      this.#capFirstMessage(
        accepted,
        raw.socket,
        this.limits.firstMessageBytes[channel],
        () => pending,
      );
    }
    const response = new Response(null, { status: 200 });
    this.#upgraded.add(request);
    return {
      socket: accepted as unknown as ChannelSocket,
      response,
      authenticated: release,
    };
  }

  /** Drops every socket still open (the hub has sent its close frames) and stops the pings. */
  close(): void {
    for (const t of this.#timers) clearInterval(t);
    for (const set of Object.values(this.#live)) {
      for (const { ws } of set) ws.terminate();
      set.clear();
    }
  }

  /**
   * Counts the bytes an unauthenticated socket receives; past the limit it
   * closes with 1009 and discards whatever else arrives until it is cut. The count is of raw bytes, before
   * ws parses them, so nothing larger is ever buffered for such a socket.
   */
  #capFirstMessage(
    ws: WebSocket,
    socket: Socket,
    limit: number,
    stillPending: () => boolean,
  ): void {
    let received = 0;
    const onData = (chunk: Buffer) => {
      if (!stillPending()) return socket.off("data", onData);
      received += chunk.byteLength;
      if (received <= limit) return;
      // Read on but drop what comes (ws no longer sees it): a client still
      // writing a large first message (8 MB) would otherwise block on a
      // paused socket, never read the close frame, and see an abnormal
      // closure (code 0) instead of 1009 when the socket is cut.
      socket.removeAllListeners("data");
      socket.on("data", () => {});
      ws.close(CloseCode.tooBig, "Authenticate first, in a small message");
      // Its close frame would not be read back either: cut the socket after a second.
      setTimeout(() => ws.terminate(), 1000);
    };
    socket.prependListener("data", onData);
  }

  #sweep(channel: Channel): void {
    for (const live of this.#live[channel]) {
      if (live.ws.isPaused) {
        // Still bounded: a task that never ends does not hold the socket for ever.
        if (++live.pausedSweeps >= PAUSED_SWEEPS) live.ws.terminate();
        continue;
      }
      live.pausedSweeps = 0;
      if (!live.alive) {
        live.ws.terminate();
        continue;
      }
      live.alive = false;
      try {
        live.ws.ping();
      } catch {
        // Closing already.
      }
    }
  }
}
