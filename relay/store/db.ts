/**
 * The relay's SQLite database: opened with WAL and its pragmas, brought up
 * to date by the migrations (migrations.ts), and transactions.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { MIGRATIONS } from "./migrations.ts";
import { convertToIncrementalVacuum, WAL_SIZE_LIMIT } from "./vacuum.ts";

/** The relay's SQLite handle with WAL on and migrations applied. */
export type Database = DatabaseSync;

/**
 * Opens (creating if needed) the database at `path` and brings our schema up
 * to date. Migrations of a database that already had data are logged as they
 * start and finish: one may copy every stored event and take minutes.
 */
export function openDatabase(path: string, log?: (line: string) => void): Database {
  const db = new DatabaseSync(path);
  // Must come before the first table: a new database frees space as it goes
  // (see reclaimSpace); an older one is converted once below.
  db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  db.exec("PRAGMA journal_mode = WAL");
  // After a checkpoint the WAL is cut back to this: a reclaim or a VACUUM
  // writes as much WAL as it moves, which would otherwise stay on disk.
  db.exec(`PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT}`);
  // NORMAL in WAL mode survives a killed process; only an OS crash can lose
  // the last commits, and the runner re-sends unacknowledged events anyway.
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA busy_timeout = 5000");
  db.exec("PRAGMA foreign_keys = ON");
  migrate(db, { log });
  convertToIncrementalVacuum(db, path, log);
  return db;
}

/**
 * Applies the migrations (migrations.ts) a database lacks, in order, through version
 * `through` (all of them by default: an older schema is what a release that
 * stopped there left behind).
 */
export function migrate(
  db: DatabaseSync,
  { log, through = Infinity }: { log?: (line: string) => void; through?: number } = {},
): void {
  db.exec(`CREATE TABLE IF NOT EXISTS baton_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
  )`);
  const row = db.prepare("SELECT MAX(version) AS v FROM baton_migrations").get() as
    | { v: number | null }
    | undefined;
  const current = row?.v ?? 0;
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    if (m.version > through) break;
    // A new database gets its schema at once; an existing one is told why it waits.
    const t0 = performance.now();
    if (current > 0) log?.(`Updating the database to version ${m.version} (${m.name})...`);
    transaction(db, () => {
      db.exec(m.sql);
      db.prepare("INSERT INTO baton_migrations (version, name, applied_at) VALUES (?, ?, ?)")
        .run(m.version, m.name, new Date().toISOString());
    });
    if (current > 0) {
      log?.(`Database at version ${m.version} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    }
  }
}

/** Runs `fn` inside BEGIN/COMMIT, rolling back when it throws. */
export function transaction<T>(db: Database, fn: () => T): T {
  db.exec("BEGIN IMMEDIATE");
  try {
    const result = fn();
    db.exec("COMMIT");
    return result;
  } catch (err) {
    // After some errors (a full disk: SQLITE_FULL, an I/O error) SQLite has
    // rolled back already, and ROLLBACK's own "no transaction is active"
    // would hide why the write failed.
    if (db.isTransaction) db.exec("ROLLBACK");
    throw err;
  }
}
