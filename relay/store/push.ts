import { type Database, transaction } from "./db.ts";
import { Statements } from "./_statements.ts";
import type { Write } from "./_write.ts";

/** A browser's push subscription as stored. */
export interface PushSubscriptionRecord {
  id: string;
  userId: string;
  endpoint: string;
  /** The browser's P-256 public key (base64url, 65 bytes). */
  p256dh: string;
  /** The browser's auth secret (base64url, 16 bytes). */
  auth: string;
  /** Comma-separated kinds, or `*`. */
  enabledEvents: string;
  suppressChildNotifications: boolean;
  createdAt: string;
}

export interface Row {
  id: string;
  user_id: string;
  endpoint: string;
  p256dh: string;
  auth: string;
  enabled_events: string;
  suppress_children: number;
  created_at: string;
}

export function fromRow(r: Row): PushSubscriptionRecord {
  return {
    id: r.id,
    userId: r.user_id,
    endpoint: r.endpoint,
    p256dh: r.p256dh,
    auth: r.auth,
    enabledEvents: r.enabled_events,
    suppressChildNotifications: r.suppress_children === 1,
    createdAt: r.created_at,
  };
}

/** A subscription as a browser sends it: `enabledEvents` only when it names them. */
export type PushSubscribeInput =
  & Omit<PushSubscriptionRecord, "enabledEvents" | "suppressChildNotifications">
  & { enabledEvents?: string };

/** What {@linkcode PushRepo.subscribe} answers. */
export type PushSubscribeResult = { ok: true; id: string } | {
  ok: false;
  reason: "taken" | "full";
};

/**
 * The rules of subscribing `s`, given the record its endpoint has now (both
 * engines' `subscribe` apply them inside their transaction): the same
 * endpoint again updates its keys (and `enabledEvents` when given, else
 * keeps its own); an endpoint of another account moves only with the same
 * keys (`taken` otherwise). `adds` says the user gets one more
 * subscription, which the caller refuses as `full` when the user has `max`.
 */
export function planSubscribe(
  s: PushSubscribeInput,
  old: PushSubscriptionRecord | null,
): { ok: false; reason: "taken" } | { ok: true; rec: PushSubscriptionRecord; adds: boolean } {
  const sameKeys = old?.p256dh === s.p256dh && old?.auth === s.auth;
  if (old && old.userId !== s.userId && !sameKeys) return { ok: false, reason: "taken" };
  const mine = old?.userId === s.userId;
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
  return { ok: true, rec, adds: !mine };
}

/** Inserts or replaces a whole subscription (by id). */
export function savePush(s: PushSubscriptionRecord): Write {
  return {
    sql: `INSERT INTO push_subscriptions (id, user_id, endpoint, p256dh, auth, enabled_events,
         suppress_children, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, endpoint = excluded.endpoint,
         p256dh = excluded.p256dh, auth = excluded.auth, enabled_events = excluded.enabled_events,
         suppress_children = excluded.suppress_children`,
    values: [
      s.id,
      s.userId,
      s.endpoint,
      s.p256dh,
      s.auth,
      s.enabledEvents,
      s.suppressChildNotifications ? 1 : 0,
      s.createdAt,
    ],
  };
}

/** SQL for push subscriptions: one row per endpoint. */
export class PushRepo {
  readonly #sql: Statements;
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    this.#sql = new Statements(db);
  }

  /**
   * Subscribes a browser's endpoint for `s.userId`, in one transaction, by
   * {@linkcode planSubscribe}'s rules; a user with `max` subscriptions gets
   * no new one (`full`). A new subscription takes `s.id` and `s.createdAt`.
   */
  subscribe(s: PushSubscribeInput, max: number): PushSubscribeResult {
    return transaction(this.#db, () => {
      const plan = planSubscribe(s, this.byEndpoint(s.endpoint));
      if (!plan.ok) return plan;
      if (plan.adds && this.countOf(s.userId) >= max) return { ok: false, reason: "full" } as const;
      this.save(plan.rec);
      return { ok: true, id: plan.rec.id } as const;
    });
  }

  /** The user's subscriptions, oldest first. */
  listOf(userId: string): PushSubscriptionRecord[] {
    return (this.#sql.sql(
      "SELECT * FROM push_subscriptions WHERE user_id = ? ORDER BY created_at, id",
    ).all(userId) as unknown as Row[]).map(fromRow);
  }

  countOf(userId: string): number {
    const r = this.#sql.sql("SELECT COUNT(*) AS n FROM push_subscriptions WHERE user_id = ?")
      .get(userId) as { n: number };
    return r.n;
  }

  /** The subscription of `endpoint`, whoever owns it. */
  byEndpoint(endpoint: string): PushSubscriptionRecord | null {
    const r = this.#sql.sql("SELECT * FROM push_subscriptions WHERE endpoint = ?")
      .get(endpoint) as Row | undefined;
    return r ? fromRow(r) : null;
  }

  /** Inserts or replaces the whole record (by id). */
  save(s: PushSubscriptionRecord): void {
    this.#sql.run(savePush(s));
  }

  /** Deletes the user's subscription of `endpoint`; whether there was one. */
  deleteOf(userId: string, endpoint: string): boolean {
    return Number(
      this.#sql.sql("DELETE FROM push_subscriptions WHERE user_id = ? AND endpoint = ?")
        .run(userId, endpoint).changes,
    ) > 0;
  }

  /** Deletes a subscription by id (the push service said it is gone). */
  delete(id: string): void {
    this.#sql.sql("DELETE FROM push_subscriptions WHERE id = ?").run(id);
  }
}
