/**
 * Tasks run one after another in the order they came: a socket's messages
 * once handling one may wait for the store. A task that finishes at once,
 * with nothing queued before it, runs at once (no extra turn), so a link
 * whose messages need no store pays nothing for the order.
 *
 * What waits is bounded: past a number of tasks or of their bytes the queue
 * asks its socket to stop reading (`pause`), and to read again once half of
 * that has run (`resume`). A client that floods a socket while the store is
 * slow fills its own TCP send buffer, not the relay's memory.
 *
 * @module
 */

/** Options of {@linkcode InOrder}. */
export interface InOrderOptions {
  /** Tasks waiting at which the queue pauses its source (default 256). */
  maxWaiting?: number;
  /** Bytes of waiting tasks (as given to `run`) at which it pauses (default 4 MiB). */
  maxWaitingBytes?: number;
  /** Stops the source (the socket stops reading). */
  pause?: () => void;
  /** Starts it again. */
  resume?: () => void;
}

/** A queue of tasks for one socket (or one session): each starts once the one before ended. */
export class InOrder {
  #tail: Promise<void> | null = null;
  #waiting = 0;
  #waitingBytes = 0;
  #paused = false;
  readonly #maxWaiting: number;
  readonly #maxWaitingBytes: number;
  readonly #pause: () => void;
  readonly #resume: () => void;

  /** `onError` receives what a task threw or rejected with; the next task still runs. */
  constructor(readonly onError: (err: unknown) => void, options: InOrderOptions = {}) {
    this.#maxWaiting = options.maxWaiting ?? 256;
    this.#maxWaitingBytes = options.maxWaitingBytes ?? 4 * 1024 * 1024;
    this.#pause = options.pause ?? (() => {});
    this.#resume = options.resume ?? (() => {});
  }

  /** Whether a task is still running or waiting. */
  get busy(): boolean {
    return this.#tail !== null;
  }

  /** Tasks queued behind the one running, and whether the source is paused for them. */
  get waiting(): { tasks: number; bytes: number; paused: boolean } {
    return { tasks: this.#waiting, bytes: this.#waitingBytes, paused: this.#paused };
  }

  /**
   * Runs `task` now if nothing waits, else after the tasks queued before it.
   * `bytes`: what the task holds while it waits (the message's size).
   */
  run(task: () => void | Promise<void>, bytes = 0): void {
    if (this.#tail) {
      this.#waiting++;
      this.#waitingBytes += bytes;
      if (
        !this.#paused &&
        (this.#waiting >= this.#maxWaiting || this.#waitingBytes >= this.#maxWaitingBytes)
      ) {
        this.#paused = true;
        this.#pause();
      }
      this.#hold(
        this.#tail.then(() => {
          this.#started(bytes);
          return task();
        }).catch(this.onError),
      );
      return;
    }
    let out: void | Promise<void>;
    try {
      out = task();
    } catch (err) {
      this.onError(err);
      return;
    }
    if (out instanceof Promise) this.#hold(out.catch(this.onError));
  }

  /** Resolves once every task queued so far has ended. */
  async idle(): Promise<void> {
    while (this.#tail) await this.#tail;
  }

  /** A waiting task starts: the source reads again once half the limits are free. */
  #started(bytes: number): void {
    this.#waiting--;
    this.#waitingBytes -= bytes;
    if (
      this.#paused &&
      this.#waiting <= this.#maxWaiting / 2 &&
      this.#waitingBytes <= this.#maxWaitingBytes / 2
    ) {
      this.#paused = false;
      this.#resume();
    }
  }

  #hold(p: Promise<void>): void {
    this.#tail = p;
    p.then(() => {
      if (this.#tail === p) this.#tail = null;
    });
  }
}
