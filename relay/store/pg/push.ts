import {
  fromRow,
  planSubscribe,
  type PushSubscribeInput,
  type PushSubscribeResult,
  type PushSubscriptionRecord,
  type Row,
  savePush,
} from "../push.ts";
import type { PgSql } from "./_sql.ts";

/** Push subscriptions, one row per endpoint (see PushRepo). */
export class PgPushRepo {
  constructor(private readonly sql: PgSql) {}

  /**
   * Subscribes a browser's endpoint for `s.userId`, in one transaction (see
   * planSubscribe for the rules). The user's subscriptions are locked first (an
   * advisory lock keyed `3, user`), so two nodes adding at once cannot pass
   * `max` together.
   */
  subscribe(s: PushSubscribeInput, max: number): Promise<PushSubscribeResult> {
    return this.sql.tx(async (sql) => {
      await sql.get("SELECT pg_advisory_xact_lock(3, hashtext(?))", s.userId);
      const repo = new PgPushRepo(sql);
      const plan = planSubscribe(s, await repo.byEndpoint(s.endpoint));
      if (!plan.ok) return plan;
      if (plan.adds && await repo.countOf(s.userId) >= max) {
        return { ok: false, reason: "full" } as const;
      }
      await repo.save(plan.rec);
      return { ok: true, id: plan.rec.id } as const;
    });
  }

  async listOf(userId: string): Promise<PushSubscriptionRecord[]> {
    return (await this.sql.all<Row>(
      "SELECT * FROM push_subscriptions WHERE user_id = ? ORDER BY created_at, id",
      userId,
    )).map(fromRow);
  }

  async countOf(userId: string): Promise<number> {
    return (await this.sql.get<{ n: number }>(
      "SELECT COUNT(*) AS n FROM push_subscriptions WHERE user_id = ?",
      userId,
    ))!.n;
  }

  async byEndpoint(endpoint: string): Promise<PushSubscriptionRecord | null> {
    const r = await this.sql.get<Row>(
      "SELECT * FROM push_subscriptions WHERE endpoint = ?",
      endpoint,
    );
    return r ? fromRow(r) : null;
  }

  async save(s: PushSubscriptionRecord): Promise<void> {
    await this.sql.write(savePush(s));
  }

  async deleteOf(userId: string, endpoint: string): Promise<boolean> {
    return await this.sql.run(
      "DELETE FROM push_subscriptions WHERE user_id = ? AND endpoint = ?",
      userId,
      endpoint,
    ) > 0;
  }

  async delete(id: string): Promise<void> {
    await this.sql.run("DELETE FROM push_subscriptions WHERE id = ?", id);
  }
}
