/**
 * The worker thread behind {@linkcode StoreThread}: its own SQLite
 * connection, committing batches of session events in the order they come
 * and checkpointing the WAL; it says when it has had nothing to do for a
 * while, after emptying the WAL, so that the relay can end it.
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

interface Message {
  open?: string;
  checkpointMs?: number;
  idleMs?: number;
  id?: number;
  batch?: ChunkedCommit[];
  close?: boolean;
  truncate?: boolean;
}

let db: DatabaseSync | null = null;
let repos: { events: EventsRepo; sessions: SessionsRepo } | null = null;
let timer: ReturnType<typeof setInterval> | undefined;
let idleMs = 30_000;
/** When a commit came or the WAL last changed. */
let activeAt = Date.now();
/** The WAL's frames and checkpointed frames at the last checkpoint. */
let lastWal = "";
let idleSaid = false;

function active(): void {
  activeAt = Date.now();
  idleSaid = false;
}

/** Checkpoints without blocking writers; once nothing changed for `idleMs`, empties the WAL and says so. */
function checkpoint(): void {
  if (!db) return;
  let row: { busy: number; log: number; checkpointed: number };
  try {
    row = db.prepare("PRAGMA wal_checkpoint(PASSIVE)").get() as typeof row;
  } catch {
    return active(); // Busy: next time.
  }
  const wal = `${row.log}/${row.checkpointed}`;
  if (wal !== lastWal) {
    lastWal = wal;
    return active();
  }
  if (idleSaid || Date.now() - activeAt < idleMs) return;
  try {
    // Back to an empty file: the relay starts this thread again once it grows.
    const t = db.prepare("PRAGMA wal_checkpoint(TRUNCATE)").get() as typeof row;
    if (t.busy) return;
  } catch {
    return;
  }
  idleSaid = true;
  scope.postMessage({ idle: true });
}

scope.onmessage = (e: MessageEvent<Message>) => {
  const m = e.data;
  if (m.open) {
    db = new DatabaseSync(m.open);
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec("PRAGMA synchronous = NORMAL");
    // This thread checkpoints on its timer, not inside commits.
    db.exec("PRAGMA wal_autocheckpoint = 0");
    db.exec(`PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT}`);
    repos = { events: new EventsRepo(db), sessions: new SessionsRepo(db) };
    idleMs = m.idleMs ?? idleMs;
    timer = setInterval(checkpoint, m.checkpointMs ?? 200);
  } else if (m.batch && m.id !== undefined) {
    active();
    try {
      transaction(db!, () => applyCommits(repos!, m.batch!));
      scope.postMessage({ id: m.id });
    } catch (err) {
      scope.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) });
    }
  } else if (m.truncate) {
    active();
    try {
      db?.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } catch {
      // Busy: the idle checkpoint empties it later.
    }
  } else if (m.close) {
    clearInterval(timer);
    try {
      db?.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } catch {
      // Busy: the next start checkpoints it.
    }
    db?.close();
    db = null;
    scope.postMessage({ closed: true });
  }
};
