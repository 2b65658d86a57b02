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
 * The client an address counts as: an IPv6 address by its /64 (one host
 * usually holds a whole /64 and can pick any address in it), an IPv4-mapped
 * one as its IPv4 address, anything else as it is.
 */
export function clientKey(ip: string): string {
  let a = ip.trim().toLowerCase();
  if (a.startsWith("[") && a.endsWith("]")) a = a.slice(1, -1);
  a = a.replace(/%.*$/, "");
  if (!a.includes(":")) return a;
  const mapped = /^(?:0{0,4}:){0,4}:?(?:0{0,4}:)?ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(a);
  if (mapped) return mapped[1]!;
  const [head = "", tail = "", ...rest] = a.split("::");
  if (rest.length > 0) return a;
  const left = head === "" ? [] : head.split(":");
  const right = tail === "" ? [] : tail.split(":");
  if (!a.includes("::") && left.length !== 8) return a;
  const groups = a.includes("::")
    ? [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right]
    : left;
  if (groups.length !== 8 || !groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return a;
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, "")).join(":")}::/64`;
}

/**
 * Sliding-window limiter keyed by client (an IP address, see
 * {@linkcode clientKey}): each key keeps the times of its recent hits, so
 * memory is bounded by limit × active keys.
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

  hit(ip: string): RateDecision {
    const key = clientKey(ip);
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
