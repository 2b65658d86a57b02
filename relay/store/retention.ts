import { type Database, transaction } from "./db.ts";
import { Statements } from "./_statements.ts";

/** A session retention may delete: its owner and the size of its log. */
export interface Deletable {
  sessionId: string;
  userId: string;
  eventBytes: number;
}

/** What retention may delete: ended, unpinned; oldest end first. */
export const DELETABLE = `SELECT id, user_id, event_bytes FROM sessions
  WHERE status IN ('ended', 'error') AND pinned = 0`;
export const OLDEST_FIRST = "ORDER BY COALESCE(ended_at, updated_at), id";

export function deletable(rows: unknown[]): Deletable[] {
  return (rows as { id: string; user_id: string; event_bytes: number }[]).map((r) => ({
    sessionId: r.id,
    userId: r.user_id,
    eventBytes: r.event_bytes,
  }));
}

/**
 * SQL for deleting sessions: the sessions retention may delete, the sizes it
 * weighs, and `session_deletions`, where a deleted session stays until its
 * events are gone (a deletion cut short by a stop is finished at the next
 * start).
 */
export class RetentionRepo {
  readonly #sql: Statements;
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    this.#sql = new Statements(db);
  }

  /**
   * Removes a session's row and what hangs off it apart from its events
   * (trigger subscriptions and history), and records that its events are
   * to go, in one transaction.
   */
  beginDeletion(sessionId: string, userId: string, at: string): void {
    transaction(this.#db, () => {
      this.#sql.sql("DELETE FROM sessions WHERE id = ?").run(sessionId);
      this.#sql.sql("DELETE FROM trigger_subscriptions WHERE session_id = ?").run(sessionId);
      this.#sql.sql("DELETE FROM trigger_history WHERE session_id = ?").run(sessionId);
      // Its attachments' blobs go at the next attachment sweep (relay/attachments.ts).
      this.#sql.sql("DELETE FROM attachments WHERE session_id = ?").run(sessionId);
      this.#sql.sql(
        `INSERT INTO session_deletions (session_id, user_id, at) VALUES (?, ?, ?)
         ON CONFLICT DO NOTHING`,
      ).run(sessionId, userId, at);
    });
  }

  /** The deletions whose events are not all gone yet. */
  pendingDeletions(): string[] {
    return (this.#sql.sql("SELECT session_id FROM session_deletions ORDER BY at").all() as {
      session_id: string;
    }[]).map((r) => r.session_id);
  }

  /** Its events are gone: the deletion is complete. */
  finishDeletion(sessionId: string): void {
    this.#sql.sql("DELETE FROM session_deletions WHERE session_id = ?").run(sessionId);
  }

  /** Deletable sessions that ended before `cutoff` (ISO). */
  endedBefore(cutoff: string): Deletable[] {
    return deletable(
      this.#sql.sql(`${DELETABLE} AND COALESCE(ended_at, updated_at) < ? ${OLDEST_FIRST}`)
        .all(cutoff),
    );
  }

  /** Deletable sessions of one user, or of everyone, oldest end first. */
  oldestDeletable(userId?: string): Deletable[] {
    return deletable(
      userId === undefined
        ? this.#sql.sql(`${DELETABLE} ${OLDEST_FIRST}`).all()
        : this.#sql.sql(`${DELETABLE} AND user_id = ? ${OLDEST_FIRST}`).all(userId),
    );
  }

  /** Users whose sessions' logs hold more than `bytes`, with their totals. */
  usersOver(bytes: number): { userId: string; eventBytes: number }[] {
    return (this.#sql.sql(
      `SELECT user_id, SUM(event_bytes) AS b FROM sessions GROUP BY user_id
       HAVING SUM(event_bytes) > ?`,
    ).all(bytes) as { user_id: string; b: number }[]).map((r) => ({
      userId: r.user_id,
      eventBytes: r.b,
    }));
  }

  /** What every session's log holds, together. */
  totalBytes(): number {
    const r = this.#sql.sql("SELECT COALESCE(SUM(event_bytes), 0) AS b FROM sessions").get() as {
      b: number;
    };
    return r.b;
  }
}
