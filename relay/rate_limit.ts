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

/** Most keys {@linkcode countingStore} keeps; past it, expired ones go first, then the oldest. */
const STORE_MAX_KEYS = 100_000;

/**
 * A fixed-window request counter with better-auth's rate-limit storage shape
 * (`consume`), owned by one relay. better-auth's built-in memory store is one
 * map for the whole process, so two relays in one process (tests, embedding)
 * would share each other's counts.
 */
export function countingStore(now: () => number = Date.now) {
  const windows = new Map<string, { count: number; start: number; expiresAt: number }>();
  const prune = (t: number) => {
    for (const [key, w] of windows) if (t >= w.expiresAt) windows.delete(key);
    for (const key of windows.keys()) {
      if (windows.size <= STORE_MAX_KEYS) break;
      windows.delete(key);
    }
  };
  return {
    // deno-lint-ignore require-await
    async consume(key: string, rule: { window: number; max: number }) {
      const t = now();
      const ms = rule.window * 1000;
      let w = windows.get(key);
      if (!w || t >= w.expiresAt || t - w.start >= ms) {
        w = { count: 0, start: t, expiresAt: t + ms };
      }
      if (w.count >= rule.max) {
        return { allowed: false, retryAfter: Math.max(1, Math.ceil((w.start + ms - t) / 1000)) };
      }
      w.count++;
      windows.delete(key);
      windows.set(key, w);
      if (windows.size > STORE_MAX_KEYS) prune(t);
      return { allowed: true, retryAfter: null };
    },
  };
}
