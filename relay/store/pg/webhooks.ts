import { fromRow, type Row, saveWebhook, type WebhookRecord } from "../webhooks.ts";
import type { PgSql } from "./_sql.ts";

/** Webhooks, their delivery ids and used nonces (see WebhooksRepo). */
export class PgWebhooksRepo {
  constructor(private readonly sql: PgSql) {}

  async save(w: WebhookRecord): Promise<void> {
    await this.sql.write(saveWebhook(w));
  }

  async get(id: string): Promise<WebhookRecord | undefined> {
    const r = await this.sql.get<Row>("SELECT * FROM webhooks WHERE id = ?", id);
    return r && fromRow(r);
  }

  async getOwned(userId: string, id: string): Promise<WebhookRecord | undefined> {
    const w = await this.get(id);
    return w && w.userId === userId ? w : undefined;
  }

  async listForUser(userId: string): Promise<WebhookRecord[]> {
    return (await this.sql.all<Row>(
      "SELECT * FROM webhooks WHERE user_id = ? ORDER BY created_at DESC, id",
      userId,
    )).map(fromRow);
  }

  /** Deletes the webhook with its delivery ids and nonces, in one transaction. */
  delete(userId: string, id: string): Promise<boolean> {
    return this.sql.tx(async (sql) => {
      if (await sql.run("DELETE FROM webhooks WHERE id = ? AND user_id = ?", id, userId) === 0) {
        return false;
      }
      await sql.run("DELETE FROM webhook_deliveries WHERE webhook_id = ?", id);
      await sql.run("DELETE FROM webhook_nonces WHERE webhook_id = ?", id);
      return true;
    });
  }

  async nonceUsedUntil(webhookId: string, nonce: string): Promise<number> {
    const r = await this.sql.get<{ until: number }>(
      "SELECT until FROM webhook_nonces WHERE webhook_id = ? AND nonce = ?",
      webhookId,
      nonce,
    );
    return r?.until ?? 0;
  }

  /**
   * Marks a nonce used until `until` (epoch ms) unless it is in use at `now`:
   * whether this call claimed it. One statement, so of two nodes claiming the
   * same nonce at once only one succeeds (the other waits on the row's lock,
   * then finds it in use).
   */
  async claimNonce(webhookId: string, nonce: string, until: number, now: number): Promise<boolean> {
    return await this.sql.run(
      `INSERT INTO webhook_nonces (webhook_id, nonce, until) VALUES (?, ?, ?)
       ON CONFLICT (webhook_id, nonce) DO UPDATE SET until = excluded.until
       WHERE webhook_nonces.until <= ?`,
      webhookId,
      nonce,
      until,
      now,
    ) > 0;
  }

  async releaseNonce(webhookId: string, nonce: string, until?: number): Promise<void> {
    if (until === undefined) {
      await this.sql.run(
        "DELETE FROM webhook_nonces WHERE webhook_id = ? AND nonce = ?",
        webhookId,
        nonce,
      );
      return;
    }
    await this.sql.run(
      "DELETE FROM webhook_nonces WHERE webhook_id = ? AND nonce = ? AND until = ?",
      webhookId,
      nonce,
      until,
    );
  }

  async pruneNonces(now: number): Promise<void> {
    await this.sql.run("DELETE FROM webhook_nonces WHERE until <= ?", now);
  }

  async delivery(
    webhookId: string,
    deliveryId: string,
    since: number,
  ): Promise<{ triggerId: string; sessionId: string | null } | undefined> {
    const r = await this.sql.get<{ trigger_id: string; session_id: string | null }>(
      `SELECT trigger_id, session_id FROM webhook_deliveries
       WHERE webhook_id = ? AND delivery_id = ? AND created_at > ?`,
      webhookId,
      deliveryId,
      since,
    );
    return r && { triggerId: r.trigger_id, sessionId: r.session_id };
  }

  async recordDelivery(
    webhookId: string,
    deliveryId: string,
    triggerId: string,
    sessionId: string | null,
    at: number,
  ): Promise<void> {
    await this.sql.run(
      `INSERT INTO webhook_deliveries (webhook_id, delivery_id, trigger_id, session_id, created_at)
       VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (webhook_id, delivery_id) DO UPDATE SET trigger_id = excluded.trigger_id,
         session_id = excluded.session_id, created_at = excluded.created_at`,
      webhookId,
      deliveryId,
      triggerId,
      sessionId,
      at,
    );
  }

  async pruneDeliveries(before: number): Promise<void> {
    await this.sql.run("DELETE FROM webhook_deliveries WHERE created_at < ?", before);
  }
}
