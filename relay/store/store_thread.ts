/**
 * The relay's one background thread for store work: it writes the event log
 * when {@linkcode adaptiveCommit} sends it commits, and checkpoints the WAL.
 * It runs only while there is such work: an idle relay has none (a thread
 * costs ~16 MB of its memory; the relay used to keep two, ~27 MB).
 *
 * @module
 */
import { moduleWorker } from "../../shared/single_file.ts";
import type { Database } from "./db.ts";
import { type ChunkedCommit, type CommitEvents } from "./event_writer.ts";
import { chunkEvents } from "./events.ts";

/** Options of {@linkcode StoreThread}. */
export interface StoreThreadOptions {
  /** How often the running thread checkpoints (ms). Default 200. */
  checkpointMs?: number;
  /**
   * WAL size that starts the thread to checkpoint it (bytes). Default 4 MiB,
   * SQLite's own default (1,000 pages); below it the WAL is checkpointed on
   * the relay's thread once nothing wrote to it for a look.
   */
  walBytes?: number;
  /** How often this thread looks at the WAL's size (ms). Default 1,000. */
  watchMs?: number;
  /** The thread ends after this long with no commit and no new WAL frames (ms). Default 30,000. */
  idleMs?: number;
}

type Reply = { id?: number; error?: string; idle?: true; closed?: true };

/**
 * Commits batches of session events on a worker thread with its own
 * connection, one at a time and in order, and keeps the WAL checkpointed,
 * without blocking the relay's event loop on either.
 *
 * The thread starts on the first commit sent to it, or once the WAL has
 * grown past `walBytes` (the relay's connection never checkpoints inside a
 * commit: each checkpoint copies pages and fsyncs, which blocked the event
 * loop). A WAL under `walBytes` that nothing wrote to for a look
 * (`watchMs`) is checkpointed on this thread instead, while the relay is
 * quiet. The thread ends when it has had nothing to do for `idleMs`, after a
 * checkpoint that empties the WAL. Durability does not depend on it: a commit is in the WAL
 * when it resolves, and a checkpoint only moves pages into the database.
 */
export class StoreThread {
  readonly #path: string;
  readonly #db: Database;
  readonly #options: Required<StoreThreadOptions>;
  readonly #pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  readonly #watch: ReturnType<typeof setInterval>;
  #worker: Worker | null = null;
  #next = 1;
  /** The last commit sent: close() waits for it (they complete in order). */
  #last: Promise<void> = Promise.resolve();
  #closed: Promise<void> | null = null;
  /** The WAL's size and time at the last look. */
  #lastWal = "";
  /** Threads told to close, and what ends each once it says it has. */
  readonly #retiring = new Map<Worker, () => void>();

  constructor(db: Database, path: string, options: StoreThreadOptions = {}) {
    this.#db = db;
    this.#path = path;
    this.#options = {
      checkpointMs: options.checkpointMs ?? 200,
      walBytes: options.walBytes ?? 4 * 1024 * 1024,
      watchMs: options.watchMs ?? 1000,
      idleMs: options.idleMs ?? 30_000,
    };
    db.exec("PRAGMA wal_autocheckpoint = 0");
    this.#watch = setInterval(() => this.#watchWal(), this.#options.watchMs);
  }

  /** Whether the thread is running now. */
  get running(): boolean {
    return this.#worker !== null;
  }

  commit: CommitEvents = (batch) => {
    if (this.#closed) return Promise.reject(new Error("Event writer is closed"));
    let chunked: ChunkedCommit[];
    try {
      // The thread gets each session's events as the few strings it stores,
      // not an object per event: with ~1,500 events a commit, its part fell
      // from ~1.7 to ~1.1 ms and the round trip from ~4.4 to ~3 ms.
      chunked = batch.map(({ events, ...rest }) => ({ ...rest, chunks: chunkEvents(events) }));
    } catch (err) {
      return Promise.reject(err);
    }
    const worker = this.#worker ?? this.#start();
    const id = this.#next++;
    const done = new Promise<void>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      worker.postMessage({ id, batch: chunked });
    });
    this.#last = done.catch(() => {});
    return done;
  };

  /**
   * Empties the WAL now, on the thread (started for it if need be): after a
   * reclaim it holds every page that moved, which would otherwise wait for
   * the thread's next idle checkpoint.
   */
  truncateWal(): void {
    if (this.#closed) return;
    (this.#worker ?? this.#start()).postMessage({ truncate: true });
  }

  /** Waits for the commits in flight, checkpoints a last time and stops the thread. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      clearInterval(this.#watch);
      await this.#last;
      const worker = this.#worker;
      if (worker) return await this.#retire(worker);
      try {
        this.#db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
      } catch {
        // Busy: the next start checkpoints it.
      }
    })();
    return this.#closed;
  }

  #watchWal(): void {
    if (this.#worker) return;
    let wal: Deno.FileInfo;
    try {
      wal = Deno.statSync(`${this.#path}-wal`);
    } catch {
      // No WAL yet (NotFound), or it cannot be read now: a timer must not
      // throw (it would end the process); the next look tries again.
      return;
    }
    if (wal.size >= this.#options.walBytes) return void this.#start();
    const seen = `${wal.size}/${wal.mtime?.getTime()}`;
    const quiet = seen === this.#lastWal;
    this.#lastWal = seen;
    if (wal.size === 0 || !quiet) return;
    // A small WAL that nothing wrote to since the last look: checkpointed
    // here, where it costs a few milliseconds while the relay is quiet,
    // rather than by a thread that would keep most of its ~16 MB after it
    // ended (measured: 45 → 61 MB running → 57 MB ended).
    try {
      this.#db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } catch {
      // Busy: next time.
    }
  }

  #start(): Worker {
    const worker = moduleWorker(
      "store-thread",
      new URL("./_store_thread_worker.ts", import.meta.url),
    );
    worker.onmessage = (e: MessageEvent<Reply>) => {
      const m = e.data;
      if (m.closed) return this.#retiring.get(worker)?.();
      // Idle: ended unless a commit is on its way to it (it says so again later).
      if (m.idle) {
        if (this.#pending.size === 0 && !this.#closed) void this.#retire(worker);
        return;
      }
      const p = m.id === undefined ? undefined : this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id!);
      if (m.error === undefined) p.resolve();
      else p.reject(new Error(m.error));
    };
    worker.onerror = (e) => {
      e.preventDefault();
      for (const p of this.#pending.values()) {
        p.reject(new Error(`Event writer failed: ${e.message}`));
      }
      this.#pending.clear();
      if (this.#worker === worker) this.#worker = null;
      worker.terminate();
    };
    const { checkpointMs, idleMs } = this.#options;
    worker.postMessage({ open: this.#path, checkpointMs, idleMs });
    this.#worker = worker;
    return worker;
  }

  /**
   * Ends a thread: new commits go to a new one from now on; this one closes
   * its connection (a terminated thread would leave it open) and is then
   * terminated, or after 5 s if it does not answer.
   */
  #retire(worker: Worker): Promise<void> {
    if (this.#worker === worker) this.#worker = null;
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#retiring.delete(worker);
        worker.terminate();
        resolve();
      };
      const timer = setTimeout(done, 5000);
      this.#retiring.set(worker, done);
      worker.postMessage({ close: true });
    });
  }
}
