/**
 * Ending a process with everything it started: a session's worker, its tool
 * commands and what they left running. On Windows `taskkill /T /F` ends the
 * tree; elsewhere the descendants are found from `ps` and signalled deepest
 * first (SIGTERM, then SIGKILL to what is left after a grace period), so none
 * is left to be adopted by init and run on.
 *
 * A process that left the tree (`setsid nohup server &`: its shell exits and
 * init adopts it) is found by a marker in its environment instead, which it
 * inherited from the worker (`BATON_SESSION_ID=<id>`): on Linux from
 * `/proc/<pid>/environ`, on macOS from `ps -E`. Windows has no such reading
 * of another process's environment: there the tree is what ends.
 *
 * @module
 */
import type { Platform } from "./platform.ts";

/** One step of ending a tree. */
export type KillStep =
  | { t: "command"; cmd: string[] }
  | { t: "signal"; pid: number; signal: Deno.Signal };

/** The descendants of `pid` from `ps -A -o pid= -o ppid=` output, deepest first. */
export function descendants(psOutput: string, pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const line of psOutput.split("\n")) {
    const [c, parent] = line.trim().split(/\s+/).map(Number);
    if (!Number.isInteger(c) || !Number.isInteger(parent)) continue;
    children.set(parent!, [...(children.get(parent!) ?? []), c!]);
  }
  const out: number[] = [];
  const visit = (p: number, seen: Set<number>) => {
    for (const c of children.get(p) ?? []) {
      if (seen.has(c)) continue;
      seen.add(c);
      visit(c, seen);
      out.push(c);
    }
  };
  visit(pid, new Set([pid]));
  return out;
}

/** An environment variable that marks the processes of one session. */
export interface Marker {
  name: string;
  value: string;
}

/** Whether a NUL-separated environment (`/proc/<pid>/environ`) carries the marker. */
export function environHas(environ: string, m: Marker): boolean {
  return environ.split("\0").includes(`${m.name}=${m.value}`);
}

/**
 * The pids whose environment carries the marker, from macOS's
 * `ps -A -ww -E -o pid= -o command=` (the environment follows the command).
 */
export function markedInPsE(psOutput: string, m: Marker): number[] {
  const word = `${m.name}=${m.value}`;
  const out: number[] = [];
  for (const line of psOutput.split("\n")) {
    const match = line.match(/^\s*(\d+)\s+(.*)$/);
    if (!match) continue;
    if (match[2]!.split(/\s+/).includes(word)) out.push(Number(match[1]));
  }
  return out;
}

/** What {@linkcode killPlan} knows of the machine (read beforehand). */
export interface KillFacts {
  /** `ps -A -o pid= -o ppid=` output (not on Windows). */
  ps?: string;
  /** Processes carrying the marker (not on Windows). */
  marked?: number[];
  /** Never signalled (the daemon itself, init). */
  spare?: number[];
}

/**
 * How to end `pid` and its descendants (and the marked processes) on the
 * platform: the steps of the first round. `pid` null: only the marked ones.
 */
export function killPlan(
  p: Pick<Platform, "os">,
  pid: number | null,
  signal: Deno.Signal,
  facts: KillFacts = {},
): KillStep[] {
  if (p.os === "windows") {
    // Windows has no signals to forward: the tree ends at once.
    return pid === null
      ? []
      : [{ t: "command", cmd: ["taskkill", "/PID", String(pid), "/T", "/F"] }];
  }
  const tree = pid === null ? [] : [...descendants(facts.ps ?? "", pid), pid];
  const spare = new Set([1, ...(facts.spare ?? [])]);
  const all = [...new Set([...(facts.marked ?? []), ...tree])].filter((x) => !spare.has(x));
  return all.map((x) => ({ t: "signal", pid: x, signal }));
}

/** Options of {@linkcode killTree}. */
export interface KillTreeOptions {
  /** The first signal (default SIGTERM); SIGKILL follows for what is left. */
  signal?: Deno.Signal;
  /** Also end the processes whose environment carries this marker. */
  marker?: Marker;
  /** How long the processes get to end before SIGKILL (default 3 s). */
  graceMs?: number;
}

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" })
    .output().catch(() => null);
  return out?.success ? new TextDecoder().decode(out.stdout) : "";
}

/** This machine's processes that carry the marker (none on Windows). */
export async function markedProcesses(m: Marker): Promise<number[]> {
  if (Deno.build.os === "darwin") {
    return markedInPsE(await run("ps", ["-A", "-ww", "-E", "-o", "pid=", "-o", "command="]), m);
  }
  if (Deno.build.os !== "linux") return [];
  const out: number[] = [];
  const decoder = new TextDecoder();
  try {
    for await (const e of Deno.readDir("/proc")) {
      if (!/^\d+$/.test(e.name)) continue;
      try {
        const environ = decoder.decode(await Deno.readFile(`/proc/${e.name}/environ`));
        if (environHas(environ, m)) out.push(Number(e.name));
      } catch {
        // Gone, or another user's.
      }
    }
  } catch {
    // No /proc.
  }
  return out;
}

function alive(pid: number): boolean {
  if (Deno.build.os === "linux") {
    // A zombie (ended, not yet reaped by its parent) still takes signals.
    try {
      const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
      return !/^\d+ \(.*\) Z /s.test(stat);
    } catch {
      return false;
    }
  }
  try {
    // Signal 0 is not in Deno's list; SIGCONT is harmless to a running process.
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

/**
 * Ends `pid` and its descendants on this machine (and, with a marker, every
 * process carrying it, even one that left the tree). `pid` null: only those.
 * Resolves when they are gone (or were sent SIGKILL).
 */
export async function killTree(pid: number | null, o: KillTreeOptions = {}): Promise<void> {
  const os = Deno.build.os;
  const facts: KillFacts = { spare: [Deno.pid] };
  if (os !== "windows") {
    if (pid !== null) facts.ps = await run("ps", ["-A", "-o", "pid=", "-o", "ppid="]);
    if (o.marker) facts.marked = await markedProcesses(o.marker);
  }
  const steps = killPlan({ os }, pid, o.signal ?? "SIGTERM", facts);
  for (const step of steps) {
    try {
      if (step.t === "signal") Deno.kill(step.pid, step.signal);
      else await run(step.cmd[0]!, step.cmd.slice(1));
    } catch {
      // Already gone.
    }
  }
  const pids = steps.flatMap((s) => s.t === "signal" ? [s.pid] : []);
  const deadline = Date.now() + (o.graceMs ?? 3000);
  while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const x of pids) {
    try {
      Deno.kill(x, "SIGKILL");
    } catch {
      // Gone.
    }
  }
}
