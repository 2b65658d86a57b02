import type { Database } from "./db.ts";
import { Statements } from "./_statements.ts";

/** The outcome of one {@linkcode RateLimitsRepo.hit}: whether it took a slot, and when its window ends. */
export interface LimitHit {
  allowed: boolean;
  /** When the key's window ends (epoch ms): a refused caller may try again then. */
  resetsAt: number;
}

/**
 * Takes one slot of `key`'s window, in one statement: a new key, or one whose
 * window has ended, starts a window of one hit; a key under its limit counts
 * one more; a key at its limit is not touched (no row comes back). The
 * conflict clause runs on the row's latest version under its lock, so of two
 * relay nodes taking the last slot at once only one gets a row back.
 * Parameters: key, the new window's end, now, now, now, limit.
 */
export const HIT_SQL = `
  INSERT INTO rate_limits (key, hits, resets_at) VALUES (?, 1, ?)
  ON CONFLICT (key) DO UPDATE SET
    hits = CASE WHEN rate_limits.resets_at <= ? THEN 1 ELSE rate_limits.hits + 1 END,
    resets_at = CASE WHEN rate_limits.resets_at <= ? THEN excluded.resets_at
                     ELSE rate_limits.resets_at END
  WHERE rate_limits.resets_at <= ? OR rate_limits.hits < ?
  RETURNING resets_at`;

/** When a refused key's window ends. */
export const RESETS_SQL = "SELECT resets_at FROM rate_limits WHERE key = ?";

/** Forgets windows that have ended (the index on resets_at finds them). */
export const SWEEP_SQL = "DELETE FROM rate_limits WHERE resets_at <= ?";

/** Checks what every engine's `hit` is given. */
export function checkHit(limit: number, windowMs: number): void {
  if (!(Number.isInteger(limit) && limit >= 1)) throw new RangeError(`Invalid limit: ${limit}`);
  if (!(Number.isInteger(windowMs) && windowMs >= 1)) {
    throw new RangeError(`Invalid window: ${windowMs}`);
  }
}

/**
 * Fixed-window request counters, one row per key, shared by every relay node
 * on the database (relay/limits.ts): a window starts at a key's first hit and
 * lasts `windowMs`; at most `limit` hits pass in it.
 */
export class RateLimitsRepo {
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#sql = new Statements(db);
  }

  /** Takes one of `limit` slots of `key`'s window of `windowMs`, as of `now` (epoch ms). */
  hit(key: string, limit: number, windowMs: number, now: number): LimitHit {
    checkHit(limit, windowMs);
    for (;;) {
      const took = this.#sql.sql(HIT_SQL).get(key, now + windowMs, now, now, now, limit) as
        | { resets_at: number }
        | undefined;
      if (took) return { allowed: true, resetsAt: took.resets_at };
      const held = this.#sql.sql(RESETS_SQL).get(key) as { resets_at: number } | undefined;
      // Swept between the two statements (its window had just ended): take a slot anew.
      if (held) return { allowed: false, resetsAt: held.resets_at };
    }
  }

  /** Deletes the windows that ended by `now`; how many. */
  sweep(now: number): number {
    return Number(this.#sql.sql(SWEEP_SQL).run(now).changes);
  }
}
