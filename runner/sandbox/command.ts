/**
 * Commands that baton itself starts for a session (hooks, MCP stdio
 * servers) under the same OS sandbox as the agent's `bash`: the shell
 * command wrapped by `@anthropic-ai/sandbox-runtime` when the session's
 * sandbox is active, left as it is when it is not (mode `none`, Windows,
 * init failed and fail-open), refused when `failClosed` refuses tools.
 *
 * @module
 */
import { SandboxManager } from "@anthropic-ai/sandbox-runtime";
import type { SandboxState } from "./session.ts";

/** A command the session's sandbox refuses to run (`failClosed` after a failed init). */
export class SandboxRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SandboxRefusedError";
  }
}

/** Quotes one word for a POSIX shell. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The shell command line to run `command` under the session's sandbox: the
 * runtime's bubblewrap (Linux) or Seatbelt (macOS) invocation around it when
 * the sandbox is active; `command` itself otherwise.
 */
export async function sandboxedShellCommand(
  state: SandboxState,
  command: string,
  signal?: AbortSignal,
): Promise<string> {
  if (state.refuse) throw new SandboxRefusedError(state.refuse);
  if (!state.active) return command;
  return await SandboxManager.wrapWithSandbox(command, undefined, undefined, signal, {
    commandId: crypto.randomUUID(),
  });
}

/** The shell that runs a command line: `bash` where there is one (as pi's tool), else `sh`. */
export function shellFor(): { cmd: string; flag: string } {
  if (Deno.build.os === "windows") return { cmd: "cmd.exe", flag: "/c" };
  for (const p of ["/bin/bash", "/usr/bin/bash"]) {
    try {
      if (Deno.statSync(p).isFile) return { cmd: p, flag: "-c" };
    } catch {
      // Not here.
    }
  }
  return { cmd: "/bin/sh", flag: "-c" };
}
