/**
 * The relay's store as `createRelay` opens it: the embedded SQLite file in
 * the data folder (the default), or a PostgreSQL database that several relay
 * nodes share (`--store postgres://…`, issue 22). Either way the relay gets
 * the same asynchronous repositories and an event committer; what only
 * SQLite has (a store thread for large commits and checkpoints, giving space
 * back after deletes, the database handle tests look into) comes with it.
 *
 * @module
 */
import { join } from "node:path";
import { type Limits, memoryLimits, storeLimits } from "./limits.ts";
import { type Database, openDatabase } from "./store/db.ts";
import { type CommitEvents, inlineCommit } from "./store/event_writer.ts";
import { adaptiveCommit } from "./store/event_writer.ts";
import { type AsyncStore, asyncStore, Store } from "./store/mod.ts";
import { StoreThread } from "./store/store_thread.ts";
import { reclaimSpace } from "./store/vacuum.ts";

/** What the relay holds of its open store. */
export interface RelayStore {
  store: AsyncStore;
  /** Writes a batch of session events, durably. */
  commit: CommitEvents;
  /** The SQLite database (null on PostgreSQL). */
  db: Database | null;
  /** Gives freed pages back to the file system (SQLite; PostgreSQL's autovacuum does it). */
  reclaimSpace?: (pages: number) => number;
  /** Empties SQLite's write-ahead log while the relay is quiet. */
  truncateWal?: () => void;
  /** The `pg` pool, for better-auth to run on the same database. */
  pgPool?: unknown;
  /**
   * Where the relay counts its rate limits: in memory on SQLite (one
   * process), in the database on PostgreSQL, which every node shares.
   */
  limits: Limits;
  /** Throws when the database cannot answer a trivial query (GET /ready). */
  answers(): Promise<void>;
  close(): Promise<void>;
}

/** Whether `target` names a PostgreSQL database (`postgres://`, `postgresql://`). */
export function isPostgresUrl(target: string): boolean {
  return /^postgres(ql)?:\/\//i.test(target);
}

/** Options of {@linkcode openRelayStore}. */
export interface RelayStoreOptions {
  /** The data folder: `relay.db` lives there on SQLite. */
  dataDir: string;
  /** A `postgres://` URL: the store is that database instead. */
  databaseUrl?: string;
  /** Repositories over the SQLite database other than the default (the bench's volatile log). */
  custom?: (db: Database) => Store;
  /** Most pooled connections to PostgreSQL. */
  poolSize?: number;
  log?: (line: string) => void;
}

/** Opens (creating and migrating as needed) the store the options name. */
export async function openRelayStore(o: RelayStoreOptions): Promise<RelayStore> {
  if (o.databaseUrl !== undefined) {
    if (!isPostgresUrl(o.databaseUrl)) {
      throw new Error("The store URL must start with postgres:// or postgresql://");
    }
    // Loaded only here: a relay on SQLite never loads the PostgreSQL client.
    const { openPgStore } = await import("./store/pg/mod.ts");
    const pg = await openPgStore(o.databaseUrl, {
      ...(o.poolSize ? { poolSize: o.poolSize } : {}),
      ...(o.log ? { log: o.log } : {}),
    });
    return {
      store: pg,
      commit: pg.commit,
      db: null,
      pgPool: pg.pool,
      limits: storeLimits(pg.rateLimits, o.log ? { log: o.log } : {}),
      answers: async () => {
        await pg.pool.query("SELECT 1");
      },
      close: () => pg.close(),
    };
  }
  const dbPath = join(o.dataDir, "relay.db");
  const db = openDatabase(dbPath, o.log);
  ownerOnly(dbPath);
  // Checkpoints, and the event log's commits while the relay is busy, run on
  // one thread of their own, started only while there is such work.
  const storeThread = new StoreThread(db, dbPath);
  const sqlite = o.custom?.(db) ?? new Store(db);
  return {
    // Everything above the store uses it asynchronously, as it would a store
    // across the network; the SQLite one answers each call at once.
    store: asyncStore(sqlite),
    // Written on this thread, or on the store thread while the relay uses
    // more than a core and for large commits; a custom store receives every
    // write on this thread.
    commit: o.custom ? inlineCommit(sqlite) : adaptiveCommit(sqlite, storeThread),
    db,
    reclaimSpace: (pages) => reclaimSpace(db, pages),
    truncateWal: () => storeThread.truncateWal(),
    limits: memoryLimits(),
    answers: () => {
      db.prepare("SELECT 1").get();
      return Promise.resolve();
    },
    close: async () => {
      await storeThread.close();
      db.close();
    },
  };
}

/**
 * Makes the database and its WAL files readable by their owner only: they
 * hold accounts, key hashes and every prompt, and a data folder that already
 * existed (so not made 0700 by us) may be open to others. SQLite gives the
 * WAL files the database's mode when it creates them.
 */
function ownerOnly(dbPath: string): void {
  for (const path of [dbPath, `${dbPath}-wal`, `${dbPath}-shm`]) {
    try {
      Deno.chmodSync(path, 0o600);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }
}
