import { DELETABLE, type Deletable, deletable, OLDEST_FIRST } from "../retention.ts";
import type { PgSql } from "./_sql.ts";

/** Deleting sessions and what retention weighs (see RetentionRepo). */
export class PgRetentionRepo {
  constructor(private readonly sql: PgSql) {}

  /** Removes the session's row and what hangs off it, in one transaction. */
  beginDeletion(sessionId: string, userId: string, at: string): Promise<void> {
    return this.sql.tx(async (sql) => {
      await sql.run("DELETE FROM sessions WHERE id = ?", sessionId);
      await sql.run("DELETE FROM trigger_subscriptions WHERE session_id = ?", sessionId);
      await sql.run("DELETE FROM trigger_history WHERE session_id = ?", sessionId);
      await sql.run("DELETE FROM attachments WHERE session_id = ?", sessionId);
      await sql.run(
        `INSERT INTO session_deletions (session_id, user_id, at) VALUES (?, ?, ?)
         ON CONFLICT DO NOTHING`,
        sessionId,
        userId,
        at,
      );
    });
  }

  async pendingDeletions(): Promise<string[]> {
    return (await this.sql.all<{ session_id: string }>(
      "SELECT session_id FROM session_deletions ORDER BY at",
    )).map((r) => r.session_id);
  }

  async finishDeletion(sessionId: string): Promise<void> {
    await this.sql.run("DELETE FROM session_deletions WHERE session_id = ?", sessionId);
  }

  async endedBefore(cutoff: string): Promise<Deletable[]> {
    return deletable(
      await this.sql.all(
        `${DELETABLE} AND COALESCE(ended_at, updated_at) < ? ${OLDEST_FIRST}`,
        cutoff,
      ),
    );
  }

  async oldestDeletable(userId?: string): Promise<Deletable[]> {
    return deletable(
      userId === undefined
        ? await this.sql.all(`${DELETABLE} ${OLDEST_FIRST}`)
        : await this.sql.all(`${DELETABLE} AND user_id = ? ${OLDEST_FIRST}`, userId),
    );
  }

  async usersOver(bytes: number): Promise<{ userId: string; eventBytes: number }[]> {
    return (await this.sql.all<{ user_id: string; b: number }>(
      `SELECT user_id, SUM(event_bytes) AS b FROM sessions GROUP BY user_id
       HAVING SUM(event_bytes) > ?`,
      bytes,
    )).map((r) => ({ userId: r.user_id, eventBytes: r.b }));
  }

  async totalBytes(): Promise<number> {
    return (await this.sql.get<{ b: number }>(
      "SELECT COALESCE(SUM(event_bytes), 0) AS b FROM sessions",
    ))!.b;
  }
}
