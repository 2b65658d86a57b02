import type { Database } from "./db.ts";
import { Statements } from "./_statements.ts";

/** One stored event: its seq and its wire form `{"seq":..,"ts":..,"e":..}`. */
export interface StoredEvent {
  seq: number;
  json: string;
}

/**
 * Most event bytes in one stored chunk (one event bigger than that is a chunk
 * by itself). SQLite copies what is bound; with 2 MB bound a time the relay's
 * malloc kept some 40 MB more after a 100 MB stream than with 64 KB.
 */
export const CHUNK_BYTES = 64 * 1024;

export const INSERT_CHUNK =
  `INSERT INTO session_event_chunks (session_id, first_seq, last_seq, seqs, body)
  VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`;
export const LAST_SEQ = `SELECT last_seq AS m FROM session_event_chunks WHERE session_id = ?
  ORDER BY first_seq DESC LIMIT 1`;
/** The chunk holding a seq (the last one starting at or before it), then every later one. */
export const CHUNKS_FROM = `SELECT first_seq, last_seq, seqs, body FROM session_event_chunks
  WHERE session_id = ? AND first_seq >= COALESCE((
    SELECT first_seq FROM session_event_chunks
    WHERE session_id = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1), 0)
  ORDER BY first_seq`;

/**
 * The part of `chunks` (ascending, not overlapping) past `stored`, the
 * session's last stored seq: both engines append only these. A re-send that
 * overlaps what is stored is cut, and the stored copies win.
 */
export function* unstored(chunks: readonly EventChunk[], stored: number): Iterable<EventChunk> {
  for (const c of chunks) {
    if (c.lastSeq <= stored) continue;
    if (c.firstSeq > stored) yield c;
    else yield* chunkEvents(eventsOf(c).filter((e) => e.seq > stored));
  }
}

/** A stored chunk as both engines read it. */
export interface ChunkRow {
  first_seq: number;
  last_seq: number;
  seqs: string | null;
  body: string;
}

/**
 * Takes the events past `afterSeq` out of stored chunks, oldest first: up to
 * `limit` events and no more than `maxBytes` of JSON, the first event
 * whatever its size (so a reader always moves on). `after` reads through
 * one on either engine.
 */
export class EventsAfter {
  readonly events: StoredEvent[] = [];
  #bytes = 0;

  constructor(
    readonly afterSeq: number,
    readonly limit: number,
    readonly maxBytes: number,
  ) {}

  /** Takes what it wants of one chunk; false once it is full (no later chunk is needed). */
  take(row: ChunkRow): boolean {
    if (row.last_seq <= this.afterSeq) return true;
    const c = { firstSeq: row.first_seq, lastSeq: row.last_seq, seqs: row.seqs, body: row.body };
    for (const ev of eventsOf(c)) {
      if (ev.seq <= this.afterSeq) continue;
      const n = this.events.length;
      if (n >= this.limit || (n > 0 && this.#bytes + ev.json.length > this.maxBytes)) return false;
      this.events.push(ev);
      this.#bytes += ev.json.length;
    }
    return this.events.length < this.limit && this.#bytes < this.maxBytes;
  }
}

/**
 * SQL for the durable per-session event log.
 *
 * Events are stored in chunks: each commit writes a session's new events as
 * one row (`session_event_chunks`: first and last seq, the events' JSON
 * joined by newlines), split at CHUNK_BYTES. A row per event cost SQLite
 * about twice the work per event (a B-tree insert, a key and the binding of
 * three values each): measured in isolation, 1.7–3.2 µs per event in
 * commits of 50–700 against 0.8–1.5 µs in chunks. A session's seqs only
 * grow (the hub drops a seq at or below the last one it received), so the
 * chunks of a session never overlap.
 */
export class EventsRepo {
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#sql = new Statements(db);
  }

  /** Appends an event; false when that seq (or a later one) was already stored. */
  append(sessionId: string, seq: number, json: string): boolean {
    return this.appendMany(sessionId, [{ seq, json }]) > 0;
  }

  /**
   * Appends a run of events (ascending seqs) in as few chunks as their size
   * allows; events at or below the session's last stored seq are skipped (a
   * re-send). Returns how many were stored.
   */
  appendMany(sessionId: string, events: readonly StoredEvent[]): number {
    return this.appendChunks(sessionId, chunkEvents(events));
  }

  /**
   * Appends chunks made by {@linkcode chunkEvents} (ascending, not
   * overlapping), skipping the events at or below the session's last stored
   * seq. Returns how many events were stored.
   */
  appendChunks(sessionId: string, chunks: readonly EventChunk[]): number {
    let n = 0;
    for (const f of unstored(chunks, this.maxSeq(sessionId))) {
      this.#sql.sql(INSERT_CHUNK).run(sessionId, f.firstSeq, f.lastSeq, f.seqs, f.body);
      n += f.count;
    }
    return n;
  }

  /**
   * Up to `limit` events with seq greater than `afterSeq`, oldest first, and
   * no more than `maxBytes` of JSON (the first event is returned whatever its
   * size, so a reader always moves on). What is read to get them is at most
   * one stored chunk past the last one returned: 64 KB, or one big event.
   */
  after(sessionId: string, afterSeq: number, limit: number, maxBytes = Infinity): StoredEvent[] {
    if (limit <= 0) return [];
    const taken = new EventsAfter(afterSeq, limit, maxBytes);
    for (const row of this.#sql.sql(CHUNKS_FROM).iterate(sessionId, sessionId, afterSeq + 1)) {
      if (!taken.take(row as unknown as ChunkRow)) break;
    }
    return taken.events;
  }

  /** The highest seq stored for a session (0 when none). */
  maxSeq(sessionId: string): number {
    const r = this.#sql.sql(LAST_SEQ).get(sessionId) as { m: number } | undefined;
    return r?.m ?? 0;
  }

  deleteSession(sessionId: string): void {
    this.#sql.sql("DELETE FROM session_event_chunks WHERE session_id = ?").run(sessionId);
  }

  /**
   * Deletes up to `chunks` of a session's oldest stored chunks (each at most
   * CHUNK_BYTES, or one large event); returns how many went. A long log goes
   * in several short transactions, so no one of them stalls the relay.
   */
  deleteSome(sessionId: string, chunks: number): number {
    const res = this.#sql.sql(
      `DELETE FROM session_event_chunks WHERE session_id = ? AND first_seq IN (
         SELECT first_seq FROM session_event_chunks WHERE session_id = ?
         ORDER BY first_seq LIMIT ?)`,
    ).run(sessionId, sessionId, chunks);
    return Number(res.changes);
  }
}

/** A run of one session's events as one stored row (see {@linkcode EventsRepo}). */
export interface EventChunk {
  firstSeq: number;
  lastSeq: number;
  /** How many events it holds. */
  count: number;
  /** Their seqs, comma-separated, when the run has a gap; null when it has none. */
  seqs: string | null;
  /** Their JSON, a line each; one event whose JSON holds a newline is a chunk by itself. */
  body: string;
}

/**
 * Cuts a run of events (ascending seqs) into chunks of at most CHUNK_BYTES;
 * throws when two are out of order.
 */
export function chunkEvents(events: readonly StoredEvent[]): EventChunk[] {
  const chunks: EventChunk[] = [];
  let i = 0;
  while (i < events.length) {
    const start = i;
    let bytes = events[i]!.json.length;
    let contiguous = true;
    // A line per event: JSON that holds a newline of its own goes alone.
    const alone = events[i]!.json.includes("\n");
    i++;
    while (i < events.length) {
      const ev = events[i]!;
      const prev = events[i - 1]!.seq;
      if (ev.seq <= prev) throw new Error(`Events out of order: ${ev.seq} after ${prev}`);
      if (alone || bytes + ev.json.length > CHUNK_BYTES || ev.json.includes("\n")) break;
      if (ev.seq !== prev + 1) contiguous = false;
      bytes += ev.json.length;
      i++;
    }
    const run = events.slice(start, i);
    chunks.push({
      firstSeq: run[0]!.seq,
      lastSeq: run[run.length - 1]!.seq,
      count: run.length,
      seqs: contiguous ? null : run.map((e) => e.seq).join(","),
      body: run.length === 1 ? run[0]!.json : run.map((e) => e.json).join("\n"),
    });
  }
  return chunks;
}

/** The events a stored chunk holds, in order. */
export function eventsOf(c: Omit<EventChunk, "count">): StoredEvent[] {
  if (c.firstSeq === c.lastSeq) return [{ seq: c.firstSeq, json: c.body }];
  const lines = c.body.split("\n");
  const nums = c.seqs === null ? null : c.seqs.split(",").map(Number);
  return lines.map((json, k) => ({ seq: nums ? nums[k]! : c.firstSeq + k, json }));
}
