import { fromRow, type PushSubscriptionRecord, type Row } from "../push.ts";
import type { PgSql } from "./_sql.ts";

/** Push subscriptions, one row per endpoint (see PushRepo). */
export class PgPushRepo {
  constructor(private readonly sql: PgSql) {}

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
    await this.sql.run(
      `INSERT INTO push_subscriptions (id, user_id, endpoint, p256dh, auth, enabled_events,
         suppress_children, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, endpoint = excluded.endpoint,
         p256dh = excluded.p256dh, auth = excluded.auth, enabled_events = excluded.enabled_events,
         suppress_children = excluded.suppress_children`,
      s.id,
      s.userId,
      s.endpoint,
      s.p256dh,
      s.auth,
      s.enabledEvents,
      s.suppressChildNotifications ? 1 : 0,
      s.createdAt,
    );
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
