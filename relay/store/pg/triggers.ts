import {
  entry,
  HISTORY_TOP,
  type HistoryEntry,
  type HistoryRow,
  historyWrites,
  listener,
  type ListenerRecord,
  type ListenerRow,
  saveListener,
  saveSubscription,
  sub,
  type SubRow,
  type SubscriptionRecord,
} from "../triggers.ts";
import type { PgSql } from "./_sql.ts";

/**
 * Trigger subscriptions, listeners and per-session history (see
 * TriggersRepo). Lists keep the order rows were added in by `ord`, where
 * SQLite uses its rowid.
 */
export class PgTriggersRepo {
  constructor(private readonly sql: PgSql) {}

  async saveSubscription(s: SubscriptionRecord): Promise<void> {
    await this.sql.write(saveSubscription(s));
  }

  /** Saves several subscriptions at once (all or none). */
  saveSubscriptions(subs: SubscriptionRecord[]): Promise<void> {
    return this.sql.tx(async (sql) => {
      const repo = new PgTriggersRepo(sql);
      for (const s of subs) await repo.saveSubscription(s);
    });
  }

  async subscriptionsOf(sessionId: string): Promise<SubscriptionRecord[]> {
    return (await this.sql.all<SubRow>(
      "SELECT * FROM trigger_subscriptions WHERE session_id = ? ORDER BY created_at, ord",
      sessionId,
    )).map(sub);
  }

  async subscriptionsFor(runnerId: string, type: string): Promise<SubscriptionRecord[]> {
    return (await this.sql.all<SubRow>(
      `SELECT * FROM trigger_subscriptions WHERE runner_id = ? AND trigger_type = ?
       ORDER BY created_at, ord`,
      runnerId,
      type,
    )).map(sub);
  }

  deleteSubscriptions(sessionId: string, ids: string[]): Promise<number> {
    return this.sql.tx(async (sql) => {
      let n = 0;
      for (const id of ids) {
        n += await sql.run(
          "DELETE FROM trigger_subscriptions WHERE session_id = ? AND id = ?",
          sessionId,
          id,
        );
      }
      return n;
    });
  }

  async deleteSubscriptionsOfSession(sessionId: string): Promise<void> {
    await this.sql.run("DELETE FROM trigger_subscriptions WHERE session_id = ?", sessionId);
  }

  async saveListener(l: ListenerRecord): Promise<void> {
    await this.sql.write(saveListener(l));
  }

  /** Saves several listeners at once (all or none). */
  saveListeners(list: ListenerRecord[]): Promise<void> {
    return this.sql.tx(async (sql) => {
      const repo = new PgTriggersRepo(sql);
      for (const l of list) await repo.saveListener(l);
    });
  }

  async listenersOf(runnerId: string, type?: string): Promise<ListenerRecord[]> {
    const rows = type === undefined
      ? await this.sql.all<ListenerRow>(
        "SELECT * FROM trigger_listeners WHERE runner_id = ? ORDER BY created_at, ord",
        runnerId,
      )
      : await this.sql.all<ListenerRow>(
        `SELECT * FROM trigger_listeners WHERE runner_id = ? AND trigger_type = ?
         ORDER BY created_at, ord`,
        runnerId,
        type,
      );
    return rows.map(listener);
  }

  deleteListeners(runnerId: string, ids: string[]): Promise<number> {
    return this.sql.tx(async (sql) => {
      let n = 0;
      for (const id of ids) {
        n += await sql.run(
          "DELETE FROM trigger_listeners WHERE runner_id = ? AND id = ?",
          runnerId,
          id,
        );
      }
      return n;
    });
  }

  /**
   * Appends an entry, keeping only the newest {@linkcode HISTORY_CAP}. The
   * session's entries are locked first, so that two nodes adding at once
   * take different positions (the second waits for the first's commit).
   */
  addHistory(sessionId: string, e: HistoryEntry): Promise<void> {
    return this.sql.tx(async (sql) => {
      await sql.get("SELECT pg_advisory_xact_lock(2, hashtext(?))", sessionId);
      const top = await sql.get<{ p: number | null }>(HISTORY_TOP, sessionId);
      for (const w of historyWrites(sessionId, top?.p ?? null, e)) await sql.write(w);
    });
  }

  async history(sessionId: string, limit: number): Promise<HistoryEntry[]> {
    return (await this.sql.all<HistoryRow>(
      "SELECT * FROM trigger_history WHERE session_id = ? ORDER BY pos DESC LIMIT ?",
      sessionId,
      limit,
    )).map(entry);
  }

  async lastActivity(sessionId: string): Promise<string | null> {
    return (await this.sql.get<{ t: string | null }>(
      "SELECT MAX(ts) AS t FROM trigger_history WHERE session_id = ?",
      sessionId,
    ))?.t ?? null;
  }

  async setResponse(
    sessionId: string,
    triggerId: string,
    response: HistoryEntry["response"],
  ): Promise<boolean> {
    return await this.sql.run(
      `UPDATE trigger_history SET response = ?
       WHERE session_id = ? AND trigger_id = ? AND direction = 'inbound'`,
      JSON.stringify(response),
      sessionId,
      triggerId,
    ) > 0;
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
  ): Promise<void> {
    return this.sql.tx(async (sql) => {
      const repo = new PgTriggersRepo(sql);
      await repo.setResponse(sessionId, triggerId, response);
      await repo.addHistory(sessionId, reply);
    });
  }

  /** Drops the inbound entry of `triggerId` (a trigger whose delivery failed). */
  async removeInbound(sessionId: string, triggerId: string): Promise<void> {
    await this.sql.run(
      "DELETE FROM trigger_history WHERE session_id = ? AND trigger_id = ? AND direction = 'inbound'",
      sessionId,
      triggerId,
    );
  }

  async clearHistory(sessionId: string): Promise<void> {
    await this.sql.run("DELETE FROM trigger_history WHERE session_id = ?", sessionId);
  }

  async expireHistory(before: string): Promise<void> {
    await this.sql.run(
      `DELETE FROM trigger_history WHERE session_id IN (
         SELECT session_id FROM trigger_history GROUP BY session_id HAVING MAX(ts) < ?)`,
      before,
    );
  }
}
