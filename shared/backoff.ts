/** Options of {@linkcode Backoff}. */
export interface BackoffOptions {
  /** First delay in milliseconds. */
  initialMs?: number;
  /** Ceiling of the delay in milliseconds. */
  maxMs?: number;
  /** Source of randomness in [0, 1); replaceable so the sequence can be checked. */
  random?: () => number;
}

/**
 * Exponential backoff with full jitter: each delay is uniform in
 * [base/2, base], base doubling up to `maxMs`. Jitter spreads reconnects of
 * many runners after a relay restart.
 */
export class Backoff {
  #attempt = 0;
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #random: () => number;

  constructor(options: BackoffOptions = {}) {
    this.#initialMs = options.initialMs ?? 500;
    this.#maxMs = options.maxMs ?? 30_000;
    this.#random = options.random ?? Math.random;
  }

  /** The next delay in milliseconds. */
  next(): number {
    const base = Math.min(this.#maxMs, this.#initialMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return Math.round(base / 2 + (base / 2) * this.#random());
  }

  /** Start again from the first delay (after a connection proved healthy). */
  reset(): void {
    this.#attempt = 0;
  }
}

/** Resolves after `ms`, or rejects when `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
