/**
 * Ending a process with everything it started: a worker's tool commands, a
 * terminal's jobs. On Windows `taskkill /T /F` ends the tree; elsewhere the
 * descendants are found from `ps` and signalled children first, so none is
 * left to be adopted by init and run on.
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

/** How to end `pid` and its descendants on the platform (`ps` read beforehand, off Windows). */
export function killPlan(
  p: Pick<Platform, "os">,
  pid: number,
  signal: Deno.Signal,
  psOutput = "",
): KillStep[] {
  if (p.os === "windows") {
    // Windows has no signals to forward: the tree ends at once.
    return [{ t: "command", cmd: ["taskkill", "/PID", String(pid), "/T", "/F"] }];
  }
  return [...descendants(psOutput, pid), pid].map((x) => ({ t: "signal", pid: x, signal }));
}

/** Ends `pid` and its descendants on this machine. */
export async function killTree(pid: number, signal: Deno.Signal = "SIGTERM"): Promise<void> {
  let ps = "";
  if (Deno.build.os !== "windows") {
    const out = await new Deno.Command("ps", {
      args: ["-A", "-o", "pid=", "-o", "ppid="],
      stdout: "piped",
      stderr: "null",
    })
      .output().catch(() => null);
    ps = out ? new TextDecoder().decode(out.stdout) : "";
  }
  for (const step of killPlan({ os: Deno.build.os }, pid, signal, ps)) {
    try {
      if (step.t === "signal") Deno.kill(step.pid, step.signal);
      else {await new Deno.Command(step.cmd[0]!, {
          args: step.cmd.slice(1),
          stdout: "null",
          stderr: "null",
        }).output();}
    } catch {
      // Already gone.
    }
  }
}
