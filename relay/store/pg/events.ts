import {
  chunkEvents,
  type ChunkRow,
  CHUNKS_FROM,
  type EventChunk,
  EventsAfter,
  INSERT_CHUNK,
  LAST_SEQ,
  type StoredEvent,
  unstored,
} from "../events.ts";
import type { PgSql } from "./_sql.ts";

/**
 * Most chunks read per round trip by {@linkcode PgEventsRepo.after}, where
 * SQLite reads one chunk at a time from its cursor. Pages start at 2 chunks
 * and double, so a read that one chunk satisfies (a page of catch-up capped
 * in bytes) does not fetch 16 chunks of large events it then drops; a long
 * read takes few round trips. A chunk is at most 64 KB or one large event.
 */
const PAGE_CHUNKS = 16;
const CHUNKS_PAGE = `${CHUNKS_FROM} LIMIT ?`;
const CHUNKS_NEXT = `SELECT first_seq, last_seq, seqs, body FROM session_event_chunks
  WHERE session_id = ? AND first_seq > ? ORDER BY first_seq LIMIT ?`;

/** A session's appends, one transaction at a time (locks of this kind are keyed `1, hash`). */
const LOCK_SESSION = "SELECT pg_advisory_xact_lock(1, hashtext(?))";
/** The same locks for several sessions, in one order, so two batches never wait on each other in a circle. */
export const LOCK_SESSIONS = `SELECT pg_advisory_xact_lock(1, k) FROM (
  SELECT DISTINCT hashtext(x) AS k FROM unnest(?::text[]) AS x ORDER BY 1) AS ks`;

/** The durable per-session event log, in the same chunks as SQLite's (see EventsRepo). */
export class PgEventsRepo {
  constructor(private readonly sql: PgSql) {}

  async append(sessionId: string, seq: number, json: string): Promise<boolean> {
    return await this.appendMany(sessionId, [{ seq, json }]) > 0;
  }

  /** As EventsRepo's; events out of order reject (nothing is stored). */
  async appendMany(sessionId: string, events: readonly StoredEvent[]): Promise<number> {
    return await this.appendChunks(sessionId, chunkEvents(events));
  }

  /**
   * As EventsRepo's: events at or below the session's last stored seq are
   * skipped. The read of that seq and the inserts are one transaction, under
   * the session's lock.
   */
  appendChunks(sessionId: string, chunks: readonly EventChunk[]): Promise<number> {
    return this.sql.tx(async (sql) => {
      // Two nodes may append one session's events at once (a runner that moved
      // while the old node still commits), cut into other chunks: without the
      // lock both read the same last seq and the log held some seqs twice.
      await sql.get(LOCK_SESSION, sessionId);
      return await appendLocked(sql, sessionId, chunks);
    });
  }

  async after(
    sessionId: string,
    afterSeq: number,
    limit: number,
    maxBytes = Infinity,
  ): Promise<StoredEvent[]> {
    if (limit <= 0) return [];
    const taken = new EventsAfter(afterSeq, limit, maxBytes);
    let page = 2;
    let rows = await this.sql.all<ChunkRow>(CHUNKS_PAGE, sessionId, sessionId, afterSeq + 1, page);
    while (rows.length > 0) {
      for (const row of rows) {
        if (!taken.take(row)) return taken.events;
      }
      if (rows.length < page) break;
      page = Math.min(page * 2, PAGE_CHUNKS);
      rows = await this.sql.all<ChunkRow>(
        CHUNKS_NEXT,
        sessionId,
        rows[rows.length - 1]!.first_seq,
        page,
      );
    }
    return taken.events;
  }

  async maxSeq(sessionId: string): Promise<number> {
    return (await this.sql.get<{ m: number }>(LAST_SEQ, sessionId))?.m ?? 0;
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.sql.run("DELETE FROM session_event_chunks WHERE session_id = ?", sessionId);
  }

  deleteSome(sessionId: string, chunks: number): Promise<number> {
    return this.sql.run(
      `DELETE FROM session_event_chunks WHERE session_id = ? AND first_seq IN (
         SELECT first_seq FROM session_event_chunks WHERE session_id = ?
         ORDER BY first_seq LIMIT ?)`,
      sessionId,
      sessionId,
      chunks,
    );
  }
}

/**
 * Appends chunks skipping what is stored, inside a transaction that holds
 * the session's lock already (see {@linkcode PgEventsRepo.appendChunks}).
 */
export async function appendLocked(
  sql: PgSql,
  sessionId: string,
  chunks: readonly EventChunk[],
): Promise<number> {
  const stored = (await sql.get<{ m: number }>(LAST_SEQ, sessionId))?.m ?? 0;
  let n = 0;
  for (const f of unstored(chunks, stored)) {
    await sql.run(INSERT_CHUNK, sessionId, f.firstSeq, f.lastSeq, f.seqs, f.body);
    n += f.count;
  }
  return n;
}
