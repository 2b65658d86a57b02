import {
  fromRow,
  insertSession,
  type SessionPatch,
  type SessionRecord,
  type SessionRow,
  updateSession,
} from "../sessions.ts";
import type { PgSql } from "./_sql.ts";

/** Sessions (see SessionsRepo; the event log is in PgEventsRepo). */
export class PgSessionsRepo {
  constructor(private readonly sql: PgSql) {}

  async insert(s: SessionRecord): Promise<void> {
    await this.sql.write(insertSession(s));
  }

  async get(id: string): Promise<SessionRecord | undefined> {
    const r = await this.sql.get<SessionRow>("SELECT * FROM sessions WHERE id = ?", id);
    return r && fromRow(r);
  }

  async getOwned(userId: string, id: string): Promise<SessionRecord | undefined> {
    const s = await this.get(id);
    return s && s.userId === userId ? s : undefined;
  }

  /** Every session of a user, newest first, without prompts or sizes (as SessionsRepo's). */
  async listForUser(userId: string): Promise<SessionRecord[]> {
    const rows = await this.sql.all<SessionRow>(
      `SELECT id, user_id, runner_id, status, activity, cwd, model, '' AS prompt, title,
         created_at, updated_at, ended_at, end_reason, last_seq, pinned, parent_id, agent
       FROM sessions WHERE user_id = ? ORDER BY created_at DESC, id DESC`,
      userId,
    );
    return rows.map(fromRow);
  }

  async listLiveForRunner(runnerId: string): Promise<SessionRecord[]> {
    return (await this.sql.all<SessionRow>(
      "SELECT * FROM sessions WHERE runner_id = ? AND status IN ('starting', 'running')",
      runnerId,
    )).map(fromRow);
  }

  async listPinned(userId: string): Promise<SessionRecord[]> {
    return (await this.sql.all<SessionRow>(
      "SELECT * FROM sessions WHERE user_id = ? AND pinned = 1 ORDER BY created_at DESC, id DESC",
      userId,
    )).map(fromRow);
  }

  async update(id: string, patch: SessionPatch, at: string): Promise<void> {
    const w = updateSession(id, patch, at);
    if (w) await this.sql.write(w);
  }

  async setLastSeq(id: string, seq: number, eventBytes: number): Promise<void> {
    await this.sql.run(
      "UPDATE sessions SET last_seq = ?, event_bytes = ? WHERE id = ? AND last_seq < ?",
      seq,
      eventBytes,
      id,
      seq,
    );
  }

  /** Several sessions' last seqs in one transaction, each only moved forward. */
  setLastSeqs(list: { id: string; seq: number; eventBytes: number }[]): Promise<void> {
    if (list.length === 0) return Promise.resolve();
    return this.sql.tx(async (sql) => {
      const repo = new PgSessionsRepo(sql);
      for (const l of list) await repo.setLastSeq(l.id, l.seq, l.eventBytes);
    });
  }

  /** As SessionsRepo's: one index lookup per session for its log's last seq. */
  catchUpLastSeqs(): Promise<number> {
    return this.sql.run(
      `WITH tail AS (
         SELECT id, (SELECT last_seq FROM session_event_chunks WHERE session_id = sessions.id
                     ORDER BY first_seq DESC LIMIT 1) AS seq
         FROM sessions)
       UPDATE sessions SET last_seq = tail.seq,
         event_bytes = sessions.event_bytes + (SELECT COALESCE(SUM(length(body)), 0)
           FROM session_event_chunks
           WHERE session_id = sessions.id AND first_seq > sessions.last_seq)
       FROM tail
       WHERE tail.id = sessions.id AND sessions.last_seq < tail.seq`,
    );
  }

  async setPinned(userId: string, id: string, pinned: boolean): Promise<boolean> {
    return await this.sql.run(
      "UPDATE sessions SET pinned = ? WHERE id = ? AND user_id = ?",
      pinned ? 1 : 0,
      id,
      userId,
    ) > 0;
  }

  async listChildren(parentId: string): Promise<SessionRecord[]> {
    return (await this.sql.all<SessionRow>(
      "SELECT * FROM sessions WHERE parent_id = ? ORDER BY created_at, id",
      parentId,
    )).map(fromRow);
  }

  async countChildren(parentId: string): Promise<number> {
    return Number(
      (await this.sql.get<{ n: number }>(
        "SELECT COUNT(*) AS n FROM sessions WHERE parent_id = ?",
        parentId,
      ))!.n,
    );
  }

  async delete(id: string): Promise<void> {
    await this.sql.run("DELETE FROM sessions WHERE id = ?", id);
  }
}
