/**
 * The runner's end of the tunnel channel (`/_tunnel`): dials the relay node
 * the control channel is on, with the control channel's backoff, registers
 * with the runner's key, and
 * answers the streams the relay opens. An HTTP stream is forwarded to
 * `127.0.0.1:{port}` only (the head names a port, never a host), its
 * request and response bodies streamed with the stream layer's credit.
 *
 * @module
 */
import { Backoff, delay } from "../shared/backoff.ts";
import { CloseCode } from "../shared/protocol.ts";
import { type MuxStream, StreamMux } from "../shared/streams.ts";
import { pipeBytes } from "../shared/stream_pipe.ts";
import {
  encodeResponseHead,
  MAX_TUNNEL_MESSAGE_BYTES,
  TUNNEL_STRIPPED_REQUEST_HEADERS,
  TUNNEL_STRIPPED_RESPONSE_HEADERS,
  TUNNEL_WS_PATH,
  type TunnelRequestHead,
  type TunnelResponseHead,
} from "../shared/tunnel_api.ts";
import type { TerminalStreamHead } from "../shared/terminal_api.ts";
import WebSocket from "ws";
import type { TunnelWsHead } from "../shared/tunnel_ws_api.ts";
import { serveWebSocket } from "./tunnel_ws.ts";
import { RelayNodes } from "./relay_nodes.ts";

/** Options of {@linkcode TunnelClient}. */
export interface TunnelClientOptions {
  /**
   * The relay's http(s) address, or its nodes: then the tunnel dials the
   * node the control channel is welcomed on (see {@linkcode TunnelClient}).
   */
  relay: string | RelayNodes;
  apiKey: string;
  runnerId: string;
  log: (line: string) => void;
  /** How long a connection may take to open; default 15 s. */
  handshakeMs?: number;
  /** Silence after which the relay is assumed gone; default 45 s. */
  silenceMs?: number;
  /**
   * Whether to dial now: the daemon's control link is welcomed (the relay
   * knows the runner only after its hello, and a relay the control link
   * cannot reach needs no second dialler). Default: always.
   */
  ready?: () => boolean;
  /** A terminal stream the relay opened (runner/workspace/terminal.ts). */
  onTerminal?: (stream: MuxStream, terminalId: unknown) => void;
}

/**
 * Runs the daemon's tunnel beside its control link, until `signal` aborts
 * or `stop()` (the control link ended) is called.
 */
export function runTunnel(
  config: { relayUrl?: string | null; apiKey?: string | null },
  runnerId: string,
  options: {
    /** The relay nodes the control channel moves between (default: `config.relayUrl` alone). */
    relay?: RelayNodes;
    log: (line: string) => void;
    ready: () => boolean;
    signal: AbortSignal;
    onTerminal?: TunnelClientOptions["onTerminal"];
  },
): { stop(): Promise<void> } {
  const { log, ready, signal, onTerminal } = options;
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  signal.addEventListener("abort", onAbort, { once: true });
  const running = config.relayUrl && config.apiKey
    ? new TunnelClient({
      relay: options.relay ?? config.relayUrl,
      apiKey: config.apiKey,
      runnerId,
      log,
      ready,
      onTerminal,
    })
      .run(ac.signal).catch((err) => log(`tunnel stopped: ${err}`))
    : Promise.resolve();
  return {
    async stop() {
      signal.removeEventListener("abort", onAbort);
      ac.abort();
      await running;
    },
  };
}

/** The tunnel URL of a relay address. */
export function tunnelUrl(relayUrl: string): string {
  return relayUrl.replace(/\/+$/, "").replace(/^http/, "ws") + TUNNEL_WS_PATH;
}

/**
 * The frame mask the runner's tunnel socket uses: none (all zeros, which ws
 * neither applies nor removes) over TLS or to a loopback relay, the random
 * mask of RFC 6455 otherwise. Masking protects proxies on the path from
 * bytes chosen by a page (a tunnelled service's body is such bytes); over
 * TLS or loopback no proxy reads the frames. ws masks in JavaScript here (no
 * native bufferutil), and on 300 MB tunnelled it cost the daemon 1.7 s of
 * CPU against 0.8–1.1 s without (shared 2-core box, load 14–18).
 */
export function tunnelMask(
  relayUrl: string,
): ((mask: Uint8Array) => void) | undefined {
  let url: URL;
  try {
    url = new URL(tunnelUrl(relayUrl));
  } catch {
    return undefined;
  }
  const loopback = /^(127\.\d+\.\d+\.\d+|\[::1\]|localhost)$/.test(url.hostname);
  return url.protocol === "wss:" || loopback ? (mask) => mask.fill(0) : undefined;
}

/**
 * Failed dials of the control channel's node after which the tunnel tries
 * the other nodes in turn (a node whose `/_tunnel` a proxy does not pass,
 * say): a tunnel on another node still serves, streams reach it over the bus.
 */
const TUNNEL_STRAY_AFTER = 3;

/**
 * Keeps the runner's tunnel connected until stopped or refused for good.
 * With several relay nodes it dials the one the control channel is welcomed
 * on, and when the control channel moves to another node it closes its
 * socket and follows (streams open at that moment are reset, as at any drop).
 */
export class TunnelClient {
  readonly #opts: TunnelClientOptions;
  readonly #nodes: RelayNodes;
  readonly #backoff = new Backoff({ initialMs: 500, maxMs: 15_000 });
  #mux: StreamMux | null = null;
  /** The control channel's node when last dialled, and the tunnel's failed dials there. */
  #home: string | null = null;
  #misses = 0;

  constructor(options: TunnelClientOptions) {
    this.#opts = options;
    this.#nodes = typeof options.relay === "string"
      ? new RelayNodes([options.relay])
      : options.relay;
  }

  /** The node to dial now: the control channel's, unless it kept refusing the tunnel. */
  #target(): string {
    const nodes = this.#nodes;
    const home = nodes.connected ?? nodes.current;
    if (home !== this.#home) {
      this.#home = home;
      this.#misses = 0;
    }
    const others = nodes.urls.filter((u) => u !== home);
    if (this.#misses < TUNNEL_STRAY_AFTER || others.length === 0) return home;
    return others[(this.#misses - TUNNEL_STRAY_AFTER) % others.length]!;
  }

  /** Streams open now (for tests and logs). */
  get openStreams(): number {
    return this.#mux?.size ?? 0;
  }

  /**
   * Dials and redials until `signal` aborts; resolves early when the relay
   * refuses the key (4001, 4401) or another runner took this id (4009): the
   * control channel reports those and stops the daemon.
   */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        while (this.#opts.ready && !this.#opts.ready()) await delay(100, signal);
      } catch {
        return;
      }
      const started = Date.now();
      const { code, reason, registered } = await this.#connectOnce(this.#target(), signal);
      if (signal.aborted) return;
      this.#misses = registered ? 0 : this.#misses + 1;
      if (
        code === CloseCode.unauthorized || code === CloseCode.revoked ||
        code === CloseCode.replaced
      ) {
        this.#opts.log(
          `tunnel refused (code ${code}${reason ? `: ${reason}` : ""}); not redialling`,
        );
        return;
      }
      if (Date.now() - started > 30_000) this.#backoff.reset();
      const wait = this.#backoff.next();
      this.#opts.log(
        `tunnel lost (code ${code}${reason ? `: ${reason}` : ""}); redialling in ${wait} ms`,
      );
      try {
        await delay(wait, signal);
      } catch {
        return;
      }
    }
  }

  #connectOnce(
    node: string,
    signal: AbortSignal,
  ): Promise<{ code: number; reason: string; registered: boolean }> {
    return new Promise((resolve) => {
      const { apiKey, runnerId } = this.#opts;
      let socket: WebSocket;
      try {
        socket = new WebSocket(tunnelUrl(node), {
          headers: { "x-api-key": apiKey },
          perMessageDeflate: false,
          handshakeTimeout: this.#opts.handshakeMs ?? 15_000,
          maxPayload: MAX_TUNNEL_MESSAGE_BYTES,
          generateMask: tunnelMask(node),
        });
      } catch (err) {
        resolve({ code: 0, reason: String(err), registered: false });
        return;
      }
      let mux: StreamMux | null = null;
      let lastHeard = Date.now();
      const silence = this.#opts.silenceMs ?? 45_000;
      const heartbeat = setInterval(() => {
        if (Date.now() - lastHeard > silence) return socket.terminate();
        if (socket.readyState === WebSocket.OPEN) socket.ping();
      }, Math.min(15_000, silence / 3));
      let cut: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => {
        socket.close(CloseCode.normal, "Runner stopping");
        cut = setTimeout(() => socket.terminate(), 2000);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      // The control channel settled on another node: follow it there.
      const unfollow = this.#nodes.onChange((connected) => {
        if (connected === null || connected === node) return;
        if (socket.readyState === WebSocket.CONNECTING) return socket.terminate();
        if (socket.readyState !== WebSocket.OPEN) return;
        socket.close(CloseCode.goingAway, "Following the control channel");
        cut ??= setTimeout(() => socket.terminate(), 2000);
      });
      socket.on("open", () => {
        socket.send(JSON.stringify({ t: "register", apiKey, runnerId }));
      });
      socket.on("pong", () => lastHeard = Date.now());
      socket.on("message", (data, isBinary) => {
        lastHeard = Date.now();
        const bytes = data as Uint8Array;
        if (isBinary) {
          mux?.receive(bytes);
          return;
        }
        let msg: { t?: string };
        try {
          msg = JSON.parse(String(data));
        } catch {
          return;
        }
        if (msg.t === "registered" && !mux) {
          this.#backoff.reset();
          mux = new StreamMux({
            dialer: false,
            send: (frame) => {
              if (socket.readyState === WebSocket.OPEN) socket.send(frame);
            },
            onStream: (stream, header) => serveStream(stream, header, this.#opts),
          });
          this.#mux = mux;
          this.#opts.log(
            this.#nodes.urls.length > 1 ? `tunnel connected to ${node}` : "tunnel connected",
          );
        }
      });
      socket.on("error", () => {});
      socket.on("close", (code, reasonBytes) => {
        clearInterval(heartbeat);
        clearTimeout(cut);
        unfollow();
        signal.removeEventListener("abort", onAbort);
        // Streams open at the drop are reset: the service's response is cancelled.
        mux?.close("tunnel lost");
        if (this.#mux === mux) this.#mux = null;
        resolve({ code, reason: reasonBytes.toString(), registered: mux !== null });
      });
    });
  }
}

/** Answers one stream the relay opened. */
export function serveStream(
  stream: MuxStream,
  header: Uint8Array,
  opts: Pick<TunnelClientOptions, "log" | "onTerminal">,
): void {
  const { log } = opts;
  let head: TunnelRequestHead | TerminalStreamHead | TunnelWsHead;
  try {
    head = JSON.parse(new TextDecoder().decode(header));
  } catch {
    return stream.reset("bad_open");
  }
  if (head?.kind === "terminal" && opts.onTerminal) {
    return opts.onTerminal(stream, head.terminalId);
  }
  if (head?.kind === "ws") {
    return void serveWebSocket(stream, head, loopbackUrl(head)).catch((err) => {
      log(`tunnel websocket failed: ${err}`);
      stream.reset("runner_error");
    });
  }
  if (head?.kind !== "http") return stream.reset("unknown_kind");
  serveHttp(stream, head).catch((err) => {
    log(`tunnel stream failed: ${err}`);
    stream.reset("runner_error");
  });
}

/** The loopback URL of a request head, or null when it would leave 127.0.0.1:{port}. */
export function loopbackUrl(head: Pick<TunnelRequestHead, "port" | "path">): URL | null {
  const { port, path } = head;
  if (!Number.isInteger(port) || port < 1 || port > 65535) return null;
  if (typeof path !== "string" || !path.startsWith("/") || path.startsWith("//")) return null;
  let url: URL;
  try {
    url = new URL(`http://127.0.0.1:${port}${path}`);
  } catch {
    return null;
  }
  return url.hostname === "127.0.0.1" && url.port === String(port) ? url : null;
}

async function serveHttp(stream: MuxStream, head: TunnelRequestHead): Promise<void> {
  const writer = stream.writable.getWriter();
  const fail = async (error: Extract<TunnelResponseHead, { error: unknown }>["error"]) => {
    await writer.write(encodeResponseHead({ error }));
    await writer.close();
  };
  const url = loopbackUrl(head);
  if (!url || typeof head.method !== "string" || !/^[A-Z]{1,20}$/.test(head.method)) {
    return await fail({
      code: "bad_target",
      message: "The runner forwards to 127.0.0.1:{port} only",
    });
  }
  const headers = new Headers();
  for (const [k, v] of Array.isArray(head.headers) ? head.headers : []) {
    if (typeof k !== "string" || typeof v !== "string") continue;
    // The relay sends a Cookie only on a tunnel origin of its own, with the service's cookies.
    const name = k.toLowerCase();
    if (name !== "cookie" && TUNNEL_STRIPPED_REQUEST_HEADERS.has(name)) continue;
    try {
      headers.append(k, v);
    } catch { /* an invalid header is dropped */ }
  }
  // Bodies pass through as the service sends them; fetch would otherwise
  // ask for gzip and decode it, and the relay would pass a decoded body
  // under the service's headers.
  headers.set("accept-encoding", "identity");
  const hasBody = head.method !== "GET" && head.method !== "HEAD";
  let res: Response;
  try {
    res = await fetch(url, {
      method: head.method,
      headers,
      redirect: "manual",
      ...(hasBody ? { body: stream.readable, duplex: "half" } as RequestInit : {}),
    });
  } catch (err) {
    // Deno's fetch names the cause only in its message: "tcp connect error: Connection refused".
    const refused = err instanceof Error &&
      /connection refused/i.test(`${err.message} ${err.cause}`);
    return await fail(
      refused
        ? { code: "port_closed", message: `Nothing is listening on port ${head.port}` }
        : { code: "upstream_error", message: `The service failed: ${String(err).slice(0, 300)}` },
    );
  }
  const out: [string, string][] = [];
  for (const [k, v] of res.headers) {
    if (k === "set-cookie" || TUNNEL_STRIPPED_RESPONSE_HEADERS.has(k)) continue;
    out.push([k, v]);
  }
  for (const c of res.headers.getSetCookie()) out.push(["set-cookie", c]);
  await writer.write(encodeResponseHead({ status: res.status, headers: out }));
  writer.releaseLock();
  if (res.body) await pipeBytes(res.body, stream);
  else await stream.writable.close();
}
