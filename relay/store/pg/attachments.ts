import {
  type AttachmentRecord,
  insertAttachment,
  type NewAttachment,
  record,
  type Row,
} from "../attachments.ts";
import type { PgSql } from "./_sql.ts";

/** Attachments; every read joins the session, as in AttachmentsRepo. */
export class PgAttachmentsRepo {
  constructor(private readonly sql: PgSql) {}

  async insert(a: NewAttachment): Promise<void> {
    await this.sql.write(insertAttachment(a));
  }

  async get(attachmentId: string, now: string): Promise<AttachmentRecord | undefined> {
    const r = await this.sql.get<Row>(
      `SELECT a.*, s.runner_id FROM attachments a
       JOIN sessions s ON s.id = a.session_id AND s.user_id = a.user_id
       WHERE a.id = ? AND a.expires_at > ?`,
      attachmentId,
      now,
    );
    return r ? record(r) : undefined;
  }

  async userBytes(userId: string, now: string): Promise<number> {
    return (await this.sql.get<{ n: number }>(
      "SELECT COALESCE(SUM(size), 0) AS n FROM attachments WHERE user_id = ? AND expires_at > ?",
      userId,
      now,
    ))!.n;
  }

  /** Inserts the rows of one upload, all or none. */
  insertAll(rows: NewAttachment[]): Promise<void> {
    return this.sql.tx(async (sql) => {
      const repo = new PgAttachmentsRepo(sql);
      for (const a of rows) await repo.insert(a);
    });
  }

  /** Deletes rows that expired by `now` or whose session is gone, in one transaction; how many. */
  deleteDead(now: string): Promise<number> {
    return this.sql.tx(async (sql) => {
      const expired = await sql.run("DELETE FROM attachments WHERE expires_at <= ?", now);
      const orphaned = await sql.run(
        `DELETE FROM attachments WHERE NOT EXISTS
           (SELECT 1 FROM sessions s WHERE s.id = attachments.session_id)`,
      );
      return expired + orphaned;
    });
  }

  async referenced(sha256: string): Promise<boolean> {
    return await this.sql.get("SELECT 1 FROM attachments WHERE sha256 = ? LIMIT 1", sha256) !==
      undefined;
  }
}
