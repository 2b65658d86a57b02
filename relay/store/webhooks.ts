import type { Database } from "./db.ts";
import { Statements } from "./_statements.ts";
import type { ModelRef } from "../../shared/protocol.ts";
import type { FilterMode, TriggerFilter } from "../../shared/triggers.ts";
import type { Write } from "./_write.ts";

/** A webhook as stored; the secret stays encrypted here. */
export interface WebhookRecord {
  id: string;
  userId: string;
  name: string;
  source: string;
  secretEnc: string;
  runnerId: string | null;
  cwd: string | null;
  prompt: string | null;
  model: ModelRef | null;
  eventFilter: string[];
  filters: TriggerFilter[];
  filterMode: FilterMode;
  enabled: boolean;
  /** Refuse legacy signing and GitHub deliveries without an id; remember GitHub bodies. */
  requireReplayProtection: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface Row {
  id: string;
  user_id: string;
  name: string;
  source: string;
  secret_enc: string;
  runner_id: string | null;
  cwd: string | null;
  prompt: string | null;
  model: string | null;
  event_filter: string;
  filters: string;
  filter_mode: string;
  enabled: number;
  require_replay_protection: number;
  created_at: string;
  updated_at: string;
}

export function fromRow(r: Row): WebhookRecord {
  return {
    id: r.id,
    userId: r.user_id,
    name: r.name,
    source: r.source,
    secretEnc: r.secret_enc,
    runnerId: r.runner_id,
    cwd: r.cwd,
    prompt: r.prompt,
    model: r.model ? JSON.parse(r.model) : null,
    eventFilter: JSON.parse(r.event_filter),
    filters: JSON.parse(r.filters),
    filterMode: r.filter_mode === "or" ? "or" : "and",
    enabled: r.enabled === 1,
    requireReplayProtection: r.require_replay_protection === 1,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** Inserts a webhook or updates it (its owner and creation stay). */
export function saveWebhook(w: WebhookRecord): Write {
  return {
    sql:
      `INSERT INTO webhooks (id, user_id, name, source, secret_enc, runner_id, cwd, prompt, model,
         event_filter, filters, filter_mode, enabled, require_replay_protection, created_at,
         updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, source = excluded.source,
         runner_id = excluded.runner_id, cwd = excluded.cwd, prompt = excluded.prompt,
         model = excluded.model, event_filter = excluded.event_filter, filters = excluded.filters,
         filter_mode = excluded.filter_mode, enabled = excluded.enabled,
         require_replay_protection = excluded.require_replay_protection,
         updated_at = excluded.updated_at`,
    values: [
      w.id,
      w.userId,
      w.name,
      w.source,
      w.secretEnc,
      w.runnerId,
      w.cwd,
      w.prompt,
      w.model ? JSON.stringify(w.model) : null,
      JSON.stringify(w.eventFilter),
      JSON.stringify(w.filters),
      w.filterMode,
      w.enabled ? 1 : 0,
      w.requireReplayProtection ? 1 : 0,
      w.createdAt,
      w.updatedAt,
    ],
  };
}

/** SQL for webhooks and their delivery ids (for deduplication). */
export class WebhooksRepo {
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#sql = new Statements(db);
  }

  /** Inserts or replaces the whole record. */
  save(w: WebhookRecord): void {
    this.#sql.run(saveWebhook(w));
  }

  get(id: string): WebhookRecord | undefined {
    const r = this.#sql.sql("SELECT * FROM webhooks WHERE id = ?").get(id) as Row | undefined;
    return r && fromRow(r);
  }

  /** The webhook when `userId` owns it; foreign and missing ids look alike. */
  getOwned(userId: string, id: string): WebhookRecord | undefined {
    const w = this.get(id);
    return w && w.userId === userId ? w : undefined;
  }

  listForUser(userId: string): WebhookRecord[] {
    const rows = this.#sql.sql(
      "SELECT * FROM webhooks WHERE user_id = ? ORDER BY created_at DESC, id",
    ).all(userId) as unknown as Row[];
    return rows.map(fromRow);
  }

  delete(userId: string, id: string): boolean {
    const res = this.#sql.sql("DELETE FROM webhooks WHERE id = ? AND user_id = ?").run(
      id,
      userId,
    );
    if (Number(res.changes) === 0) return false;
    this.#sql.sql("DELETE FROM webhook_deliveries WHERE webhook_id = ?").run(id);
    this.#sql.sql("DELETE FROM webhook_nonces WHERE webhook_id = ?").run(id);
    return true;
  }

  /** Until when (epoch ms) an enhanced-signing nonce counts as used; 0 if it is not. */
  nonceUsedUntil(webhookId: string, nonce: string): number {
    const r = this.#sql.sql(
      "SELECT until FROM webhook_nonces WHERE webhook_id = ? AND nonce = ?",
    ).get(webhookId, nonce) as { until: number } | undefined;
    return r?.until ?? 0;
  }

  /**
   * Marks a nonce used until `until` (epoch ms) unless it is in use at `now`:
   * whether this call claimed it. Check and mark are one statement, so two
   * requests with the same nonce cannot both claim it.
   */
  claimNonce(webhookId: string, nonce: string, until: number, now: number): boolean {
    return Number(
      this.#sql.sql(
        `INSERT INTO webhook_nonces (webhook_id, nonce, until) VALUES (?, ?, ?)
         ON CONFLICT (webhook_id, nonce) DO UPDATE SET until = excluded.until
         WHERE webhook_nonces.until <= ?`,
      ).run(webhookId, nonce, until, now).changes,
    ) > 0;
  }

  /**
   * Gives a nonce back (its delivery failed: the sender may retry it). With
   * `until`, only the claim made for that time: one that lapsed and was
   * claimed again by someone else stays theirs.
   */
  releaseNonce(webhookId: string, nonce: string, until?: number): void {
    if (until === undefined) {
      this.#sql.sql("DELETE FROM webhook_nonces WHERE webhook_id = ? AND nonce = ?").run(
        webhookId,
        nonce,
      );
      return;
    }
    this.#sql.sql("DELETE FROM webhook_nonces WHERE webhook_id = ? AND nonce = ? AND until = ?")
      .run(webhookId, nonce, until);
  }

  /** Forgets nonces whose time is up. */
  pruneNonces(now: number): void {
    this.#sql.sql("DELETE FROM webhook_nonces WHERE until <= ?").run(now);
  }

  /** An earlier delivery with this id, if it happened after `since` (epoch ms). */
  delivery(
    webhookId: string,
    deliveryId: string,
    since: number,
  ): { triggerId: string; sessionId: string | null } | undefined {
    const r = this.#sql.sql(
      `SELECT trigger_id, session_id FROM webhook_deliveries
       WHERE webhook_id = ? AND delivery_id = ? AND created_at > ?`,
    ).get(webhookId, deliveryId, since) as
      | { trigger_id: string; session_id: string | null }
      | undefined;
    return r && { triggerId: r.trigger_id, sessionId: r.session_id };
  }

  recordDelivery(
    webhookId: string,
    deliveryId: string,
    triggerId: string,
    sessionId: string | null,
    at: number,
  ): void {
    this.#sql.sql(
      `INSERT INTO webhook_deliveries (webhook_id, delivery_id, trigger_id, session_id, created_at)
       VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (webhook_id, delivery_id) DO UPDATE SET trigger_id = excluded.trigger_id,
         session_id = excluded.session_id, created_at = excluded.created_at`,
    ).run(webhookId, deliveryId, triggerId, sessionId, at);
  }

  /** Forgets delivery ids older than `before` (epoch ms). */
  pruneDeliveries(before: number): void {
    this.#sql.sql("DELETE FROM webhook_deliveries WHERE created_at < ?").run(before);
  }
}
