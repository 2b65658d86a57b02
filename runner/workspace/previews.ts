/**
 * Live previews: every few seconds, while at least one session is awake,
 * the runner looks which TCP ports each awake session's processes listen on
 * (ports.ts) and, when a session's set changes, emits a `preview_ports`
 * session event (shared/previews_api.ts). The relay stores and forwards it
 * like any event, so a viewer that opens the session later sees the last
 * set; the session view offers each port through the HTTP tunnel.
 *
 * One scan of the process table serves all sessions. Measured on a shared,
 * busy 2-core Linux box with 80 processes: about 40 ms per scan (reading
 * each process's stat and environment), so the 2 s period costs ~2% of a
 * core while a session is awake, and nothing while every session sleeps.
 *
 * @module
 */
import {
  MAX_PREVIEW_PORTS,
  PREVIEW_PORTS_EVENT,
  type PreviewPort,
  type PreviewPortsEvent,
} from "../../shared/previews_api.ts";
import { currentPorts, type PortPlatform } from "./ports.ts";

/** How often the ports of awake sessions are looked at. */
export const PREVIEW_POLL_MS = 2000;

/** What the watcher needs of the daemon. */
export interface PreviewWatcherOptions {
  /** Awake sessions and their worker's pid. */
  workers: () => Iterable<{ sessionId: string; pid: number }>;
  /** Emits a session event (dropped for a session that ended). */
  emit: (sessionId: string, e: PreviewPortsEvent) => void;
  platform?: PortPlatform;
  intervalMs?: number;
  log?: (line: string) => void;
}

/** Watches awake sessions' listening ports and announces changes. */
export class PreviewWatcher {
  readonly #opts: PreviewWatcherOptions;
  readonly #platform: PortPlatform;
  /** The last announced set per session, as a key (`"3000,5173"`). */
  readonly #last = new Map<string, string>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #running: Promise<void> | null = null;
  #closed = false;

  constructor(options: PreviewWatcherOptions) {
    this.#opts = options;
    this.#platform = options.platform ?? currentPorts();
  }

  /** Starts polling (idempotent). */
  start(): void {
    if (this.#closed || this.#timer !== null) return;
    this.#timer = setTimeout(() => this.#loop(), this.#opts.intervalMs ?? PREVIEW_POLL_MS);
  }

  async #loop(): Promise<void> {
    this.#timer = null;
    await this.check().catch((e) => this.#opts.log?.(`preview ports: ${e}`));
    this.start();
  }

  /** One look now; resolves when any change is emitted. */
  check(): Promise<void> {
    this.#running ??= this.#check().finally(() => this.#running = null);
    return this.#running;
  }

  async #check(): Promise<void> {
    const roots = new Map<string, number>();
    for (const w of this.#opts.workers()) roots.set(w.sessionId, w.pid);
    if (roots.size === 0) return;
    const found = await this.#platform.listeners(roots);
    for (const sessionId of roots.keys()) {
      const ports: PreviewPort[] = (found.get(sessionId) ?? [])
        .map((l) => ({ port: l.port, ...(l.process ? { process: l.process } : {}) }))
        .sort((a, b) => a.port - b.port)
        .filter((p, i, all) => i === 0 || all[i - 1]!.port !== p.port)
        .slice(0, MAX_PREVIEW_PORTS);
      const key = ports.map((p) => p.port).join(",");
      if ((this.#last.get(sessionId) ?? "") === key) continue;
      this.#last.set(sessionId, key);
      this.#opts.emit(sessionId, { type: PREVIEW_PORTS_EVENT, ports });
    }
  }

  /**
   * A session ended or fell asleep: it is not looked at any more. Its last
   * set stays announced until it wakes (a server it started may outlive
   * its worker; the tunnel answers 502 for a port that closed).
   */
  forget(sessionId: string, asleep = false): void {
    if (!asleep) this.#last.delete(sessionId);
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
