/**
 * Waiting in tests, for what no event announces: process-level state polled
 * with a deadline, and a promise given a time limit.
 *
 * @module
 */

/** Polls `fn` until it returns a value (for process-level state only), with a deadline. */
export async function eventually<T>(
  what: string,
  fn: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (true) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Resolves with `p`, or fails with `what` after `ms`. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

interface Waiter {
  pred: () => boolean;
  what: string;
  resolve: () => void;
  reject: (e: Error) => void;
}

/**
 * Waits for predicates over state that its owner changes (a socket's
 * messages, a process's output): `until` resolves once `pred` holds, and the
 * owner calls `check` after every change.
 */
export class Conditions {
  readonly #waiters: Waiter[] = [];

  /** `timedOut` words the error of a wait that ran out of time. */
  constructor(readonly timedOut: (what: string, timeoutMs: number) => string) {}

  until(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        pred,
        what,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        reject(new Error(this.timedOut(what, timeoutMs)));
      }, timeoutMs);
      this.#waiters.push(w);
    });
  }

  /** Resolves the waits whose predicate now holds. */
  check(): void {
    for (const w of [...this.#waiters]) {
      if (w.pred()) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }

  /** Fails every wait still pending (the state will not change again). */
  failAll(message: (what: string) => string): void {
    for (const w of this.#waiters.splice(0)) w.reject(new Error(message(w.what)));
  }
}
