/**
 * The agent's `bash` tool on each OS: the shell the platform module chooses
 * (runner/platform/shell.ts: bash where present, else PowerShell on Windows)
 * runs each command, and the tool's description names that shell so the
 * model writes for it. bash and sh run through pi's own local backend (given
 * the chosen path: on Windows never WSL's `bash.exe`); PowerShell and cmd,
 * which pi cannot drive (it always passes `-c`), through
 * {@linkcode commandLineOperations}.
 *
 * @module
 */
import { spawn } from "node:child_process";
import process from "node:process";
import {
  type BashOperations,
  createBashToolDefinition,
  createLocalBashOperations,
  type ToolDefinition,
} from "@mariozechner/pi-coding-agent";
import type { AgentShell, Shell } from "../platform/shell.ts";
import { killTree } from "../platform/process_tree.ts";

/** The program and arguments that run `command` in `shell`. */
export function commandLine(shell: Shell, command: string): { program: string; args: string[] } {
  return { program: shell.program, args: [...shell.commandArgs, command] };
}

/**
 * Runs each command as `program ...commandArgs command`, streaming its output;
 * an abort or a timeout ends the command's whole tree (taskkill /T on Windows).
 */
export function commandLineOperations(shell: Shell): BashOperations {
  return {
    exec: (command, cwd, { onData, signal, timeout, env }) =>
      new Promise((resolve, reject) => {
        const { program, args } = commandLine(shell, command);
        const child = spawn(program, args, {
          cwd,
          env: env ?? process.env,
          stdio: ["ignore", "pipe", "pipe"],
          windowsHide: true,
        });
        let timedOut = false;
        const end = () => {
          if (child.pid) killTree(child.pid, { graceMs: 1000 }).catch(() => {});
        };
        const timer = timeout && timeout > 0
          ? setTimeout(() => {
            timedOut = true;
            end();
          }, timeout * 1000)
          : undefined;
        if (signal?.aborted) end();
        else signal?.addEventListener("abort", end, { once: true });
        child.stdout?.on("data", onData);
        child.stderr?.on("data", onData);
        const done = (err: Error | null, code: number | null) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", end);
          if (err) reject(err);
          else if (signal?.aborted) reject(new Error("aborted"));
          else if (timedOut) reject(new Error(`timeout:${timeout}`));
          else resolve({ exitCode: code });
        };
        child.once("error", (err) => done(err, null));
        child.once("close", (code) => done(null, code));
      }),
  };
}

/** The operations that run commands in `shell` (pi's backend for bash and sh). */
export function shellOperations(shell: Shell): BashOperations {
  return shell.kind === "bash" || shell.kind === "sh" || shell.kind === "zsh"
    ? createLocalBashOperations({ shellPath: shell.program })
    : commandLineOperations(shell);
}

/**
 * pi's `bash` tool definition with `operations`, described for `shell`: the
 * tool keeps its name (the model and the web client know it as `bash`), and
 * its description and parameter say which shell runs the command.
 */
export function shellToolDefinition(
  cwd: string,
  shell: AgentShell,
  operations: BashOperations,
): ToolDefinition {
  const def = createBashToolDefinition(cwd, { operations }) as unknown as ToolDefinition & {
    promptSnippet?: string;
    parameters: { properties: { command: { description?: string } } };
  };
  if (shell.kind === "bash") {
    return { ...def, description: `${shell.description}. ${def.description}` };
  }
  const name = shell.kind === "powershell" ? "PowerShell" : shell.kind;
  // Spread, not structuredClone: the schema's TypeBox symbols must stay.
  const props = def.parameters.properties;
  const parameters = {
    ...def.parameters,
    properties: {
      ...props,
      command: { ...props.command, description: `${name} command to execute` },
    },
  };
  return {
    ...def,
    description: `${shell.description}. ` +
      def.description.replace(/Execute a bash command/, `Execute a ${name} command`),
    ...(def.promptSnippet ? { promptSnippet: `Execute ${name} commands` } : {}),
    parameters,
  } as ToolDefinition;
}
