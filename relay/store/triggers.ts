import { type Database, transaction } from "./db.ts";
import { Statements } from "./_statements.ts";
import type { DeliveredTrigger } from "../../shared/protocol.ts";
import type { TriggerListener, TriggerSubscription } from "../../shared/triggers_api.ts";
import type { Write } from "./_write.ts";

/** A session's subscription to a trigger type: what the API shows, and whose it is. */
export interface SubscriptionRecord extends TriggerSubscription {
  sessionId: string;
  userId: string;
}

/** A runner-level listener that spawns a session per matching trigger, and whose it is. */
export interface ListenerRecord extends TriggerListener {
  userId: string;
  runnerId: string;
}

/** One entry of a session's trigger history: a delivered (or sent) trigger and its answer. */
export interface HistoryEntry extends DeliveredTrigger {
  ts: string;
  direction: "inbound" | "outbound";
  response?: { action?: string; text?: string; ts: string };
}

/** Entries kept per session; older ones are dropped. */
export const HISTORY_CAP = 200;

export interface SubRow {
  id: string;
  session_id: string;
  user_id: string;
  runner_id: string;
  trigger_type: string;
  params: string;
  filters: string;
  filter_mode: string;
  created_at: string;
}

export interface ListenerRow {
  id: string;
  user_id: string;
  runner_id: string;
  trigger_type: string;
  prompt: string;
  cwd: string | null;
  model: string | null;
  params: string;
  created_at: string;
  updated_at: string;
}

export interface HistoryRow {
  id: string;
  trigger_id: string;
  type: string;
  source: string;
  summary: string | null;
  payload: string;
  deliver_as: string;
  direction: string;
  expects_response: number;
  response: string | null;
  ts: string;
}

export const sub = (r: SubRow): SubscriptionRecord => ({
  subscriptionId: r.id,
  sessionId: r.session_id,
  userId: r.user_id,
  runnerId: r.runner_id,
  triggerType: r.trigger_type,
  params: JSON.parse(r.params),
  filters: JSON.parse(r.filters),
  filterMode: r.filter_mode === "or" ? "or" : "and",
  createdAt: r.created_at,
});

export const listener = (r: ListenerRow): ListenerRecord => ({
  listenerId: r.id,
  userId: r.user_id,
  runnerId: r.runner_id,
  triggerType: r.trigger_type,
  prompt: r.prompt,
  cwd: r.cwd,
  model: r.model ? JSON.parse(r.model) : null,
  params: JSON.parse(r.params),
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export const entry = (r: HistoryRow): HistoryEntry => ({
  triggerId: r.trigger_id,
  type: r.type,
  source: r.source,
  ...(r.summary !== null ? { summary: r.summary } : {}),
  payload: JSON.parse(r.payload),
  deliverAs: r.deliver_as === "followUp" ? "followUp" : "steer",
  ts: r.ts,
  direction: r.direction === "outbound" ? "outbound" : "inbound",
  expectsResponse: r.expects_response === 1,
  ...(r.response ? { response: JSON.parse(r.response) } : {}),
});

/** Inserts a session's subscription or updates its parameters. */
export function saveSubscription(s: SubscriptionRecord): Write {
  return {
    sql:
      `INSERT INTO trigger_subscriptions (id, session_id, user_id, runner_id, trigger_type, params,
         filters, filter_mode, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET params = excluded.params, filters = excluded.filters,
         filter_mode = excluded.filter_mode`,
    values: [
      s.subscriptionId,
      s.sessionId,
      s.userId,
      s.runnerId,
      s.triggerType,
      JSON.stringify(s.params),
      JSON.stringify(s.filters),
      s.filterMode,
      s.createdAt,
    ],
  };
}

/** Inserts a listener or updates what it spawns. */
export function saveListener(l: ListenerRecord): Write {
  return {
    sql: `INSERT INTO trigger_listeners (id, user_id, runner_id, trigger_type, prompt, cwd, model,
         params, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET trigger_type = excluded.trigger_type,
         prompt = excluded.prompt, cwd = excluded.cwd, model = excluded.model,
         params = excluded.params, updated_at = excluded.updated_at`,
    values: [
      l.listenerId,
      l.userId,
      l.runnerId,
      l.triggerType,
      l.prompt,
      l.cwd,
      l.model ? JSON.stringify(l.model) : null,
      JSON.stringify(l.params),
      l.createdAt,
      l.updatedAt,
    ],
  };
}

/** Reads a session's newest history position (`p`, null when it has none). */
export const HISTORY_TOP = "SELECT MAX(pos) AS p FROM trigger_history WHERE session_id = ?";

/**
 * The writes that append `e` to a session's history after position `top`
 * (the newest stored, null for none) and drop the entries that fall past
 * {@linkcode HISTORY_CAP}.
 */
export function historyWrites(sessionId: string, top: number | null, e: HistoryEntry): Write[] {
  const pos = (top ?? 0) + 1;
  return [{
    sql: `INSERT INTO trigger_history (id, session_id, pos, trigger_id, type, source, summary,
        payload, deliver_as, direction, expects_response, response, ts)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    values: [
      crypto.randomUUID(),
      sessionId,
      pos,
      e.triggerId,
      e.type,
      e.source,
      e.summary ?? null,
      JSON.stringify(e.payload),
      e.deliverAs,
      e.direction,
      e.expectsResponse ? 1 : 0,
      e.response ? JSON.stringify(e.response) : null,
      e.ts,
    ],
  }, {
    sql: "DELETE FROM trigger_history WHERE session_id = ? AND pos <= ?",
    values: [sessionId, pos - HISTORY_CAP],
  }];
}

/** SQL for trigger subscriptions, listeners and per-session history. */
export class TriggersRepo {
  readonly #sql: Statements;
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    this.#sql = new Statements(db);
  }

  // Subscriptions ----------------------------------------------------------

  saveSubscription(s: SubscriptionRecord): void {
    this.#sql.run(saveSubscription(s));
  }

  /** Saves several subscriptions at once (all or none). */
  saveSubscriptions(subs: SubscriptionRecord[]): void {
    transaction(this.#db, () => subs.forEach((s) => this.saveSubscription(s)));
  }

  subscriptionsOf(sessionId: string): SubscriptionRecord[] {
    return (this.#sql.sql(
      "SELECT * FROM trigger_subscriptions WHERE session_id = ? ORDER BY created_at, rowid",
    ).all(sessionId) as unknown as SubRow[]).map(sub);
  }

  /** Subscriptions to `type` of sessions on a runner. */
  subscriptionsFor(runnerId: string, type: string): SubscriptionRecord[] {
    return (this.#sql.sql(
      "SELECT * FROM trigger_subscriptions WHERE runner_id = ? AND trigger_type = ? ORDER BY created_at, rowid",
    ).all(runnerId, type) as unknown as SubRow[]).map(sub);
  }

  deleteSubscriptions(sessionId: string, ids: string[]): number {
    let n = 0;
    const st = this.#sql.sql("DELETE FROM trigger_subscriptions WHERE session_id = ? AND id = ?");
    for (const id of ids) n += Number(st.run(sessionId, id).changes);
    return n;
  }

  deleteSubscriptionsOfSession(sessionId: string): void {
    this.#sql.sql("DELETE FROM trigger_subscriptions WHERE session_id = ?").run(sessionId);
  }

  // Listeners --------------------------------------------------------------

  saveListener(l: ListenerRecord): void {
    this.#sql.run(saveListener(l));
  }

  /** Saves several listeners at once (all or none). */
  saveListeners(list: ListenerRecord[]): void {
    transaction(this.#db, () => list.forEach((l) => this.saveListener(l)));
  }

  listenersOf(runnerId: string, type?: string): ListenerRecord[] {
    const rows = type === undefined
      ? this.#sql.sql(
        "SELECT * FROM trigger_listeners WHERE runner_id = ? ORDER BY created_at, rowid",
      ).all(runnerId)
      : this.#sql.sql(
        "SELECT * FROM trigger_listeners WHERE runner_id = ? AND trigger_type = ? ORDER BY created_at, rowid",
      ).all(runnerId, type);
    return (rows as unknown as ListenerRow[]).map(listener);
  }

  deleteListeners(runnerId: string, ids: string[]): number {
    let n = 0;
    const st = this.#sql.sql("DELETE FROM trigger_listeners WHERE runner_id = ? AND id = ?");
    for (const id of ids) n += Number(st.run(runnerId, id).changes);
    return n;
  }

  // History ----------------------------------------------------------------

  /** Appends an entry, keeping only the newest {@linkcode HISTORY_CAP}. */
  addHistory(sessionId: string, e: HistoryEntry): void {
    const top = this.#sql.sql(HISTORY_TOP).get(sessionId) as { p: number | null };
    for (const w of historyWrites(sessionId, top.p, e)) this.#sql.run(w);
  }

  /** The newest `limit` entries, most recent first. */
  history(sessionId: string, limit: number): HistoryEntry[] {
    return (this.#sql.sql(
      "SELECT * FROM trigger_history WHERE session_id = ? ORDER BY pos DESC LIMIT ?",
    ).all(sessionId, limit) as unknown as HistoryRow[]).map(entry);
  }

  /** The time of the newest entry, or null. */
  lastActivity(sessionId: string): string | null {
    const r = this.#sql.sql(
      "SELECT MAX(ts) AS t FROM trigger_history WHERE session_id = ?",
    ).get(sessionId) as { t: string | null };
    return r.t;
  }

  /** Records the session's answer on the inbound entry of `triggerId`; false when absent. */
  setResponse(sessionId: string, triggerId: string, response: HistoryEntry["response"]): boolean {
    const res = this.#sql.sql(
      `UPDATE trigger_history SET response = ?
       WHERE session_id = ? AND trigger_id = ? AND direction = 'inbound'`,
    ).run(JSON.stringify(response), sessionId, triggerId);
    return Number(res.changes) > 0;
  }

  /**
   * A session's answer to the trigger `triggerId`, at once: recorded on its
   * inbound entry and appended as the `outbound` entry `reply`.
   */
  respond(
    sessionId: string,
    triggerId: string,
    response: HistoryEntry["response"],
    reply: HistoryEntry,
  ): void {
    transaction(this.#db, () => {
      this.setResponse(sessionId, triggerId, response);
      this.addHistory(sessionId, reply);
    });
  }

  /** Drops the inbound entry of `triggerId` (a trigger whose delivery failed). */
  removeInbound(sessionId: string, triggerId: string): void {
    this.#sql.sql(
      "DELETE FROM trigger_history WHERE session_id = ? AND trigger_id = ? AND direction = 'inbound'",
    ).run(sessionId, triggerId);
  }

  clearHistory(sessionId: string): void {
    this.#sql.sql("DELETE FROM trigger_history WHERE session_id = ?").run(sessionId);
  }

  /** Drops the history of every session idle (no new entry) since `before` (ISO). */
  expireHistory(before: string): void {
    this.#sql.sql(
      `DELETE FROM trigger_history WHERE session_id IN (
         SELECT session_id FROM trigger_history GROUP BY session_id HAVING MAX(ts) < ?)`,
    ).run(before);
  }
}
