/**
 * Tasks run one after another in the order they came: a socket's messages
 * once handling one may wait for the store. A task that finishes at once,
 * with nothing queued before it, runs at once (no extra turn), so a link
 * whose messages need no store pays nothing for the order.
 *
 * @module
 */

/** A queue of tasks for one socket (or one session): each starts once the one before ended. */
export class InOrder {
  #tail: Promise<void> | null = null;

  /** `onError` receives what a task threw or rejected with; the next task still runs. */
  constructor(readonly onError: (err: unknown) => void) {}

  /** Whether a task is still running or waiting. */
  get busy(): boolean {
    return this.#tail !== null;
  }

  /** Runs `task` now if nothing waits, else after the tasks queued before it. */
  run(task: () => void | Promise<void>): void {
    if (this.#tail) {
      this.#hold(this.#tail.then(task).catch(this.onError));
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

  #hold(p: Promise<void>): void {
    this.#tail = p;
    p.then(() => {
      if (this.#tail === p) this.#tail = null;
    });
  }
}
