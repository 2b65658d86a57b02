/**
 * Watches the repository of each open session and reports a fresh status
 * when it changes, so a viewer's Changes list is live.
 *
 * @module
 */
import { relative, sep } from "node:path";
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
  top: string;
  watcher: Deno.FsWatcher;
  timer: ReturnType<typeof setTimeout> | null;
  running: boolean;
  again: boolean;
  /** The last status sent, as JSON: an unchanged one is not sent again. */
  last: string;
}

/**
 * Paths inside `.git` that change what status says (the index, HEAD, refs,
 * a merge or rebase starting); `.git/objects` churns on every write and
 * tells nothing a change of the index or a ref would not.
 */
function relevant(top: string, path: string): boolean {
  const rel = relative(top, path).split(sep).join("/");
  if (rel.startsWith("..")) return true;
  if (rel !== ".git" && !rel.startsWith(".git/")) return true;
  if (rel.endsWith(".lock")) return false;
  return rel === ".git/index" || rel === ".git/HEAD" || rel.startsWith(".git/refs/") ||
    rel === ".git/packed-refs" || rel === ".git/MERGE_HEAD";
}

/** One `Deno.watchFs` per watched session's repository, debounced. */
export class GitWatchers {
  readonly #opts: GitWatchersOptions;
  readonly #watches = new Map<string, Watch>();

  constructor(options: GitWatchersOptions) {
    this.#opts = options;
  }

  get size(): number {
    return this.#watches.size;
  }

  /** Starts watching `top` for the session (a no-op when it already is). */
  watch(sessionId: string, top: string): void {
    const old = this.#watches.get(sessionId);
    if (old && old.top === top) {
      // Most recently used last: the eviction below takes the oldest.
      this.#watches.delete(sessionId);
      this.#watches.set(sessionId, old);
      return;
    }
    if (old) this.unwatch(sessionId);
    while (this.#watches.size >= this.#opts.max) {
      const oldest = this.#watches.keys().next().value;
      if (oldest === undefined) break;
      this.unwatch(oldest);
    }
    let watcher: Deno.FsWatcher;
    try {
      watcher = Deno.watchFs(top, { recursive: true });
    } catch (err) {
      this.#opts.log(`git watch ${top}: ${err}`);
      return;
    }
    const w: Watch = { top, watcher, timer: null, running: false, again: false, last: "" };
    this.#watches.set(sessionId, w);
    this.#loop(sessionId, w);
  }

  async #loop(sessionId: string, w: Watch): Promise<void> {
    try {
      for await (const ev of w.watcher) {
        if (!ev.paths.some((p) => relevant(w.top, p))) continue;
        if (w.timer !== null) clearTimeout(w.timer);
        w.timer = setTimeout(() => {
          w.timer = null;
          this.#refresh(sessionId, w);
        }, this.#opts.debounceMs ?? 300);
      }
    } catch (err) {
      if (this.#watches.get(sessionId) === w) this.#opts.log(`git watch ${w.top}: ${err}`);
    }
  }

  /** Reads the status (one at a time per repository) and sends it when it changed. */
  async #refresh(sessionId: string, w: Watch): Promise<void> {
    if (w.running) {
      w.again = true;
      return;
    }
    w.running = true;
    try {
      do {
        w.again = false;
        const st = await this.#opts.status(w.top);
        if (this.#watches.get(sessionId) !== w) return;
        const json = JSON.stringify(st);
        if (json !== w.last) {
          w.last = json;
          this.#opts.onStatus(sessionId, st);
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
    if (w.timer !== null) clearTimeout(w.timer);
    try {
      w.watcher.close();
    } catch {
      // Already closed.
    }
  }

  close(): void {
    for (const id of [...this.#watches.keys()]) this.unwatch(id);
  }
}
