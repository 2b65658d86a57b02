import type { Database } from "../db.ts";

/** One stored event: its seq and its wire form `{"seq":..,"ts":..,"e":..}`. */
export interface StoredEvent {
  seq: number;
  json: string;
}

/** Most rows in one multi-row INSERT (3 parameters each). */
const INSERT_ROWS = 64;
/**
 * Most body bytes bound to one INSERT. SQLite copies what is bound; with 64
 * tool outputs of 32 KB in one statement (2 MB a time) the relay's malloc
 * kept some 40 MB more after a 100 MB stream than with statements this size.
 */
const INSERT_BYTES = 64 * 1024;

/** SQL for the durable per-session event log. */
export class EventsRepo {
  readonly #insert;
  /** Multi-row INSERTs by row count: one statement per 64 events costs far less than 64. */
  readonly #insertMany = new Map<number, ReturnType<Database["prepare"]>>();
  readonly #range;
  readonly #max;

  constructor(private readonly db: Database) {
    this.#insert = db.prepare(
      "INSERT INTO session_events (session_id, seq, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
    );
    this.#range = db.prepare(
      "SELECT seq, body FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
    );
    this.#max = db.prepare("SELECT MAX(seq) AS m FROM session_events WHERE session_id = ?");
  }

  /** Appends an event; false when that seq was already stored (a re-send). */
  append(sessionId: string, seq: number, json: string): boolean {
    return Number(this.#insert.run(sessionId, seq, json).changes) > 0;
  }

  /** Appends a run of events in few statements; seqs already stored are skipped. */
  appendMany(sessionId: string, events: readonly StoredEvent[]): void {
    for (let i = 0, n = 0; i < events.length; i += n) {
      // As many rows as fit INSERT_ROWS and INSERT_BYTES (always at least one).
      let bytes = events[i]!.json.length;
      n = 1;
      while (n < INSERT_ROWS && i + n < events.length) {
        bytes += events[i + n]!.json.length;
        if (bytes > INSERT_BYTES) break;
        n++;
      }
      let st = this.#insertMany.get(n);
      if (!st) {
        st = this.db.prepare(
          "INSERT INTO session_events (session_id, seq, body) VALUES " +
            Array(n).fill("(?, ?, ?)").join(", ") + " ON CONFLICT DO NOTHING",
        );
        this.#insertMany.set(n, st);
      }
      const params: (string | number)[] = new Array(n * 3);
      for (let j = 0; j < n; j++) {
        const ev = events[i + j]!;
        params[j * 3] = sessionId;
        params[j * 3 + 1] = ev.seq;
        params[j * 3 + 2] = ev.json;
      }
      st.run(...params);
    }
  }

  /** Up to `limit` events with seq greater than `afterSeq`, oldest first. */
  after(sessionId: string, afterSeq: number, limit: number): StoredEvent[] {
    const rows = this.#range.all(sessionId, afterSeq, limit) as unknown as {
      seq: number;
      body: string;
    }[];
    return rows.map((r) => ({ seq: r.seq, json: r.body }));
  }

  maxSeq(sessionId: string): number {
    const r = this.#max.get(sessionId) as { m: number | null } | undefined;
    return r?.m ?? 0;
  }

  deleteSession(sessionId: string): void {
    this.db.prepare("DELETE FROM session_events WHERE session_id = ?").run(sessionId);
  }
}
