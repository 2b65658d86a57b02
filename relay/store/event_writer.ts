import type { SessionPatch } from "./sessions.ts";
import type { StoredEvent } from "./events.ts";
import type { Store } from "./mod.ts";

/** One session's share of a commit: new events, its new last seq, its state change. */
export interface EventCommit {
  sessionId: string;
  events: StoredEvent[];
  lastSeq: number;
  patch: SessionPatch | null;
  /** When the state changed (ISO), for `updated_at`. */
  at: string;
}

/** Writes a batch of commits in one transaction; resolves once it is durable. */
export type CommitEvents = (batch: EventCommit[]) => Promise<void>;

/** Commits on the calling thread, through the store's repositories. */
export function inlineCommit(store: Store): CommitEvents {
  return (batch) => {
    store.tx(() => applyCommits(store, batch));
    return Promise.resolve();
  };
}

/** What one commit does, on whichever connection it runs. */
export function applyCommits(
  repos: Pick<Store, "events" | "sessions">,
  batch: EventCommit[],
): void {
  for (const c of batch) {
    repos.events.appendMany(c.sessionId, c.events);
    repos.sessions.setLastSeq(c.sessionId, c.lastSeq);
    if (c.patch) repos.sessions.update(c.sessionId, c.patch, c.at);
  }
}

/**
 * The event log's writer in a worker thread with its own connection, so the
 * INSERTs of a busy stream do not run on the relay's event loop. Commits run
 * one at a time, in order.
 */
export class EventWriterThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  #next = 1;
  /** The last commit sent: close() waits for it (they complete in order). */
  #last: Promise<void> = Promise.resolve();
  #closed: Promise<void> | null = null;

  constructor(dbPath: string) {
    this.#worker = new Worker(new URL("./_event_writer_worker.ts", import.meta.url).href, {
      type: "module",
    });
    this.#worker.onmessage = (e: MessageEvent<{ id: number; error?: string }>) => {
      const p = this.#pending.get(e.data.id);
      if (!p) return;
      this.#pending.delete(e.data.id);
      if (e.data.error === undefined) p.resolve();
      else p.reject(new Error(e.data.error));
    };
    this.#worker.onerror = (e) => {
      e.preventDefault();
      for (const p of this.#pending.values()) {
        p.reject(new Error(`Event writer failed: ${e.message}`));
      }
      this.#pending.clear();
    };
    this.#worker.postMessage({ open: dbPath });
  }

  commit: CommitEvents = (batch) => {
    if (this.#closed) return Promise.reject(new Error("Event writer is closed"));
    const id = this.#next++;
    const done = new Promise<void>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, batch });
    });
    this.#last = done.catch(() => {});
    return done;
  };

  /** Waits for the commits in flight, then stops the thread. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      await this.#last;
      const done = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 5000);
        this.#worker.onmessage = (e) => {
          if (e.data?.closed) {
            clearTimeout(timer);
            resolve();
          }
        };
      });
      this.#worker.postMessage({ close: true });
      await done;
      this.#worker.terminate();
    })();
    return this.#closed;
  }
}
