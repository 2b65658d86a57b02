import { DatabaseSync } from "node:sqlite";

/** One schema step; applied once, in order, inside a transaction. */
interface Migration {
  version: number;
  name: string;
  sql: string;
}

// Append only: a released migration is never edited. SQL stays portable
// (no INSERT OR IGNORE, no AUTOINCREMENT) so a PostgreSQL store can reuse the
// repository queries; only these DDL statements are SQLite flavoured.
const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: "keys, runners, sessions, events, settings",
    sql: `
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        expires_at TEXT,
        last_used_at TEXT
      );
      CREATE INDEX api_keys_user ON api_keys (user_id);

      CREATE TABLE runners (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        platform TEXT NOT NULL DEFAULT '',
        version TEXT NOT NULL DEFAULT '',
        roots TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        last_seen_at TEXT
      );
      CREATE INDEX runners_user ON runners (user_id);

      CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        runner_id TEXT NOT NULL,
        status TEXT NOT NULL,
        activity TEXT NOT NULL DEFAULT 'idle',
        cwd TEXT NOT NULL DEFAULT '',
        model TEXT,
        prompt TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        ended_at TEXT,
        end_reason TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        pinned INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX sessions_user ON sessions (user_id, created_at);
      CREATE INDEX sessions_runner ON sessions (runner_id, status);

      CREATE TABLE session_events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      ) WITHOUT ROWID;

      CREATE TABLE user_settings (
        user_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (user_id, key)
      );
    `,
  },
];

/** The relay's SQLite handle with WAL on and migrations applied. */
export type Database = DatabaseSync;

/** Opens (creating if needed) the database at `path` and brings our schema up to date. */
export function openDatabase(path: string): Database {
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  // NORMAL in WAL mode survives a killed process; only an OS crash can lose
  // the last commits, and the runner re-sends unacknowledged events anyway.
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA busy_timeout = 5000");
  db.exec("PRAGMA foreign_keys = ON");
  migrate(db);
  return db;
}

function migrate(db: Database): void {
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
    transaction(db, () => {
      db.exec(m.sql);
      db.prepare("INSERT INTO baton_migrations (version, name, applied_at) VALUES (?, ?, ?)")
        .run(m.version, m.name, new Date().toISOString());
    });
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
    db.exec("ROLLBACK");
    throw err;
  }
}
