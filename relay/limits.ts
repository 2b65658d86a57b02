/**
 * The relay's rate limits, counted where its store says (one rule, in
 * {@linkcode openRelayStore}): a relay on SQLite is one process, and counts
 * in memory, as fast as it always has; relay nodes on one PostgreSQL count
 * in its `rate_limits` table (store/rate_limits.ts), so every node sees the
 * same hits and a second node is no way around a limit (issue 22).
 *
 * Both kinds serve the same limiters: the webhook fires (webhooks.ts), the
 * CLI's registration (routes/accounts.ts) and better-auth's sign-in and
 * sign-up limits (its `customStorage`, _better_auth.ts).
 *
 * @module
 */
import { clientKey, countingStore, type RateDecision, RateLimiter } from "./rate_limit.ts";
import type { Async } from "./store/contract.ts";
import type { RateLimitsRepo } from "./store/rate_limits.ts";

/** What one limiter allows: `limit` hits per key in `windowMs`. */
export interface LimitRule {
  limit: number;
  windowMs: number;
  /** Clock, replaceable in tests. */
  now?: () => number;
}

/** One limit, over keys (an IP address counts as its client, see clientKey). */
export interface Limiter {
  hit(key: string): Promise<RateDecision>;
}

/** better-auth's rate-limit storage (`rateLimit.customStorage`): one atomic step per request. */
export interface AuthRateStorage {
  consume(
    key: string,
    rule: { window: number; max: number },
  ): Promise<{ allowed: boolean; retryAfter: number | null }>;
}

/** Where a relay counts its limits, and its limiters. */
export interface Limits {
  /** `memory`: this process only; `store`: every node on the database. */
  readonly kind: "memory" | "store";
  /** A limiter; `name` keeps its keys apart from other limiters' in a shared store. */
  limiter(name: string, rule: LimitRule): Limiter;
  /** The counts behind better-auth's own limits. */
  authStorage(): AuthRateStorage;
}

/** Limits of one process: each limiter a sliding window in memory (RateLimiter). */
export function memoryLimits(): Limits {
  return {
    kind: "memory",
    limiter(_name, rule) {
      const limiter = new RateLimiter(rule);
      return { hit: (key) => Promise.resolve(limiter.hit(key)) };
    },
    authStorage: () => countingStore(),
  };
}

/** Options of {@linkcode storeLimits}. */
export interface StoreLimitsOptions {
  /** Clock of the limiters that name none, and of the sweep. */
  now?: () => number;
  /** Told when a sweep of ended windows fails (the next one tries again). */
  log?: (line: string) => void;
}

/**
 * How often a node deletes the windows that have ended. Rows are only ever
 * those of keys hit within their window (at most 15 minutes, registration)
 * and this long before: the table holds what a node's memory would, at
 * most a minute more. Each node sweeps, at most once a minute; one DELETE on
 * the resets_at index.
 */
const SWEEP_EVERY_MS = 60_000;

/** Keys longer than this are stored as their hash (better-auth's hold a request path). */
const MAX_KEY_CHARS = 200;

/**
 * Limits shared through the store: each limiter a fixed window per key,
 * started by the key's first hit (better-auth's own rule). Unlike the
 * sliding window in memory, a client can land `limit` hits at the end of one
 * window and `limit` more at the start of the next: at most twice the limit
 * in any one window's time, never more.
 */
export function storeLimits(repo: Async<RateLimitsRepo>, options: StoreLimitsOptions = {}): Limits {
  const clock = options.now ?? Date.now;
  let sweptAt = clock();
  const sweep = (now: number) => {
    if (now - sweptAt < SWEEP_EVERY_MS) return;
    sweptAt = now;
    repo.sweep(now).catch((err) => options.log?.(`rate limits: sweep failed: ${err}`));
  };
  const hit = async (key: string, limit: number, windowMs: number, now: number) => {
    const stored = key.length > MAX_KEY_CHARS ? await hashed(key) : key;
    const h = await repo.hit(stored, limit, windowMs, now);
    sweep(now);
    return h;
  };
  return {
    kind: "store",
    limiter(name, rule) {
      const now = rule.now ?? clock;
      return {
        async hit(key) {
          const t = now();
          const h = await hit(`${name}:${clientKey(key)}`, rule.limit, rule.windowMs, t);
          return h.allowed
            ? { ok: true }
            : { ok: false, retryAfterSeconds: secondsUntil(h.resetsAt, t) };
        },
      };
    },
    authStorage: () => ({
      async consume(key, rule) {
        const t = clock();
        const h = await hit(`auth:${key}`, rule.max, rule.window * 1000, t);
        return { allowed: h.allowed, retryAfter: h.allowed ? null : secondsUntil(h.resetsAt, t) };
      },
    }),
  };
}

function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}

async function hashed(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
  const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  return `${key.slice(0, 64)}#${hex}`;
}
