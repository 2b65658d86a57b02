/**
 * A session's hooks, in its worker: each hook command runs in a shell under
 * the session's sandbox, with the event as JSON on stdin and a time limit
 * (its whole process group is killed at the limit). `preToolUse` may block
 * the call (exit code 2, or `{"decision":"block"}` on stdout): its reason is
 * the tool result the agent sees. `postToolUse` exit 2 adds its stderr to
 * the result; `stop` exit 2 sends its reason back to the agent (once in a
 * row). Other failures are shown in the session and change nothing.
 *
 * @module
 */
import { spawn } from "node:child_process";
import process from "node:process";
import type { ExtensionFactory } from "@mariozechner/pi-coding-agent";
import type { ChildReaper } from "../child_reaper.ts";
import type { SandboxState } from "../sandbox/session.ts";
import { sandboxedShellCommand, shellFor } from "../sandbox/command.ts";
import { type Hook, type HookEvent, matches } from "./config.ts";

/** What the session shows about a hook. */
export interface HookNotice {
  level: "info" | "error";
  text: string;
}

/** What one hook run gave. */
export interface HookRun {
  hook: Hook;
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** It could not start (or the sandbox refused it). */
  error?: string;
}

/** Options of {@linkcode SessionHooks}. */
export interface SessionHooksOptions {
  sessionId: string;
  cwd: string;
  sandbox: SandboxState;
  env: Record<string, string>;
  /** Ends a hook's process group with the worker. */
  reaper?: ChildReaper;
  notify: (n: HookNotice) => void;
}

/** The most of a hook's stdout or stderr kept. */
const MAX_OUTPUT = 64 * 1024;
/** A reason longer than this is cut before the agent sees it. */
const MAX_REASON = 4000;

/** Runs one hook command; never throws. */
export async function runHook(
  hook: Hook,
  input: Record<string, unknown>,
  o: Pick<SessionHooksOptions, "cwd" | "sandbox" | "env" | "reaper">,
): Promise<HookRun> {
  let line: string;
  try {
    line = await sandboxedShellCommand(o.sandbox, hook.command);
  } catch (err) {
    return { hook, code: null, stdout: "", stderr: "", timedOut: false, error: text(err) };
  }
  const shell = shellFor();
  return await new Promise<HookRun>((resolve) => {
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    let done = false;
    const child = spawn(shell.cmd, [shell.flag, line], {
      cwd: o.cwd,
      env: o.env,
      // Its own process group, so the limit ends whatever it started too.
      detached: Deno.build.os !== "windows",
      stdio: ["pipe", "pipe", "pipe"],
    });
    const group = Deno.build.os !== "windows";
    if (child.pid) o.reaper?.add(child.pid, { group });
    const finish = (r: Omit<HookRun, "hook" | "stdout" | "stderr" | "timedOut">) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (child.pid) o.reaper?.remove(child.pid);
      resolve({ hook, stdout, stderr, timedOut, ...r });
    };
    const killAll = () => {
      try {
        if (Deno.build.os !== "windows" && child.pid) process.kill(-child.pid, "SIGKILL");
        else child.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killAll();
      // A grandchild that left the group may hold the pipes: do not wait on it.
      setTimeout(() => finish({ code: null }), 1000);
    }, hook.timeoutMs);
    child.stdout.on("data", (b: Uint8Array) => {
      if (stdout.length < MAX_OUTPUT) stdout += new TextDecoder().decode(b);
    });
    child.stderr.on("data", (b: Uint8Array) => {
      if (stderr.length < MAX_OUTPUT) stderr += new TextDecoder().decode(b);
    });
    child.on("error", (err) => finish({ code: null, error: text(err) }));
    child.on("close", (code) => finish({ code: timedOut ? null : code }));
    child.stdin.on("error", () => {}); // A hook that does not read its stdin.
    child.stdin.end(JSON.stringify(input));
  });
}

/** The pi events {@linkcode SessionHooks.extension} listens to. */
export const HOOK_EVENTS: readonly string[] = ["tool_call", "tool_result", "agent_end"];

/** The hooks of one session. */
export class SessionHooks {
  readonly #hooks: Hook[];
  readonly #o: SessionHooksOptions;
  /** A `stop` hook sent the agent back to work: the next stop cannot do it again. */
  #stopActive = false;

  constructor(hooks: Hook[], o: SessionHooksOptions) {
    this.#hooks = hooks;
    this.#o = o;
  }

  get count(): number {
    return this.#hooks.length;
  }

  /** Runs the hooks of `event` (those matching `toolName` for tool events), in order. */
  async run(
    event: HookEvent,
    data: Record<string, unknown>,
    toolName?: string,
  ): Promise<HookRun[]> {
    const runs: HookRun[] = [];
    for (const hook of this.#hooks) {
      if (hook.event !== event) continue;
      if (toolName !== undefined && !matches(hook, toolName)) continue;
      const run = await runHook(hook, {
        hook_event_name: event,
        session_id: this.#o.sessionId,
        cwd: this.#o.cwd,
        ...data,
      }, {
        ...this.#o,
        env: {
          ...this.#o.env,
          BATON_PROJECT_DIR: this.#o.cwd,
          BATON_SESSION_ID: this.#o.sessionId,
        },
      });
      this.#report(run);
      runs.push(run);
      if (event === "preToolUse" && blockReason(run) !== null) break;
    }
    return runs;
  }

  #report(run: HookRun): void {
    const name = `${run.hook.event} hook '${short(run.hook.command)}'`;
    if (run.error) {
      this.#o.notify({ level: "error", text: `The ${name} did not run: ${run.error}` });
    } else if (run.timedOut) {
      this.#o.notify({
        level: "error",
        text: `The ${name} was stopped at its time limit (${run.hook.timeoutMs} ms)`,
      });
    } else if (run.code !== 0 && run.code !== 2) {
      const why = run.stderr.trim().split("\n").slice(-2).join(" ").slice(0, 300);
      this.#o.notify({
        level: "error",
        text: `The ${name} failed (exit code ${run.code})${why ? `: ${why}` : ""}`,
      });
    }
  }

  /** `sessionStart`, once the agent is ready (`source`: startup or resume). */
  async sessionStart(source: "startup" | "resume"): Promise<void> {
    await this.run("sessionStart", { source });
  }

  /**
   * A pi extension: `preToolUse`, `postToolUse` and `stop` around the agent's
   * work. It listens to {@linkcode HOOK_EVENTS} only.
   */
  extension(): ExtensionFactory {
    return (pi) => {
      pi.on("tool_call", async (event) => {
        const runs = await this.run("preToolUse", {
          tool_name: event.toolName,
          tool_call_id: event.toolCallId,
          tool_input: event.input,
        }, event.toolName);
        for (const run of runs) {
          const reason = blockReason(run);
          if (reason !== null) return { block: true, reason };
        }
        return undefined;
      });
      pi.on("tool_result", async (event) => {
        const runs = await this.run("postToolUse", {
          tool_name: event.toolName,
          tool_call_id: event.toolCallId,
          tool_input: event.input,
          tool_response: { content: event.content, is_error: event.isError },
        }, event.toolName);
        const notes = runs.filter((r) => r.code === 2 && r.stderr.trim())
          .map((r) => `postToolUse hook: ${r.stderr.trim().slice(0, MAX_REASON)}`);
        if (notes.length === 0) return undefined;
        return { content: [...event.content, { type: "text", text: notes.join("\n") }] };
      });
      pi.on("agent_end", async () => {
        const active = this.#stopActive;
        this.#stopActive = false;
        const runs = await this.run("stop", { stop_hook_active: active });
        const reason = runs.map(blockReason).find((r) => r !== null);
        if (!reason) return;
        if (active) {
          this.#o.notify({
            level: "info",
            text: "A stop hook asked the agent to go on again: not done twice in a row",
          });
          return;
        }
        this.#stopActive = true;
        pi.sendUserMessage(`A stop hook asks you to continue: ${reason}`);
      });
    };
  }
}

/**
 * Why a hook run blocks (exit code 2, or `{"decision":"block"|"deny"}` on
 * stdout), or null. The reason is what the agent reads.
 */
export function blockReason(run: HookRun): string | null {
  if (run.code === 2) {
    const why = run.stderr.trim() || run.stdout.trim();
    return (why || `Blocked by the ${run.hook.event} hook '${short(run.hook.command)}'`)
      .slice(0, MAX_REASON);
  }
  if (run.code !== 0) return null;
  const out = run.stdout.trim();
  if (!out.startsWith("{")) return null;
  try {
    const v = JSON.parse(out);
    const decision = v?.decision ?? v?.hookSpecificOutput?.permissionDecision;
    if (decision !== "block" && decision !== "deny") return null;
    const why = v.reason ?? v.hookSpecificOutput?.permissionDecisionReason;
    return (typeof why === "string" && why.trim()
      ? why.trim()
      : `Blocked by the ${run.hook.event} hook '${short(run.hook.command)}'`).slice(0, MAX_REASON);
  } catch {
    return null;
  }
}

function short(command: string): string {
  const one = command.replace(/\s+/g, " ").trim();
  return one.length > 60 ? one.slice(0, 57) + "..." : one;
}

function text(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
