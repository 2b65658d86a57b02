/**
 * The processes a worker starts for its session besides the agent's tools
 * (stdio MCP servers, hook commands), ended with the worker: SIGKILL to each
 * when it exits, and when the daemon's SIGTERM stops it.
 *
 * @module
 */

/** Options of {@linkcode ChildReaper}. */
export interface ChildReaperOptions {
  /**
   * The session's OS sandbox is active: its own SIGTERM handler ends the
   * worker after its cleanup. Without it, the signal is raised again once
   * the reaper's listener is gone, so the worker still ends by SIGTERM.
   */
  sandboxActive: boolean;
}

/** Kills what it was given when the worker goes. */
export class ChildReaper {
  readonly #o: ChildReaperOptions;
  /** pid → whether it leads its own process group (killed as a group). */
  readonly #pids = new Map<number, boolean>();
  #installed = false;

  constructor(o: ChildReaperOptions) {
    this.#o = o;
  }

  /** Ends `pid` (its process group with `group`) with the worker, unless removed before. */
  add(pid: number, o: { group?: boolean } = {}): void {
    this.#install();
    this.#pids.set(pid, o.group ?? false);
  }

  remove(pid: number): void {
    this.#pids.delete(pid);
  }

  /** SIGKILL to everything still registered, now. */
  killAll(): void {
    for (const [pid, group] of this.#pids) {
      try {
        Deno.kill(group && Deno.build.os !== "windows" ? -pid : pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
    this.#pids.clear();
  }

  #install(): void {
    if (this.#installed) return;
    this.#installed = true;
    globalThis.addEventListener("unload", () => this.killAll());
    if (Deno.build.os === "windows") return;
    const onTerm = () => {
      this.killAll();
      Deno.removeSignalListener("SIGTERM", onTerm);
      if (!this.#o.sandboxActive) Deno.kill(Deno.pid, "SIGTERM");
    };
    Deno.addSignalListener("SIGTERM", onTerm);
  }
}
