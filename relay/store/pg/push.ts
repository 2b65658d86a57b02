import { fromRow, type PushSubscriptionRecord, type Row } from "../push.ts";
import type { PgSql } from "./_sql.ts";

/** Push subscriptions, one row per endpoint (see PushRepo). */
export class PgPushRepo {
  constructor(private readonly sql: PgSql) {}

  /**
   * Subscribes a browser's endpoint for `s.userId`, in one transaction (see
   * PushRepo.subscribe). The user's subscriptions are locked first (an
   * advisory lock keyed `3, user`), so two nodes adding at once cannot pass
   * `max` together.
   */
  subscribe(
    s: Omit<PushSubscriptionRecord, "enabledEvents" | "suppressChildNotifications"> & {
      enabledEvents?: string;
    },
    max: number,
  ): Promise<{ ok: true; id: string } | { ok: false; reason: "taken" | "full" }> {
    return this.sql.tx(async (sql) => {
      await sql.get("SELECT pg_advisory_xact_lock(3, hashtext(?))", s.userId);
      const repo = new PgPushRepo(sql);
      const old = await repo.byEndpoint(s.endpoint);
      const sameKeys = old?.p256dh === s.p256dh && old?.auth === s.auth;
      if (old && old.userId !== s.userId && !sameKeys) {
        return { ok: false, reason: "taken" } as const;
      }
      const mine = old?.userId === s.userId;
      if (!mine && await repo.countOf(s.userId) >= max) {
        return { ok: false, reason: "full" } as const;
      }
      const rec: PushSubscriptionRecord = {
        id: old?.id ?? s.id,
        userId: s.userId,
        endpoint: s.endpoint,
        p256dh: s.p256dh,
        auth: s.auth,
        enabledEvents: s.enabledEvents ?? (mine ? old.enabledEvents : "*"),
        suppressChildNotifications: mine ? old.suppressChildNotifications : false,
        createdAt: old?.createdAt ?? s.createdAt,
      };
      await repo.save(rec);
      return { ok: true, id: rec.id } as const;
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
