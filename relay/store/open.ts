/**
 * Opens the relay's store from what the operator named: a PostgreSQL URL
 * (`postgres://` or `postgresql://`) or a SQLite file path (the embedded
 * default). The PostgreSQL client is imported here only when a URL is
 * given: a relay on SQLite never loads it.
 *
 * @module
 */
import type { AsyncStore } from "./contract.ts";
import { openDatabase } from "./db.ts";
import { type CommitEvents, inlineCommit } from "./event_writer.ts";
import { asyncStore, Store } from "./mod.ts";

/** An open store: its repositories, its event committer, and how to close it. */
export interface OpenedStore {
  store: AsyncStore;
  /** Writes a batch of event commits in one transaction. */
  commit: CommitEvents;
  close(): Promise<void>;
}

/** Options of {@linkcode openStore}. */
export interface OpenStoreOptions {
  /** Most pooled connections to PostgreSQL (default 10). */
  poolSize?: number;
  /** Told when a migration of a database that had data starts and ends. */
  log?: (line: string) => void;
}

/** Whether `target` names a PostgreSQL database rather than a SQLite file. */
export function isPostgresUrl(target: string): boolean {
  return /^postgres(ql)?:\/\//i.test(target);
}

/** Opens (creating and migrating as needed) the store `target` names. */
export async function openStore(
  target: string,
  options: OpenStoreOptions = {},
): Promise<OpenedStore> {
  if (isPostgresUrl(target)) {
    const { openPgStore } = await import("./pg/mod.ts");
    const store = await openPgStore(target, options);
    return { store, commit: store.commit, close: () => store.close() };
  }
  const db = openDatabase(target, options.log);
  const store = new Store(db);
  return {
    store: asyncStore(store),
    commit: inlineCommit(store),
    close: () => Promise.resolve(db.close()),
  };
}
