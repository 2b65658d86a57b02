/**
 * The runner's machine as the relay may reach it beyond its sessions: files,
 * git (`service_message`), skills and agent definitions, plugins, usage. The
 * daemon owns one and routes those requests here; each concern is a module
 * of its own beside this one.
 *
 * @module
 */
import type { RunnerConfig } from "../config.ts";
import type { ReplyStream } from "../control_link.ts";
import { WorkspaceFiles } from "./files.ts";
import { PluginCatalog } from "./plugins.ts";
import { WorkspaceServices } from "./services.ts";
import { DocCatalog } from "./skills.ts";
import { PreviewWatcher } from "./previews.ts";
import type { PreviewPortsEvent } from "../../shared/previews_api.ts";
import { TerminalManager } from "./terminal.ts";
import { answerUsage, runnerUsageIndex, type UsageIndex } from "./usage.ts";

/** What the workspace needs of the daemon. */
export interface WorkspaceOptions {
  config: RunnerConfig;
  /** Resolved workspace roots, or null to accept any folder. */
  roots: string[] | null;
  /** Where the daemon links its sessions to pi's conversation files. */
  conversationsDir: string;
  /** The folder of a session the daemon holds and has not ended; null otherwise. */
  cwdOf: (sessionId: string) => string | null;
  /** Whether the session's worker runs (not asleep). */
  awake: (sessionId: string) => boolean;
  /** Sends a frame to the relay (false when offline: dropped). */
  send: (msg: unknown) => boolean;
  /** Awake sessions and their worker's pid (live previews watch their ports). */
  workers: () => Iterable<{ sessionId: string; pid: number }>;
  /** Emits an event into a session (live previews' `preview_ports`). */
  emit: (sessionId: string, e: PreviewPortsEvent) => void;
  log: (line: string) => void;
}

/** The control requests the workspace answers. */
const OPS = new Set([
  "files",
  "search_files",
  "read_file",
  "docs",
  "plugins",
  "usage",
  "service_message",
]);

/** Files, git, skills, plugins and usage of the runner's machine. */
export class Workspace {
  readonly #files: WorkspaceFiles;
  readonly #docs: DocCatalog;
  readonly #plugins: PluginCatalog;
  readonly #usage: UsageIndex;
  readonly #services: WorkspaceServices;
  /** Web terminals (their streams arrive over the tunnel). */
  readonly terminals: TerminalManager;
  /** Ports the sessions' processes listen on (live previews). */
  readonly previews: PreviewWatcher;

  constructor(o: WorkspaceOptions) {
    const { batonDir, home, skip } = o.config;
    this.#files = new WorkspaceFiles({ roots: o.roots, home });
    this.#docs = new DocCatalog({ batonDir, home, roots: o.roots });
    this.#plugins = new PluginCatalog({ batonDir, home, roots: o.roots, skipped: skip.plugins });
    this.#usage = runnerUsageIndex(batonDir, o.conversationsDir);
    this.terminals = new TerminalManager({ roots: o.roots, home, log: o.log });
    this.previews = new PreviewWatcher({ workers: o.workers, emit: o.emit, log: o.log });
    this.#services = new WorkspaceServices({
      cwdOf: o.cwdOf,
      awake: o.awake,
      roots: o.roots,
      send: o.send,
      log: o.log,
    });
  }

  /** Whether `op` is a request for the workspace. */
  handles(op: string): boolean {
    return OPS.has(op) || TerminalManager.OPS.has(op);
  }

  /** Answers a workspace request; `reply` carries an answer sent in pieces (`read_file`). */
  request(op: string, data: unknown, reply: ReplyStream): Promise<unknown> {
    if (TerminalManager.OPS.has(op)) return this.terminals.request(op, data);
    switch (op) {
      case "docs":
        return this.#docs.request(data);
      case "plugins":
        return this.#plugins.request(data);
      case "usage":
        return answerUsage(this.#usage, data);
      case "service_message":
        return this.#services.handle(data);
      default:
        return this.#files.handle(op as "files" | "search_files" | "read_file", data, reply);
    }
  }

  /** A session ended, fell asleep or was deleted: its repository is no longer watched. */
  sessionStopped(sessionId: string, asleep = false): void {
    this.#services.forget(sessionId, asleep);
    this.previews.forget(sessionId, asleep);
  }

  /** A session woke: its repository is watched again if it was. */
  sessionWaking(sessionId: string): void {
    this.#services.resume(sessionId);
  }

  close(): void {
    this.#services.close();
    this.previews.close();
    // The runner stops: its terminals end (SIGHUP now, SIGKILL after 2 s).
    this.terminals.closeAll().catch(() => {});
  }
}
