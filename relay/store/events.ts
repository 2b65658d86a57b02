import type { Database } from "../db.ts";

/** One stored event: its seq and its wire form `{"seq":..,"ts":..,"e":..}`. */
export interface StoredEvent {
  seq: number;
  json: string;
}

/** SQL for the durable per-session event log. */
export class EventsRepo {
  readonly #insert;
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
