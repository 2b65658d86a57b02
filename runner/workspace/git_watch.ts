/**
 * Watches the repository of each open session and reports a fresh status
 * when it changes, so a viewer's Changes list is live. The watch handles
 * live on a thread of their own (`_git_watch_worker.ts`): starting one walks
 * the whole tree.
 *
 * @module
 */
import { moduleWorker } from "../../shared/single_file.ts";
import type { GitStatus } from "../../shared/git_api.ts";

/** Options of {@linkcode GitWatchers}. */
export interface GitWatchersOptions {
  /** Repositories watched at once; the one watched longest ago gives way. */
  max: number;
  status: (top: string) => Promise<GitStatus>;
  onStatus: (sessionId: string, status: GitStatus) => void;
  log: (line: string) => void;
  /** Quiet time after the last change before the status is read (default 300 ms). */
  debounceMs?: number;
}

interface Watch {
  /** This watch's id on the thread (a session watched again gets a new one). */
  id: number;
  sessionId: string;
  top: string;
  timer: ReturnType<typeof setTimeout> | null;
  running: boolean;
  again: boolean;
  /** The last status sent, as JSON: an unchanged one is not sent again. */
  last: string;
  /** Settles once the thread has set the watch (or failed to). */
  ready: Promise<void>;
  setReady: () => void;
}

type FromThread =
  | { t: "ready"; id: number }
  | { t: "change"; id: number }
  | { t: "error"; id: number; message: string };

/** The watched repositories by session, debounced, on one watcher thread. */
export class GitWatchers {
  readonly #opts: GitWatchersOptions;
  readonly #watches = new Map<string, Watch>();
  readonly #byId = new Map<number, Watch>();
  #thread: Worker | null = null;
  #nextId = 1;

  constructor(options: GitWatchersOptions) {
    this.#opts = options;
  }

  get size(): number {
    return this.#watches.size;
  }

  has(sessionId: string): boolean {
    return this.#watches.has(sessionId);
  }

  /**
   * Starts watching `top` for the session (a no-op when it already is);
   * settles once changes from now on will be seen.
   */
  watch(sessionId: string, top: string): Promise<void> {
    const old = this.#watches.get(sessionId);
    if (old && old.top === top) {
      // Most recently used last: the eviction below takes the oldest.
      this.#watches.delete(sessionId);
      this.#watches.set(sessionId, old);
      return old.ready;
    }
    if (old) this.unwatch(sessionId);
    while (this.#watches.size >= this.#opts.max) {
      const oldest = this.#watches.keys().next().value;
      if (oldest === undefined) break;
      this.unwatch(oldest);
    }
    let setReady = () => {};
    const ready = new Promise<void>((resolve) => setReady = resolve);
    const w: Watch = {
      id: this.#nextId++,
      sessionId,
      top,
      timer: null,
      running: false,
      again: false,
      last: "",
      ready,
      setReady,
    };
    this.#watches.set(sessionId, w);
    this.#byId.set(w.id, w);
    this.#start().postMessage({ t: "watch", id: w.id, top });
    return ready;
  }

  #start(): Worker {
    if (this.#thread) return this.#thread;
    const thread = moduleWorker("git-watch", new URL("./_git_watch_worker.ts", import.meta.url));
    thread.onmessage = (e: MessageEvent<FromThread>) => {
      const w = this.#byId.get(e.data.id);
      if (!w) return;
      if (e.data.t === "ready") return w.setReady();
      if (e.data.t === "error") {
        w.setReady();
        this.#opts.log(`git watch ${w.top}: ${e.data.message}`);
        return;
      }
      if (w.timer !== null) clearTimeout(w.timer);
      w.timer = setTimeout(() => {
        w.timer = null;
        this.#refresh(w);
      }, this.#opts.debounceMs ?? 300);
    };
    thread.onerror = (e) => {
      e.preventDefault();
      this.#opts.log(`git watch thread failed: ${e.message}`);
      this.#thread = null;
      for (const w of this.#byId.values()) w.setReady();
    };
    this.#thread = thread;
    return thread;
  }

  /** Reads the status (one at a time per repository) and sends it when it changed. */
  async #refresh(w: Watch): Promise<void> {
    if (w.running) {
      w.again = true;
      return;
    }
    w.running = true;
    try {
      do {
        w.again = false;
        const st = await this.#opts.status(w.top);
        if (this.#byId.get(w.id) !== w) return;
        const json = JSON.stringify(st);
        if (json !== w.last) {
          w.last = json;
          this.#opts.onStatus(w.sessionId, st);
        }
      } while (w.again);
    } catch (err) {
      this.#opts.log(`git status ${w.top}: ${err}`);
    } finally {
      w.running = false;
    }
  }

  unwatch(sessionId: string): void {
    const w = this.#watches.get(sessionId);
    if (!w) return;
    this.#watches.delete(sessionId);
    this.#byId.delete(w.id);
    w.setReady();
    if (w.timer !== null) clearTimeout(w.timer);
    this.#thread?.postMessage({ t: "unwatch", id: w.id });
  }

  /** Stops every watch and the thread. */
  close(): void {
    for (const id of [...this.#watches.keys()]) this.unwatch(id);
    this.#thread?.terminate();
    this.#thread = null;
  }
}
