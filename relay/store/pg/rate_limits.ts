import { checkHit, HIT_SQL, type LimitHit, RESETS_SQL, SWEEP_SQL } from "../rate_limits.ts";
import type { PgSql } from "./_sql.ts";

/**
 * Fixed-window request counters shared by every relay node (see
 * RateLimitsRepo). A hit is one `INSERT ... ON CONFLICT DO UPDATE ... WHERE`:
 * PostgreSQL runs the update on the row's latest committed version while
 * holding its lock, so hits on one key from several nodes are counted one
 * after another and no two of them take the same last slot.
 */
export class PgRateLimitsRepo {
  constructor(private readonly sql: PgSql) {}

  async hit(key: string, limit: number, windowMs: number, now: number): Promise<LimitHit> {
    checkHit(limit, windowMs);
    for (;;) {
      const took = await this.sql.get<{ resets_at: number }>(
        HIT_SQL,
        key,
        now + windowMs,
        now,
        now,
        now,
        limit,
      );
      if (took) return { allowed: true, resetsAt: took.resets_at };
      const held = await this.sql.get<{ resets_at: number }>(RESETS_SQL, key);
      if (held) return { allowed: false, resetsAt: held.resets_at };
    }
  }

  async sweep(now: number): Promise<number> {
    return await this.sql.run(SWEEP_SQL, now);
  }
}
