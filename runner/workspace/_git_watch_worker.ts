/**
 * The thread that holds the git watchers' `Deno.watchFs` handles. Starting a
 * recursive watch walks the whole tree synchronously (measured: 580 ms for
 * 10,000 folders), which on the daemon's thread would stall every session's
 * events; here it only delays this thread.
 *
 * In: `{t:"watch", id, top}`, `{t:"unwatch", id}`. Out: `{t:"ready", id}`
 * once the watch is set, `{t:"change", id}` (at most one per 50 ms per
 * watch) and `{t:"error", id, message}`.
 *
 * @module
 */
/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
import { relevantChange } from "./_git_watch_paths.ts";

const watches = new Map<number, Deno.FsWatcher>();

async function follow(id: number, top: string, w: Deno.FsWatcher): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | null = null;
  try {
    for await (const ev of w) {
      if (timer !== null || !ev.paths.some((p) => relevantChange(top, p))) continue;
      timer = setTimeout(() => {
        timer = null;
        if (watches.get(id) === w) self.postMessage({ t: "change", id });
      }, 50);
    }
  } catch (err) {
    if (watches.get(id) === w) self.postMessage({ t: "error", id, message: String(err) });
  }
}

self.onmessage = (e: MessageEvent<{ t: string; id: number; top?: string }>) => {
  const m = e.data;
  if (m.t === "watch" && m.top) {
    let w: Deno.FsWatcher;
    try {
      w = Deno.watchFs(m.top, { recursive: true });
    } catch (err) {
      self.postMessage({ t: "error", id: m.id, message: String(err) });
      return;
    }
    watches.set(m.id, w);
    self.postMessage({ t: "ready", id: m.id });
    void follow(m.id, m.top, w);
  } else if (m.t === "unwatch") {
    const w = watches.get(m.id);
    watches.delete(m.id);
    try {
      w?.close();
    } catch {
      // Already closed.
    }
  }
};
