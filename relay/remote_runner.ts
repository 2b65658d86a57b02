/**
 * Runners held by another relay node, reached over the bus: the node that
 * holds a runner's control socket serves requests for it
 * ({@linkcode RunnerServer}), and every other node asks through a
 * {@linkcode RemoteRunner}. A plain request crosses as it is; a message
 * (`send`) crosses as the `_send` op; an answer in pieces (a file read) is
 * pulled one piece per bus request, so neither node holds more than the
 * runner's window of pieces whatever the reader's pace.
 *
 * @module
 */
import { ChunkQueue, type ChunkSink } from "./chunked_reply.ts";
import type { Bus } from "./bus/mod.ts";
import { offline, RelayError } from "./errors.ts";
import { READ_WINDOW_CHUNKS } from "../shared/workspace_files_api.ts";
import type { RunnerConnection } from "./runner_connection.ts";

/** Hands a message to the runner's link (its `send`). */
const SEND_OP = "_send";
/** Starts a request whose answer comes in pieces; answers `{handle}`. */
const OPEN_OP = "_chunked_open";
/** The next piece (`{piece}`) or the final result (`{result}`) of an open answer. */
const NEXT_OP = "_chunked_next";
/** Stops an open answer (the reader went away). */
const CANCEL_OP = "_chunked_cancel";
/** Answers in pieces that one node may have open for other nodes at once. */
const MAX_OPEN_ANSWERS = 256;
/** An open answer nobody pulled from for this long is cancelled (ms). */
const ANSWER_IDLE_MS = 60_000;
/** How long one pull of a piece may take before the reader gives up (ms). */
const PULL_TIMEOUT_MS = 30_000;

/** One answer in pieces that a node pulls from this one. */
interface OpenAnswer {
  queue: ChunkQueue;
  timer: ReturnType<typeof setTimeout>;
}

/** Answers other nodes' requests for the runners whose links this node holds. */
export class RunnerServer {
  readonly #answers = new Map<string, OpenAnswer>();
  readonly #link: (runnerId: string) => RunnerConnection | undefined;

  constructor(link: (runnerId: string) => RunnerConnection | undefined) {
    this.#link = link;
  }

  /** The answer to one bus request for `runnerId` (a RunnerHandler). */
  async serve(runnerId: string, op: string, data: unknown, timeoutMs: number): Promise<unknown> {
    if (op === NEXT_OP) return await this.#next(handleOf(data));
    if (op === CANCEL_OP) return this.#cancel(handleOf(data));
    const link = this.#link(runnerId);
    if (!link) throw offline();
    if (op === SEND_OP) {
      link.send(data);
      return {};
    }
    if (op === OPEN_OP) return this.#open(link, data, timeoutMs);
    return await link.request(op, data, timeoutMs);
  }

  #open(link: RunnerConnection, data: unknown, timeoutMs: number): { handle: string } {
    const { op, data: inner } = (data ?? {}) as { op?: unknown; data?: unknown };
    if (typeof op !== "string") throw new RelayError("invalid", "invalid", "Missing op");
    if (this.#answers.size >= MAX_OPEN_ANSWERS) {
      throw new RelayError("rate_limited", "too_many_reads", "Too many reads across relay nodes");
    }
    const handle = crypto.randomUUID();
    const queue = new ChunkQueue();
    queue.settle(link.request(op, inner, timeoutMs, queue));
    this.#answers.set(handle, { queue, timer: this.#idleTimer(handle) });
    return { handle };
  }

  #idleTimer(handle: string): ReturnType<typeof setTimeout> {
    return setTimeout(() => this.#cancel(handle), ANSWER_IDLE_MS);
  }

  async #next(handle: string): Promise<unknown> {
    const open = this.#answers.get(handle);
    if (!open) {
      throw new RelayError("unreachable", "read_gone", "The read ended on the runner's node");
    }
    clearTimeout(open.timer);
    try {
      const next = await open.queue.next();
      if ("piece" in next) {
        open.timer = this.#idleTimer(handle);
        return next;
      }
      this.#answers.delete(handle);
      return { result: next.result ?? {} };
    } catch (err) {
      this.#answers.delete(handle);
      throw err;
    }
  }

  #cancel(handle: string): Record<string, never> {
    const open = this.#answers.get(handle);
    if (!open) return {};
    this.#answers.delete(handle);
    clearTimeout(open.timer);
    open.queue.cancel();
    return {};
  }

  /** Cancels every open answer (the relay shuts down). */
  close(): void {
    for (const handle of [...this.#answers.keys()]) this.#cancel(handle);
  }
}

function handleOf(data: unknown): string {
  const handle = (data as { handle?: unknown } | null)?.handle;
  if (typeof handle !== "string") throw new RelayError("invalid", "invalid", "Missing handle");
  return handle;
}

/**
 * A runner whose control socket another relay node holds. Its requests go
 * through the bus to that node, which asks the runner and sends the answer
 * back; `close` is that node's business.
 */
export class RemoteRunner implements RunnerConnection {
  readonly keyId = null;
  /** Spawns in flight are kept by the node holding the runner; this one only asks. */
  readonly pendingSpawns = new Set<string>();

  constructor(
    readonly bus: Bus,
    readonly runnerId: string,
    readonly userId: string,
    readonly log: (line: string) => void,
  ) {}

  send(msg: unknown): void {
    this.bus.requestRunner(this.runnerId, SEND_OP, msg, 10_000).catch((err) =>
      this.log(`sending to runner ${this.runnerId} through the bus: ${err}`)
    );
  }

  request(op: string, data: unknown, timeoutMs: number, sink?: ChunkSink): Promise<unknown> {
    if (!sink) return this.bus.requestRunner(this.runnerId, op, data, timeoutMs);
    return this.#pull(op, data, timeoutMs, sink);
  }

  close(): void {
    // The node that holds the socket closes it.
  }

  /**
   * An answer in pieces: opened on the runner's node, then pulled one piece
   * per bus request while the sink has room (it acknowledges each piece its
   * reader takes), then the final result.
   */
  async #pull(op: string, data: unknown, timeoutMs: number, sink: ChunkSink): Promise<unknown> {
    const { handle } = await this.bus.requestRunner(
      this.runnerId,
      OPEN_OP,
      { op, data },
      timeoutMs,
    ) as { handle: string };
    const ask = (which: string) =>
      this.bus.requestRunner(this.runnerId, which, { handle }, PULL_TIMEOUT_MS);
    let room = 0;
    let wake: (() => void) | null = null;
    let cancelled: Error | null = null;
    sink.bind({
      ack: () => {
        room++;
        wake?.();
      },
      cancel: (reason) => {
        cancelled = reason;
        wake?.();
        ask(CANCEL_OP).catch(() => {/* gone already */});
      },
    });
    // The first window may come at once; each later piece once the reader took one.
    room = READ_WINDOW_CHUNKS;
    for (;;) {
      while (room === 0 && !cancelled) await new Promise<void>((r) => wake = r);
      wake = null;
      if (cancelled) throw cancelled;
      const next = await ask(NEXT_OP) as { piece?: unknown; result?: unknown };
      if (cancelled) throw cancelled;
      if (!("piece" in next)) return next.result;
      room--;
      if (!sink.push(next.piece)) {
        ask(CANCEL_OP).catch(() => {/* gone already */});
        throw new RelayError("rejected", "bad_chunk", "The runner sent a malformed piece");
      }
    }
  }
}
