/**
 * Giving deleted sessions' space back to the file system: incremental
 * auto-vacuum (turned on for new databases, converted once for older ones)
 * and the steps that return free pages.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";

/** Bytes the WAL file is cut back to after a checkpoint (`journal_size_limit`). */
export const WAL_SIZE_LIMIT = 64 * 1024 * 1024;

/**
 * Turns on incremental auto-vacuum in a database made before it was the
 * default, so that deleted sessions give their space back to the file
 * system without stopping the relay. That takes one VACUUM, which rewrites
 * the whole file (measured here: 123 MB in 2.9 s) and needs free disk of
 * twice its size while it runs (a temporary copy, then the WAL); it is done
 * once, at start, and logged.
 * When it fails (a full disk), the relay runs on: freed pages are reused by
 * new events, the file just does not shrink.
 */
export function convertToIncrementalVacuum(
  db: DatabaseSync,
  path: string,
  log?: (line: string) => void,
): void {
  const mode = db.prepare("PRAGMA auto_vacuum").get() as { auto_vacuum: number };
  if (mode.auto_vacuum === 2) return;
  let size = 0;
  try {
    size = Deno.statSync(path).size;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const mb = (size / 1024 / 1024).toFixed(0);
  log?.(`Converting the database to incremental vacuum (once, ${mb} MB)...`);
  const t0 = performance.now();
  try {
    db.exec("PRAGMA auto_vacuum = INCREMENTAL");
    db.exec("VACUUM");
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    log?.(`Database converted (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (err) {
    log?.(
      `Converting the database failed, deleted sessions' space is reused but not returned: ${
        err instanceof Error ? err.message : err
      }`,
    );
  }
}

/**
 * Gives up to `pages` free pages of the database back to the file system
 * (the file shrinks at the next checkpoint). Returns how many pages are
 * still free. Each page is one step of the statement; a call with a few
 * thousand pages takes a few milliseconds (see docs/operations.md).
 */
export function reclaimSpace(db: DatabaseSync, pages: number): number {
  // One row per page moved: iterate, do not collect.
  for (const _ of db.prepare(`PRAGMA incremental_vacuum(${Math.max(1, pages | 0)})`).iterate()) {
    // each step frees one page
  }
  return (db.prepare("PRAGMA freelist_count").get() as { freelist_count: number }).freelist_count;
}
