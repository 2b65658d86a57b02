import type { Database } from "./db.ts";

/**
 * The store's trivial query for the readiness check: throws when the
 * database cannot answer (closed, unreadable). It reads no table: whether
 * writes go through is what the event log's commits tell (meter.ts).
 */
export function sqliteAnswers(db: Database): void {
  db.prepare("SELECT 1").get();
}
