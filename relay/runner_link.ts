/**
 * The relay's end of one runner's control connection: requests to the runner
 * by id, their answers (which may come in pieces: chunked_reply.ts) and
 * timeouts, and what a runner's error code means to the relay's callers.
 * The socket's hello and message switch are runner_socket.ts.
 *
 * @module
 */
import type { ControlResponse, WireError } from "../shared/protocol.ts";
import type { ChunkSink } from "./chunked_reply.ts";
import { type ErrorKind, offline, rejected, RelayError, timeout } from "./errors.ts";
import type { RunnerConnection } from "./runner_registry.ts";
import type { ChannelSocket } from "./ws_transport.ts";

interface Pending {
  resolve: (data: unknown) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
  /** Takes the pieces of a chunked answer; each one (and each ack) restarts the timer. */
  sink?: ChunkSink;
  rearm: () => void;
}

/** The relay's end of one runner's control connection, after its hello was accepted. */
export class RunnerLink implements RunnerConnection {
  /** Sessions whose spawn request is in flight (not yet confirmed by the runner). */
  readonly pendingSpawns = new Set<string>();
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed = false;

  constructor(
    readonly socket: ChannelSocket,
    readonly runnerId: string,
    readonly userId: string,
    readonly keyId: string | null,
  ) {}

  send(msg: unknown): void {
    if (this.#closed || this.socket.readyState !== WebSocket.OPEN) return;
    this.socket.send(JSON.stringify(msg));
  }

  /**
   * Sends a request and resolves with the runner's answer; rejects with a
   * RelayError. With a `sink`, the answer may come in pieces first.
   */
  request(op: string, data: unknown, timeoutMs: number, sink?: ChunkSink): Promise<unknown> {
    // A socket already closing (its close frame came in) is offline: a request sent
    // now would only wait for the close (502) instead of answering 503 at once.
    if (this.#closed || this.socket.readyState !== WebSocket.OPEN) {
      return Promise.reject(offline());
    }
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const expire = () => {
        this.#pending.delete(id);
        reject(timeout("runner_timeout", `Runner did not answer '${op}' in time`));
      };
      const p: Pending = {
        resolve,
        reject,
        timer: setTimeout(expire, timeoutMs),
        rearm: () => (clearTimeout(p.timer), p.timer = setTimeout(expire, timeoutMs)),
      };
      if (sink) {
        p.sink = sink;
        sink.bind({
          ack: () => (p.rearm(), this.send({ t: "chunk_ack", id })),
          cancel: (reason) => this.#abandon(id, reason),
        });
      }
      this.#pending.set(id, p);
      try {
        this.send({ t: "req", id, op, data });
      } catch (err) {
        // Not serialisable (e.g. nested past what JSON.stringify's stack takes):
        // fail now rather than wait for the timeout.
        this.#pending.delete(id);
        clearTimeout(p.timer);
        reject(err);
      }
    });
  }

  /** A piece of a chunked answer; a malformed one (or one past the window) fails the request. */
  chunk(id: number, data: unknown): void {
    const p = this.#pending.get(id);
    if (!p?.sink) return;
    p.rearm();
    if (!p.sink.push(data)) {
      this.#abandon(id, rejected("bad_runner_answer", "Runner sent a malformed chunked answer"));
    }
  }

  /** Stops waiting for a request, tells the runner to stop answering it, fails it with `reason`. */
  #abandon(id: number, reason: Error): void {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    this.send({ t: "cancel", id });
    p.reject(reason);
  }

  /** Settles the request a response answers. */
  resolve(msg: ControlResponse): void {
    const p = this.#pending.get(msg.id);
    if (!p) return;
    this.#pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.ok) p.resolve(msg.data);
    else p.reject(runnerError(msg.error));
  }

  /** Fails every pending request (the socket is gone). */
  failPending(): void {
    this.#closed = true;
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(new RelayError("unreachable", "runner_unreachable", "Runner disconnected"));
    }
    this.#pending.clear();
  }

  close(code: number, reason: string): void {
    try {
      this.socket.close(code, reason);
    } catch {
      // Already closing.
    }
    this.failPending();
  }
}

/** What a runner's error code means to the relay's callers (any other code: it failed). */
const RUNNER_ERROR_KINDS: Record<string, ErrorKind> = {
  cwd_outside_roots: "invalid",
  bad_request: "invalid",
  cwd_not_found: "invalid",
  unknown_model: "invalid",
  not_found: "not_found",
  busy: "conflict",
  session_ended: "conflict",
  not_ready: "conflict",
  not_queued: "conflict",
  runner_timeout: "timeout",
  /** The session's worker did not start (or wake) within the runner's `startTimeout`. */
  start_timeout: "timeout",
};

/** The RelayError for an error the runner reported, keeping its code and message. */
function runnerError(e: WireError | undefined): RelayError {
  const code = typeof e?.code === "string" ? e.code : "runner_error";
  const message = typeof e?.message === "string" && e.message.trim() !== ""
    ? e.message
    : "Runner failed the request";
  return new RelayError(
    Object.hasOwn(RUNNER_ERROR_KINDS, code) ? RUNNER_ERROR_KINDS[code]! : "rejected",
    code,
    message,
  );
}
