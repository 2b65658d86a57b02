/**
 * The relay's end of a runner answer sent in pieces (`chunk` frames before
 * the final `res`; docs/protocol.md, "Chunked answers"): pieces are queued
 * as they arrive and acknowledged (`chunk_ack`) only when the HTTP client's
 * stream takes them, so one answer holds at most READ_WINDOW_CHUNKS pieces
 * here whatever the client's pace. A runner that sends past the window or
 * a piece that is not a string of the agreed size breaks the answer.
 *
 * @module
 */
import { READ_CHUNK_BYTES, READ_WINDOW_CHUNKS } from "../shared/workspace_files_api.ts";
import { RelayError } from "./errors.ts";

/** What the runner link needs of a request's chunked answer. */
export interface ChunkSink {
  /** Gives the link's controls for this request (called when it is sent). */
  bind(control: ChunkControl): void;
  /** Takes a piece; false when the runner broke the protocol (the link then fails the request). */
  push(data: unknown): boolean;
}

/** What a sink may do to its request. */
export interface ChunkControl {
  /** Tells the runner one more piece may come. */
  ack(): void;
  /** Tells the runner to stop and fails the request with `reason`. */
  cancel(reason: Error): void;
}

/** Longest piece: the byte count's base64 (UTF-8 text pieces are shorter). */
const MAX_PIECE = Math.ceil(READ_CHUNK_BYTES / 3) * 4;

/** The pieces of one answer, then its final result, taken one at a time. */
export class ChunkQueue implements ChunkSink {
  readonly #queue: string[] = [];
  #control: ChunkControl | null = null;
  #wake: (() => void) | null = null;
  #done: { ok: true; data: unknown } | { ok: false; error: unknown } | null = null;
  /** Pieces handed out so far. */
  taken = 0;

  bind(control: ChunkControl): void {
    this.#control = control;
  }

  push(data: unknown): boolean {
    if (typeof data !== "string" || data.length > MAX_PIECE) return false;
    if (this.#queue.length >= READ_WINDOW_CHUNKS || this.#done) return false;
    this.#queue.push(data);
    this.#wake?.();
    return true;
  }

  /** Follows the request's result (the final `res`). */
  settle(result: Promise<unknown>): void {
    result.then(
      (data) => this.#done = { ok: true, data },
      (error) => this.#done = { ok: false, error },
    ).finally(() => this.#wake?.());
  }

  /**
   * Resolves once a piece or the result is there; rejects with the error of
   * a request that failed before its first piece.
   */
  async ready(): Promise<void> {
    while (this.#queue.length === 0 && !this.#done) await this.#wait();
    if (this.#queue.length === 0 && this.#done?.ok === false) throw this.#done.error;
  }

  /** The next piece (acknowledged to the runner), or the final result; throws a failure. */
  async next(): Promise<{ piece: string } | { result: unknown }> {
    while (this.#queue.length === 0 && !this.#done) await this.#wait();
    const piece = this.#queue.shift();
    if (piece !== undefined) {
      this.taken++;
      this.#control?.ack();
      return { piece };
    }
    const done = this.#done!;
    if (!done.ok) throw done.error;
    return { result: done.data };
  }

  /** The HTTP client went away: the runner stops sending. */
  cancel(): void {
    this.#queue.length = 0;
    this.#control?.cancel(
      new RelayError("unreachable", "cancelled", "The client closed the request"),
    );
  }

  #wait(): Promise<void> {
    return new Promise((resolve) => this.#wake = () => (this.#wake = null, resolve()));
  }
}
