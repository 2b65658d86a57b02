/** Options of {@linkcode RateLimiter}. */
export interface RateLimiterOptions {
  /** Requests allowed per window. */
  limit: number;
  /** Window length in milliseconds. */
  windowMs: number;
  /** Clock, replaceable in tests. */
  now?: () => number;
}

/** The outcome of one {@linkcode RateLimiter.hit}. */
export type RateDecision = { ok: true } | { ok: false; retryAfterSeconds: number };

/**
 * Sliding-window limiter keyed by client (an IP address): each key keeps the
 * times of its recent hits, so memory is bounded by limit × active keys.
 */
export class RateLimiter {
  readonly #hits = new Map<string, number[]>();
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #now: () => number;

  constructor(options: RateLimiterOptions) {
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#now = options.now ?? Date.now;
  }

  hit(key: string): RateDecision {
    const now = this.#now();
    const recent = (this.#hits.get(key) ?? []).filter((t) => now - t < this.#windowMs);
    if (recent.length >= this.#limit) {
      this.#hits.set(key, recent);
      const oldest = recent[0] ?? now;
      return {
        ok: false,
        retryAfterSeconds: Math.max(1, Math.ceil((oldest + this.#windowMs - now) / 1000)),
      };
    }
    recent.push(now);
    this.#hits.set(key, recent);
    if (this.#hits.size > 10_000) this.#sweep(now);
    return { ok: true };
  }

  #sweep(now: number): void {
    for (const [key, times] of this.#hits) {
      if (times.every((t) => now - t >= this.#windowMs)) this.#hits.delete(key);
    }
  }
}
