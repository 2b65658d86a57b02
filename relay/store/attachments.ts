import { type Database, transaction } from "./db.ts";
import { Statements } from "./_statements.ts";
import type { Write } from "./_write.ts";

/** One uploaded file: who may read it (through its session), where its bytes are, until when. */
export interface AttachmentRecord {
  attachmentId: string;
  sessionId: string;
  /** The owner of the session it was uploaded into. */
  userId: string;
  /** The runner of that session. */
  runnerId: string;
  /** Hex sha-256 of the bytes: the blob's file name. */
  sha256: string;
  filename: string;
  mimeType: string;
  size: number;
  createdAt: string;
  expiresAt: string;
}

/** A row to insert (the session's runner is read from the session). */
export type NewAttachment = Omit<AttachmentRecord, "runnerId">;

export interface Row {
  id: string;
  session_id: string;
  user_id: string;
  runner_id: string;
  sha256: string;
  filename: string;
  mime_type: string;
  size: number;
  created_at: string;
  expires_at: string;
}

export function record(r: Row): AttachmentRecord {
  return {
    attachmentId: r.id,
    sessionId: r.session_id,
    userId: r.user_id,
    runnerId: r.runner_id,
    sha256: r.sha256,
    filename: r.filename,
    mimeType: r.mime_type,
    size: r.size,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
  };
}

/** The insert of an uploaded file's record. */
export function insertAttachment(a: NewAttachment): Write {
  return {
    sql: `INSERT INTO attachments
         (id, session_id, user_id, sha256, filename, mime_type, size, created_at, expires_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    values: [
      a.attachmentId,
      a.sessionId,
      a.userId,
      a.sha256,
      a.filename,
      a.mimeType,
      a.size,
      a.createdAt,
      a.expiresAt,
    ],
  };
}

/**
 * SQL for attachments. A row counts only while its session exists and is
 * still owned by the uploader: every read joins the session, so a deleted
 * session's attachments are gone at once, before the sweep removes the rows.
 */
export class AttachmentsRepo {
  readonly #sql: Statements;
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    this.#sql = new Statements(db);
  }

  /** Inserts the rows of one upload, all or none. */
  insertAll(rows: NewAttachment[]): void {
    transaction(this.#db, () => rows.forEach((a) => this.insert(a)));
  }

  insert(a: NewAttachment): void {
    this.#sql.run(insertAttachment(a));
  }

  /** The attachment, unless it expired by `now` (ISO) or its session is gone or changed hands. */
  get(attachmentId: string, now: string): AttachmentRecord | undefined {
    const r = this.#sql.sql(
      `SELECT a.*, s.runner_id FROM attachments a
       JOIN sessions s ON s.id = a.session_id AND s.user_id = a.user_id
       WHERE a.id = ? AND a.expires_at > ?`,
    ).get(attachmentId, now) as Row | undefined;
    return r ? record(r) : undefined;
  }

  /** Bytes `userId`'s unexpired attachments hold (each upload counted, shared blobs or not). */
  userBytes(userId: string, now: string): number {
    const r = this.#sql.sql(
      "SELECT COALESCE(SUM(size), 0) AS n FROM attachments WHERE user_id = ? AND expires_at > ?",
    ).get(userId, now) as { n: number };
    return r.n;
  }

  /** Deletes rows that expired by `now` or whose session is gone; how many. */
  deleteDead(now: string): number {
    return transaction(this.#db, () => {
      const expired = this.#sql.sql("DELETE FROM attachments WHERE expires_at <= ?").run(now);
      const orphaned = this.#sql.sql(
        `DELETE FROM attachments WHERE NOT EXISTS
           (SELECT 1 FROM sessions s WHERE s.id = attachments.session_id)`,
      ).run();
      return Number(expired.changes) + Number(orphaned.changes);
    });
  }

  /** Whether any row still names the blob `sha256`. */
  referenced(sha256: string): boolean {
    return this.#sql.sql("SELECT 1 FROM attachments WHERE sha256 = ? LIMIT 1").get(sha256) !==
      undefined;
  }
}
