/**
 * The sandbox of one session, in its worker: the resolved policy, the OS
 * sandbox (`@anthropic-ai/sandbox-runtime`: bubblewrap and socat on Linux,
 * Seatbelt on macOS) around every `bash` command, and a gate in front of
 * every other tool that checks each path it names against the same policy
 * before the tool runs. Violations go out as `sandbox:violation` events.
 *
 * @module
 */
import { existsSync } from "node:fs";
import process from "node:process";
import { SandboxManager } from "@anthropic-ai/sandbox-runtime";
import type {
  BashOperations,
  ExtensionFactory,
  ToolDefinition,
} from "@mariozechner/pi-coding-agent";
import { hostPlatform } from "../platform/platform.ts";
import { type AgentShell, agentShell } from "../platform/shell.ts";
import { shellOperations, shellToolDefinition } from "./shell_tool.ts";
import { checkedFileTools } from "./checked_files.ts";
import { withoutHidden } from "./tool_env.ts";
import type { SandboxMode, SandboxViolation } from "../../shared/sandbox_api.ts";
import { realPathOf } from "../roots.ts";
import { absoluteEntry, checkAccess, type ResolvedSandbox, searchRefused } from "./policy.ts";
import { SANDBOX_ENV } from "./folder_policy.ts";

/** The notice a session shows when the sandbox cannot start and tools run anyway (spec). */
export const INIT_FAILED = "Sandbox init failed, continuing unsandboxed";

/** A clean dependency check made before the session (by a spare worker), or null. */
let checkedClean = false;

/**
 * Runs the sandbox runtime's dependency checks ahead of a session (a spare
 * worker, while it waits): the runtime keeps bubblewrap's version and
 * user-namespace probes and the seccomp helper's path for the process, and
 * a clean result spares the session its own check (the runtime's
 * `initialize` checks again anyway). A failed one is not kept: the session
 * checks afresh, since the programs may have been installed meanwhile.
 */
export function primeSandboxChecks(): void {
  if (Deno.build.os === "windows" || Deno.env.get(SANDBOX_ENV.off) === "1") return;
  try {
    checkedClean = SandboxManager.checkDependencies().errors.length === 0;
  } catch {
    checkedClean = false;
  }
}

/** What a session's sandbox turned out to be. */
export interface SandboxState {
  mode: SandboxMode;
  /** Enforcement runs. */
  active: boolean;
  /** A notice for the session (init failed, inactive platform). */
  notice?: string;
  /** Tools are refused (init failed with `failClosed`). */
  refuse?: string;
}

/** One session's sandbox: start it, then hand its tools to pi. */
export class SessionSandbox {
  readonly #policy: ResolvedSandbox;
  readonly #cwd: string;
  readonly #home: string;
  readonly #report: (v: SandboxViolation) => void;
  readonly #hidden: ReadonlySet<string>;
  #paths: ResolvedSandbox["paths"];
  #state: SandboxState;

  constructor(
    policy: ResolvedSandbox,
    o: {
      cwd: string;
      home: string;
      /** Variables kept from `bash` while the sandbox is active (tool_env.ts). */
      hidden?: ReadonlySet<string>;
      report: (v: SandboxViolation) => void;
    },
  ) {
    this.#policy = policy;
    this.#hidden = o.hidden ?? new Set();
    this.#paths = policy.paths;
    this.#cwd = o.cwd;
    this.#home = o.home;
    this.#report = o.report;
    this.#state = { mode: policy.mode, active: false };
  }

  get state(): SandboxState {
    return this.#state;
  }

  /** Starts the OS sandbox. Never throws: a failure is in {@linkcode state}. */
  async start(): Promise<SandboxState> {
    const mode = this.#policy.mode;
    if (mode === "none" || !this.#policy.runtime) {
      return this.#state = { mode, active: false };
    }
    // The file tools compare real paths: the lists' entries too (a symlinked home).
    const real = async (l: string[]) => await Promise.all(l.map((p) => realPathOf(p)));
    this.#paths = {
      denyRead: await real(this.#policy.paths.denyRead),
      allowWrite: await real(this.#policy.paths.allowWrite),
      denyWrite: await real(this.#policy.paths.denyWrite),
    };
    if (Deno.build.os === "windows") {
      return this.#state = {
        mode,
        active: false,
        notice: "The sandbox is inactive on Windows: tools run unrestricted",
      };
    }
    try {
      // A read denial of a path that is not there hides nothing (Linux), and bubblewrap
      // would leave an empty mount point in its place (a 0444 ~/.baton/config.json).
      // The same for write denials (an empty, read-only `.env` left in every project, or a
      // `.pi` file where pi later looks for a folder): bash may create such a file where
      // none is, but not change one that is; the gate still refuses the file tools both.
      const runtime = structuredClone(this.#policy.runtime) as {
        filesystem: { denyRead: string[]; denyWrite: string[] };
      };
      runtime.filesystem.denyRead = runtime.filesystem.denyRead.filter((p) =>
        /[*?[\]]/.test(p) || existsSync(p)
      );
      runtime.filesystem.denyWrite = runtime.filesystem.denyWrite.filter((p) =>
        /[*?[\]]/.test(p) || existsSync(p)
      );
      const deps = checkedClean ? { errors: [] } : SandboxManager.checkDependencies();
      if (deps.errors.length > 0) throw new Error(deps.errors.join("; "));
      // deno-lint-ignore no-explicit-any
      await SandboxManager.initialize(runtime as any, undefined, true);
      dieOnSigterm();
      const store = SandboxManager.getSandboxViolationStore();
      let seen = store.getTotalCount();
      store.subscribe((all) => {
        const fresh = Math.min(store.getTotalCount() - seen, all.length);
        seen = store.getTotalCount();
        for (const v of all.slice(all.length - fresh)) this.#fromRuntime(v.line, v.timestamp);
      });
      return this.#state = { mode, active: true };
    } catch (err) {
      const why = err instanceof Error ? err.message.split("\n")[0] : String(err);
      if (this.#policy.failClosed) {
        const refuse =
          `Sandbox init failed and sandbox.failClosed is set: tools are refused (${why})`;
        return this.#state = { mode, active: false, notice: refuse, refuse };
      }
      return this.#state = { mode, active: false, notice: `${INIT_FAILED} (${why})` };
    }
  }

  /** A violation line of the runtime's monitor (`deny openat /path`) or proxy. */
  #fromRuntime(line: string, ts: Date | string | undefined): void {
    const timestamp = new Date(ts ?? Date.now()).toISOString();
    const m = line.match(/deny\s+(\S+)\s+(\/\S.*)$/);
    if (m) {
      this.#report({ timestamp, operation: "write", target: m[2]!.trim(), reason: line.trim() });
      return;
    }
    const host = line.match(/([A-Za-z0-9.-]+:\d+)/)?.[1] ?? line.trim().slice(0, 200);
    this.#report({ timestamp, operation: "network", target: host, reason: line.trim() });
  }

  /**
   * pi's `bash`, run by the platform's agent shell (bash, else PowerShell on
   * Windows, as its description says), each command inside the OS sandbox
   * when it is active, and then without the hidden variables (the providers'
   * keys: tool_env.ts).
   */
  bashTool(shell: AgentShell = agentShell(hostPlatform())): ToolDefinition {
    const local = shellOperations(shell);
    const operations: BashOperations = {
      exec: async (command, cwd, options) => {
        if (this.#state.refuse) throw new Error(this.#state.refuse);
        if (!this.#state.active) return await local.exec(command, cwd, options);
        this.#noteReads(command);
        const wrapped = await SandboxManager.wrapWithSandbox(
          command,
          undefined,
          undefined,
          options.signal,
          { commandId: crypto.randomUUID() },
        );
        const env = withoutHidden(options.env ?? process.env, this.#hidden);
        return await local.exec(wrapped, cwd, { ...options, env });
      },
    };
    return shellToolDefinition(this.#cwd, shell, operations);
  }

  /**
   * A command that names a read-protected path: the OS sandbox shows it an
   * empty place (no error to observe), so the violation is reported here.
   */
  #noteReads(command: string): void {
    for (const word of command.split(/[\s'"<>|;&()=]+/)) {
      if (!word || !/[~/.]/.test(word)) continue;
      const abs = absoluteEntry(word.replace(/^\$HOME(?=\/|$)/, "~"), {
        home: this.#home,
        cwd: this.#cwd,
      });
      const why = checkAccess(this.#paths, "read", abs);
      if (why) {
        this.#refused("read", abs, `${why} (bash: the sandbox hides it)`);
      }
    }
  }

  /** Reports a file operation the policy refused, now. */
  #refused(operation: "read" | "write", target: string, reason: string): void {
    this.#report({ timestamp: new Date().toISOString(), operation, target, reason });
  }

  /**
   * pi's `read`, `write` and `edit`, whose file operations check the file
   * the kernel opened against the policy again (checked_files.ts): the gate
   * checks a path, and a symlink swapped in before the tool opens it would
   * otherwise be followed.
   */
  fileTools(options: { autoResizeImages: boolean }): ToolDefinition[] {
    return checkedFileTools(this.#cwd, (op, path) => {
      if (this.#state.refuse) return this.#state.refuse;
      if (this.#policy.mode === "none") return null;
      const why = checkAccess(this.#paths, op, path);
      if (why) this.#refused(op, path, why);
      return why;
    }, options);
  }

  /** A pi extension: every tool call's paths checked before the tool runs. */
  gate(): ExtensionFactory {
    return (pi) => {
      pi.on("tool_call", async (event) => {
        if (this.#state.refuse) return { block: true, reason: this.#state.refuse };
        if (this.#policy.mode === "none" || event.toolName === "bash") return undefined;
        const op = WRITING_TOOL.test(event.toolName) ? "write" : "read";
        const searching = SEARCHING_TOOL.test(event.toolName);
        const given = pathsOf(event.input as Record<string, unknown>);
        // A search without a path searches the session's folder.
        const candidates = (given.length === 0 && searching ? [this.#cwd] : given).flatMap((p) =>
          readFallbacks(absoluteEntry(p, { home: this.#home, cwd: this.#cwd }))
        );
        for (const p of candidates) {
          let abs: string;
          try {
            abs = await realPathOf(p);
          } catch (err) {
            // A path that cannot be resolved (a symlink loop) is not let through unchecked.
            const why = `Sandbox: cannot check '${p}' (${
              err instanceof Error ? err.message : err
            })`;
            return { block: true, reason: why };
          }
          const why = checkAccess(this.#paths, op, abs) ??
            (searching ? searchRefused(this.#paths, abs) : null);
          if (why) {
            this.#refused(op, abs, why);
            return { block: true, reason: why };
          }
        }
        return undefined;
      });
    };
  }
}

/**
 * The runtime's cleanup listens for SIGTERM (node's `process.once`), which
 * leaves the process running afterwards: the daemon's SIGTERM would no
 * longer stop the worker. So: clean up (the proxy bridges, at most 1 s),
 * then end by that same signal, as the daemon expects.
 */
function dieOnSigterm(): void {
  if (Deno.build.os === "windows") return;
  const onTerm = () => {
    Deno.removeSignalListener("SIGTERM", onTerm);
    process.removeAllListeners("SIGTERM");
    const die = () => {
      Deno.kill(Deno.pid, "SIGTERM");
      setTimeout(() => Deno.exit(143), 300);
    };
    SandboxManager.reset().then(die, die);
    setTimeout(die, 1000);
  };
  Deno.addSignalListener("SIGTERM", onTerm);
}

/** Tools that change files (pi's `write` and `edit`, and any named alike). */
const WRITING_TOOL = /write|edit|patch|create|delete|remove|move|rename|mkdir/i;
/** Tools that read every file below their path (pi's `grep`), not just the path itself. */
const SEARCHING_TOOL = /grep|search/i;
/** The spaces pi's tools read as a plain space (path-utils.js). */
const UNICODE_SPACES = /[\u00A0\u2000-\u200A\u202F\u205F\u3000]/g;

/**
 * Each way a tool may read path argument `v`: as given (pi does not trim),
 * trimmed, without a leading `@`, and with odd spaces made plain, as pi's
 * tools expand it. The gate checks all of them: checking one spelling while
 * the tool opens another (`'k '` is not `k`) would let a symlink through.
 */
function spellings(v: string): string[] {
  const out = new Set<string>();
  for (const t of [v, v.trim()]) {
    const bare = t.startsWith("@") ? t.slice(1) : t;
    for (const x of [t, bare, bare.replace(UNICODE_SPACES, " ")]) if (x !== "") out.add(x);
  }
  return [...out];
}

/**
 * The files pi's `read` falls back to when `abs` is missing (path-utils.js:
 * a narrow space before AM/PM, NFD, a curly apostrophe, both).
 */
function readFallbacks(abs: string): string[] {
  const nfd = abs.normalize("NFD");
  const curly = (p: string) => p.replace(/'/g, "\u2019");
  return [
    ...new Set([abs, abs.replace(/ (AM|PM)\./gi, "\u202F$1."), nfd, curly(abs), curly(nfd)]),
  ];
}

/** Argument names that hold a path, in pi's tools and common custom ones. */
const PATH_KEYS = ["path", "file_path", "filePath", "file", "filename", "dir", "directory", "cwd"];

function pathsOf(input: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const k of PATH_KEYS) {
    const v = input?.[k];
    if (typeof v === "string" && v.trim() !== "") out.push(...spellings(v));
  }
  for (const k of ["paths", "files"]) {
    const v = input?.[k];
    if (Array.isArray(v)) {
      for (const e of v) if (typeof e === "string") out.push(...spellings(e));
    }
  }
  // Tools that default to the working directory (ls, grep, find) read it.
  if (out.length === 0 && "pattern" in (input ?? {})) out.push(".");
  return out;
}
