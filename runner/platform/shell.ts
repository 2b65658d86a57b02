/**
 * Which shell runs what: the web terminal's interactive shell and the agent's
 * shell tool. bash where there is one (on Windows, Git for Windows' bash);
 * on Windows without it, PowerShell, and the tool's description says so, so
 * the model writes PowerShell and not bash.
 *
 * @module
 */
import { type Platform, which } from "./platform.ts";

/** A shell and how to hand it a command. */
export interface Shell {
  program: string;
  kind: "bash" | "sh" | "zsh" | "powershell" | "cmd" | "other";
  /** The arguments before a command string (`-c`, `-Command`, `/c`). */
  commandArgs: string[];
}

function kindOf(program: string): Shell["kind"] {
  const base = program.split(/[\\/]/).pop()!.toLowerCase().replace(/\.exe$/, "");
  if (base === "bash") return "bash";
  if (base === "sh" || base === "dash") return "sh";
  if (base === "zsh") return "zsh";
  if (base === "pwsh" || base === "powershell") return "powershell";
  if (base === "cmd") return "cmd";
  return "other";
}

function shell(program: string): Shell {
  const kind = kindOf(program);
  const commandArgs = kind === "powershell"
    ? ["-NoProfile", "-NonInteractive", "-Command"]
    : kind === "cmd"
    ? ["/d", "/s", "/c"]
    : ["-c"];
  return { program, kind, commandArgs };
}

const GIT_BASH = [
  "C:\\Program Files\\Git\\bin\\bash.exe",
  "C:\\Program Files (x86)\\Git\\bin\\bash.exe",
];

/** bash on this machine, or null (on Windows: on PATH, else Git for Windows' bash). */
export function findBash(p: Platform): string | null {
  if (p.os !== "windows") {
    for (
      const c of ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash", "/opt/homebrew/bin/bash"]
    ) {
      if (p.exists(c)) return c;
    }
    return which(p, "bash");
  }
  // System32's bash.exe is WSL's: it runs in another file system, not this one.
  const onPath = which(p, "bash");
  if (onPath && !/\\system32\\/i.test(onPath)) return onPath;
  return GIT_BASH.find((c) => p.exists(c)) ?? null;
}

/** The web terminal's shell: `$SHELL`, else bash, else sh; on Windows pwsh, PowerShell, cmd. */
export function terminalShell(p: Platform): Shell {
  const chosen = p.env("SHELL");
  if (chosen && p.os !== "windows") return shell(chosen);
  if (p.os !== "windows") return shell(findBash(p) ?? "/bin/sh");
  const pwsh = which(p, "pwsh");
  if (pwsh) return shell(pwsh);
  const ps = which(p, "powershell");
  if (ps) return shell(ps);
  return shell(p.env("ComSpec") ?? p.env("COMSPEC") ?? "cmd.exe");
}

/** The agent's shell, with the words its tool's description starts with. */
export type AgentShell = Shell & { description: string };

/** The agent's shell tool: bash where present, else PowerShell on Windows, else sh. */
export function agentShell(p: Platform): AgentShell {
  const bash = findBash(p);
  if (bash) return { ...shell(bash), description: "Runs a command with bash" };
  if (p.os === "windows") {
    const ps = which(p, "pwsh") ?? which(p, "powershell") ?? "powershell.exe";
    return {
      ...shell(ps),
      description: "Runs a command with PowerShell (this Windows machine has no bash): " +
        "write PowerShell, not bash",
    };
  }
  return { ...shell("/bin/sh"), description: "Runs a command with sh (this machine has no bash)" };
}
