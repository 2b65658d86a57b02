import { Backoff, delay } from "../shared/backoff.ts";
import { utf8Over } from "../shared/bytes.ts";
import { jsonTooDeep, MAX_LINK_DEPTH, parseJson } from "../shared/json.ts";
import {
  type AckMessage,
  CloseCode,
  type ControlRequest,
  type ErrorMessage,
  MAX_WS_MESSAGE_BYTES,
  PROTOCOL_VERSION,
  type RelayWelcome,
  type ResultMessage,
  type RunnerHello,
  type WireError,
} from "../shared/protocol.ts";
import { READ_WINDOW_CHUNKS } from "../shared/workspace_files_api.ts";
import { OPEN, openRelaySocket, type RelaySocket } from "./relay_socket.ts";
import { controlUrl } from "./config.ts";
import type { RelayNodes } from "./relay_nodes.ts";

/** The relay refused the runner for good (bad key, foreign runner id): retrying cannot help. */
export class RelayRejectedError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = "RelayRejectedError";
  }
}

/** Callbacks and settings of {@linkcode ControlLink}. */
export interface ControlLinkOptions {
  /**
   * The relay nodes: each dial goes to `current` (`ws(s)://node/_runner`),
   * and a failed dial or a lost connection moves on to the next node.
   */
  relay: RelayNodes;
  /** Builds the hello for each (re)connection, with the sessions held right now. */
  hello: () => Omit<RunnerHello, "t" | "v">;
  onWelcome: (welcome: RelayWelcome) => void;
  /** Answers a request; `reply` sends a long answer in pieces before the final result. */
  onRequest: (op: string, data: unknown, reply: ReplyStream) => Promise<unknown>;
  onAck: (ack: AckMessage) => void;
  onRelayError: (err: ErrorMessage) => void;
  /** Called when a connection is lost (the daemon keeps buffering). */
  onDisconnect?: () => void;
  log: (line: string) => void;
  /** How long to wait for a sign of life before assuming the relay is gone. */
  silenceMs?: number;
  /** How long a connection may take to open (TCP, TLS, upgrade) before it is dialled again. */
  handshakeMs?: number;
}

/** A request failure the daemon reports back with a code. */
export class RequestError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = "RequestError";
  }
}

/**
 * The runner's end of the control channel: dials out, says hello, answers
 * requests and reconnects with jittered backoff whenever the link drops,
 * to the next relay node when there are several.
 */
export class ControlLink {
  readonly #opts: ControlLinkOptions;
  #socket: RelaySocket | null = null;
  #welcomed = false;
  readonly #backoff = new Backoff({ initialMs: 500, maxMs: 15_000 });
  readonly #calls = new Map<
    number,
    { resolve: (d: unknown) => void; reject: (e: Error) => void }
  >();
  #nextCall = 1;
  /** Requests being answered, by id: their piece-by-piece answers. */
  readonly #replies = new Map<number, ChunkedReply>();

  constructor(options: ControlLinkOptions) {
    this.#opts = options;
  }

  /** True between the relay's welcome and the loss of the connection. */
  get connected(): boolean {
    return this.#welcomed && this.#socket?.readyState === OPEN;
  }

  /** Sends a message when connected; false when it could not be sent. */
  send(msg: unknown): boolean {
    return this.#sendText(JSON.stringify(msg));
  }

  #sendText(text: string): boolean {
    if (!this.connected) return false;
    this.#socket!.send(text);
    return true;
  }

  /**
   * Asks the relay something on behalf of a session (its agent's trigger
   * tools). A call the relay would refuse whole (nested too deep, or over
   * the channel's message limit, which would also close the link) fails here
   * at once, with a reason the agent can act on.
   */
  call(op: string, data: Record<string, unknown>, timeoutMs = 20_000): Promise<unknown> {
    const id = this.#nextCall++;
    const text = JSON.stringify({ t: "call", id, op, data });
    if (jsonTooDeep(text, MAX_LINK_DEPTH)) {
      return Promise.reject(
        new RequestError(
          "too_deep",
          `The arguments nest too deep (over ${MAX_LINK_DEPTH} levels with the call around them)`,
        ),
      );
    }
    if (utf8Over(text, MAX_WS_MESSAGE_BYTES)) {
      return Promise.reject(
        new RequestError(
          "too_big",
          `The arguments are over ${MAX_WS_MESSAGE_BYTES / 1024 / 1024} MiB as JSON`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#calls.delete(id);
        reject(new RequestError("relay_timeout", "The relay did not answer in time"));
      }, timeoutMs);
      this.#calls.set(id, {
        resolve: (d) => (clearTimeout(timer), resolve(d)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      if (!this.#sendText(text)) {
        this.#calls.get(id)?.reject(
          new RequestError("relay_offline", "The runner is not connected to its relay right now"),
        );
        this.#calls.delete(id);
      }
    });
  }

  /** Bytes queued on the socket and not yet written. */
  get bufferedAmount(): number {
    return this.#socket?.bufferedAmount ?? 0;
  }

  /** Closes the current connection so that the loop dials again. */
  drop(): void {
    if (this.#socket) closeSoon(this.#socket, CloseCode.goingAway, "Reconnecting");
  }

  /**
   * Keeps a connection up until `signal` aborts. Rejects with
   * {@linkcode RelayRejectedError} when the relay refuses the key or id.
   */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const started = Date.now();
      const { relay } = this.#opts;
      const node = relay.current;
      const outcome = await this.#connectOnce(node, signal);
      if (outcome.rejected) throw outcome.rejected;
      if (signal.aborted) return;
      relay.failed(node);
      if (Date.now() - started > 30_000) this.#backoff.reset();
      const wait = this.#backoff.next();
      const moved = relay.current === node ? "" : ` to ${relay.current}`;
      this.#opts.log(`relay link lost (${outcome.reason}); reconnecting${moved} in ${wait} ms`);
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
  ): Promise<{ reason: string; rejected?: RelayRejectedError }> {
    return new Promise((resolve) => {
      let socket: RelaySocket;
      // The key goes in the handshake too: the relay checks it there, and a
      // hello listing many sessions may then be larger than an unknown one's.
      const hello = this.#opts.hello();
      try {
        socket = openRelaySocket(controlUrl(node), this.#opts.handshakeMs, {
          "x-api-key": hello.apiKey,
        });
      } catch (err) {
        resolve({ reason: String(err) });
        return;
      }
      this.#socket = socket;
      this.#welcomed = false;
      let rejected: RelayRejectedError | undefined;
      let lastHeard = Date.now();
      const silence = this.#opts.silenceMs ?? 45_000;
      const heartbeat = setInterval(() => {
        if (Date.now() - lastHeard > silence) {
          // Nobody is there to answer a closing handshake.
          socket.terminate();
          return;
        }
        if (socket.readyState === OPEN) socket.send(JSON.stringify({ t: "ping" }));
      }, Math.min(15_000, silence / 3));
      const onAbort = () => closeSoon(socket, CloseCode.normal, "Runner stopping");
      signal.addEventListener("abort", onAbort, { once: true });

      socket.on("open", () => {
        // The sessions held now, the key the handshake showed.
        socket.send(
          JSON.stringify({
            t: "hello",
            v: PROTOCOL_VERSION,
            ...this.#opts.hello(),
            apiKey: hello.apiKey,
          }),
        );
      });
      socket.on("message", (data, isBinary) => {
        lastHeard = Date.now();
        if (isBinary) return;
        let msg: { t?: string; [k: string]: unknown };
        try {
          // Capped as the relay caps what the runner sends (shared/json.ts);
          // a deeper message is dropped as unreadable JSON is.
          msg = parseJson(data.toString(), MAX_LINK_DEPTH) as typeof msg;
        } catch {
          return;
        }
        this.#handle(socket, node, msg, (err) => rejected = err);
      });
      // A failed dial or a broken socket: "close" follows with code 1006.
      socket.on("error", () => {});
      socket.on("close", (code, reasonBytes) => {
        const ev = { code, reason: reasonBytes.toString() };
        clearInterval(heartbeat);
        signal.removeEventListener("abort", onAbort);
        const wasUp = this.#welcomed;
        for (const c of this.#calls.values()) {
          c.reject(new RequestError("relay_offline", "The connection to the relay was lost"));
        }
        this.#calls.clear();
        for (const r of this.#replies.values()) r.cancel();
        this.#replies.clear();
        this.#welcomed = false;
        if (this.#socket === socket) this.#socket = null;
        if (wasUp) this.#opts.onDisconnect?.();
        if (!rejected && (ev.code === CloseCode.unauthorized || ev.code === CloseCode.revoked)) {
          rejected = new RelayRejectedError("unauthorized", ev.reason || "API key rejected");
        }
        if (!rejected && ev.code === CloseCode.forbidden) {
          rejected = new RelayRejectedError("forbidden", ev.reason || "Runner refused");
        }
        // Another process connected with this runner id (a second daemon on
        // the same HOME): the newest one wins, instead of both taking turns.
        if (!rejected && ev.code === CloseCode.replaced) {
          rejected = new RelayRejectedError(
            "replaced",
            "Another runner with this runner id connected to the relay; this one stops",
          );
        }
        resolve({ reason: `code ${ev.code}${ev.reason ? `: ${ev.reason}` : ""}`, rejected });
      });
    });
  }

  #handle(
    socket: RelaySocket,
    node: string,
    msg: { t?: string; [k: string]: unknown },
    reject: (err: RelayRejectedError) => void,
  ): void {
    switch (msg.t) {
      case "welcome":
        this.#welcomed = true;
        this.#opts.relay.welcomed(node);
        this.#opts.onWelcome(msg as unknown as RelayWelcome);
        return;
      case "ack":
        this.#opts.onAck(msg as unknown as AckMessage);
        return;
      case "result": {
        const r = msg as unknown as ResultMessage;
        const pending = this.#calls.get(r.id);
        if (!pending) return;
        this.#calls.delete(r.id);
        if (r.ok) pending.resolve(r.data);
        else {pending.reject(
            new RequestError(r.error?.code ?? "relay_error", r.error?.message ?? "Relay error"),
          );}
        return;
      }
      case "req": {
        const req = msg as unknown as ControlRequest;
        const stream = new ChunkedReply(req.id, (m) => {
          if (socket.readyState !== OPEN) return false;
          socket.send(JSON.stringify(m));
          return true;
        });
        this.#replies.set(req.id, stream);
        this.#opts.onRequest(req.op, req.data, stream).finally(() => this.#replies.delete(req.id))
          .then(
            (data) => answer(req.id, { t: "res", id: req.id, ok: true, data: data ?? {} }),
            (err) => {
              const error: WireError = err instanceof RequestError
                ? { code: err.code, message: err.message }
                : {
                  code: "runner_error",
                  message: err instanceof Error ? err.message : String(err),
                };
              answer(req.id, { t: "res", id: req.id, ok: false, error });
            },
          );
        return;
      }
      case "error": {
        const err = msg as unknown as ErrorMessage;
        if (!this.#welcomed && (err.code === "unauthorized" || err.code === "forbidden")) {
          reject(new RelayRejectedError(err.code, err.message));
        }
        this.#opts.onRelayError(err);
        return;
      }
      case "chunk_ack":
        if (typeof msg.id === "number") this.#replies.get(msg.id)?.ack();
        return;
      case "cancel":
        if (typeof msg.id === "number") this.#replies.get(msg.id)?.cancel();
        return;
      case "pong":
        return;
    }
    /**
     * Sends the answer to a request; one the relay would refuse whole (over
     * the channel's 8 MiB, which would close the link, or nested too deep)
     * becomes an error answer that says so.
     */
    function answer(id: number, res: unknown) {
      if (socket.readyState !== OPEN) return;
      let text = JSON.stringify(res);
      const tooBig = utf8Over(text, MAX_WS_MESSAGE_BYTES);
      if (tooBig || jsonTooDeep(text, MAX_LINK_DEPTH)) {
        const error: WireError = tooBig
          ? { code: "answer_too_big", message: "The runner's answer is over 8 MiB" }
          : { code: "answer_too_deep", message: "The runner's answer nests too deep" };
        text = JSON.stringify({ t: "res", id, ok: false, error });
      }
      socket.send(text);
    }
  }
}

/**
 * Starts a closing handshake and gives the relay a moment to answer (ws
 * would wait 30 s) before dropping the connection.
 */
function closeSoon(socket: RelaySocket, code: number, reason: string): void {
  if (socket.readyState === socket.CLOSED) return;
  socket.close(code, reason);
  const timer = setTimeout(() => socket.terminate(), 2000);
  socket.once("close", () => clearTimeout(timer));
}

/** What a request handler uses to send its answer in pieces (docs/protocol.md, "Chunked answers"). */
export interface ReplyStream {
  /** Sends one piece; waits while the relay has a window's worth unacknowledged. */
  chunk(data: string): Promise<void>;
  /** Aborts when the relay cancelled the request or the link dropped. */
  readonly signal: AbortSignal;
}

/** How long a piece may wait for the relay's acknowledgement before the answer is given up. */
const ACK_TIMEOUT_MS = 60_000;

/**
 * One answer sent as `chunk` frames, then the usual `res`, paced by the
 * relay's `chunk_ack`s so that the relay never holds more than
 * READ_WINDOW_CHUNKS of it: `read_file` of a 10 MiB file is ~13.3 MiB of
 * base64, over the 8 MiB cap of one runner message.
 */
class ChunkedReply implements ReplyStream {
  readonly #send: (msg: unknown) => boolean;
  readonly #id: number;
  readonly #abort = new AbortController();
  #sent = 0;
  #acked = 0;
  #wake: (() => void) | null = null;

  constructor(id: number, send: (msg: unknown) => boolean) {
    this.#id = id;
    this.#send = send;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  async chunk(data: string): Promise<void> {
    while (this.#sent - this.#acked >= READ_WINDOW_CHUNKS) {
      this.#check();
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.#wake = null;
          reject(new RequestError("relay_too_slow", "The relay did not take the answer in time"));
        }, ACK_TIMEOUT_MS);
        this.#wake = () => {
          clearTimeout(timer);
          this.#wake = null;
          resolve();
        };
      });
    }
    this.#check();
    if (!this.#send({ t: "chunk", id: this.#id, data })) this.cancel();
    this.#check();
    this.#sent++;
  }

  /** The relay took one piece. */
  ack(): void {
    this.#acked++;
    this.#wake?.();
  }

  /** The relay cancelled the request (its client went away), or the link dropped. */
  cancel(): void {
    this.#abort.abort();
    this.#wake?.();
  }

  #check(): void {
    if (this.#abort.signal.aborted) {
      throw new RequestError("cancelled", "The request was cancelled");
    }
  }
}
