/**
 * The worker thread behind {@linkcode EventWriterThread}: its own SQLite
 * connection, committing batches of session events in the order they come.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { transaction } from "./db.ts";
import { WAL_SIZE_LIMIT } from "./vacuum.ts";
import { applyCommits, type ChunkedCommit } from "./event_writer.ts";
import { EventsRepo } from "./events.ts";
import { SessionsRepo } from "./sessions.ts";

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
};

let db: DatabaseSync | null = null;
let repos: { events: EventsRepo; sessions: SessionsRepo } | null = null;

scope.onmessage = (e: MessageEvent) => {
  const m = e.data as { open?: string; id?: number; batch?: ChunkedCommit[]; close?: boolean };
  if (m.open) {
    db = new DatabaseSync(m.open);
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec("PRAGMA synchronous = NORMAL");
    // The checkpointer thread does the checkpoints.
    db.exec("PRAGMA wal_autocheckpoint = 0");
    db.exec(`PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT}`);
    repos = { events: new EventsRepo(db), sessions: new SessionsRepo(db) };
  } else if (m.batch && m.id !== undefined) {
    try {
      transaction(db!, () => applyCommits(repos!, m.batch!));
      scope.postMessage({ id: m.id });
    } catch (err) {
      scope.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) });
    }
  } else if (m.close) {
    db?.close();
    scope.postMessage({ closed: true });
  }
};
