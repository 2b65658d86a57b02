/**
 * Core pinning: the servers under test run on one set of cores, everything
 * else (the bench itself, load generators, viewers, synthetic and real
 * runners, wrk, the C viewers) on another, so that neither side's work
 * lands on the other's cores. Without it, one full run gave the steady-rate
 * p99 of 36.5 ms and another 17.4 ms the same day.
 *
 * The bench process pins itself to the load cores at the start, so whatever
 * it runs or spawns inherits them; the servers under test are the exception,
 * started under `taskset -c <server cores>` (`startServer`) or moved there
 * once running (relays started by the test harness).
 *
 * @module
 */

/** Which cores each side got, or why the run is unpinned; stored in the results. */
export interface PinningInfo {
  pinned: boolean;
  /** CPUs this process may use (`Cpus_allowed_list`). */
  allowed: string;
  /** CPUs of the servers under test, as taskset lists them. */
  server?: string;
  /** CPUs of everything else. */
  load?: string;
  /** Why the run is unpinned. */
  reason?: string;
  /** `navigator.hardwareConcurrency` in a Deno process on the server's CPUs. */
  serverSees?: number;
  /** The same on the load side. */
  loadSees?: number;
  /** Scenarios that run on all allowed CPUs (their server shares a process with the client). */
  unpinnedScenarios: string[];
}

/** Parses a CPU list as the kernel and taskset write it (`0-3,6`). */
export function parseCpuList(text: string): number[] {
  const out: number[] = [];
  for (const part of text.trim().split(",")) {
    if (!part) continue;
    const [lo, hi] = part.split("-").map(Number);
    if (!Number.isInteger(lo)) throw new RangeError(`Not a CPU list: '${text}'`);
    for (let c = lo!; c <= (hi ?? lo!); c++) out.push(c);
  }
  return out;
}

/** Writes CPUs as a list taskset takes (`0-3,6`). */
export function formatCpuList(cpus: readonly number[]): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(j === i ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

/**
 * Splits CPUs between the servers under test and the rest, keeping the
 * hyperthreads of one physical core on the same side (`coreOf` names a
 * CPU's core). The servers get the higher-numbered half, rounded down; the
 * load side keeps CPU 0 (where the kernel does most of its housekeeping)
 * and the odd core out, since it carries the bench, the load generator and
 * its viewers. Two CPUs: load on 0, servers on 1. Null below two CPUs.
 */
export function splitCpus(
  cpus: readonly number[],
  coreOf: (cpu: number) => string = String,
): { server: number[]; load: number[] } | null {
  if (cpus.length < 2) return null;
  const byCore = new Map<string, number[]>();
  for (const cpu of [...cpus].sort((a, b) => a - b)) {
    const core = coreOf(cpu);
    const list = byCore.get(core);
    if (list) list.push(cpu);
    else byCore.set(core, [cpu]);
  }
  // Two hyperthreads of a single core: split them, it is all there is.
  const groups = byCore.size >= 2 ? [...byCore.values()] : [...cpus].map((c) => [c]);
  const serverGroups = Math.floor(groups.length / 2);
  return {
    load: groups.slice(0, groups.length - serverGroups).flat(),
    server: groups.slice(groups.length - serverGroups).flat(),
  };
}

/** Options of {@linkcode Pinning.setUp}. */
export interface PinningOptions {
  /** Run unpinned whatever the machine allows (`--unpinned`). */
  off?: boolean;
  /** Scenarios to run on all allowed CPUs. */
  unpinnedScenarios?: string[];
}

/** The bench's core pinning, decided once per run. */
export class Pinning {
  private constructor(readonly info: PinningInfo) {}

  /**
   * Decides the split (Linux, `taskset` on the PATH, two CPUs or more) and
   * moves this process to the load side; unpinned, saying why, otherwise.
   */
  static async setUp(options: PinningOptions = {}): Promise<Pinning> {
    const status = await Deno.readTextFile("/proc/self/status").catch(() => "");
    const allowedText = status.match(/^Cpus_allowed_list:\s*(\S+)/m)?.[1];
    const allowed = allowedText
      ? parseCpuList(allowedText)
      : Array.from({ length: navigator.hardwareConcurrency }, (_, i) => i);
    const base = { allowed: formatCpuList(allowed), unpinnedScenarios: [] };
    const unpinned = (reason: string) => new Pinning({ ...base, pinned: false, reason });
    if (options.off) return unpinned("--unpinned given");
    if (Deno.build.os !== "linux") return unpinned(`not Linux (${Deno.build.os})`);
    if (!await hasTaskset()) return unpinned("taskset is not installed (util-linux)");
    const split = splitCpus(allowed, coreOf);
    if (!split) return unpinned(`${allowed.length} CPU only`);
    const server = formatCpuList(split.server);
    const load = formatCpuList(split.load);
    const pinning = new Pinning({
      ...base,
      pinned: true,
      server,
      load,
      serverSees: await coresSeenOn(server),
      loadSees: await coresSeenOn(load),
      unpinnedScenarios: options.unpinnedScenarios ?? [],
    });
    try {
      await pinning.toLoad(Deno.pid);
    } catch (err) {
      return unpinned(`taskset failed: ${err instanceof Error ? err.message : err}`);
    }
    return pinning;
  }

  /** The header's line. */
  describe(): string {
    const i = this.info;
    if (!i.pinned) return `unpinned: ${i.reason}; servers and load share CPU ${i.allowed}`;
    return `pinned with taskset: servers under test on CPU ${i.server}, load and clients on CPU ${i.load}` +
      ` (navigator.hardwareConcurrency ${i.serverSees} and ${i.loadSees})` +
      (i.unpinnedScenarios.length ? `; ${i.unpinnedScenarios.join(", ")} on CPU ${i.allowed}` : "");
  }

  /** `taskset -c <cpus>` to put before a server's command, or nothing when unpinned. */
  serverPrefix(): string[] {
    return this.info.pinned ? ["taskset", "-c", this.info.server!] : [];
  }

  /** Moves a running process, all its threads, to the servers' CPUs. */
  async toServer(pid: number): Promise<void> {
    if (this.info.pinned) await setAffinity(pid, this.info.server!);
  }

  /** Moves a running process, all its threads, to the load side's CPUs. */
  async toLoad(pid: number): Promise<void> {
    if (this.info.pinned) await setAffinity(pid, this.info.load!);
  }

  /** Moves a running process, all its threads, to every allowed CPU. */
  async toAll(pid: number): Promise<void> {
    if (this.info.pinned) await setAffinity(pid, this.info.allowed);
  }
}

async function hasTaskset(): Promise<boolean> {
  try {
    const out = await new Deno.Command("taskset", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).output();
    return out.success;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** The physical core a CPU belongs to (its hyperthread siblings share it). */
function coreOf(cpu: number): string {
  const topology = `/sys/devices/system/cpu/cpu${cpu}/topology`;
  for (const file of ["core_cpus_list", "thread_siblings_list"]) {
    try {
      return Deno.readTextFileSync(`${topology}/${file}`).trim();
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }
  return String(cpu);
}

/** `navigator.hardwareConcurrency` as a Deno process pinned to `cpus` sees it. */
async function coresSeenOn(cpus: string): Promise<number> {
  const out = await new Deno.Command("taskset", {
    args: [
      "-c",
      cpus,
      Deno.execPath(),
      "eval",
      "--no-config",
      "console.log(navigator.hardwareConcurrency)",
    ],
    stdout: "piped",
    stderr: "null",
  }).output();
  return Number(new TextDecoder().decode(out.stdout).trim());
}

/**
 * `taskset --all-tasks` walks the process's threads one by one; a thread that
 * ends during the walk fails it ("failed to get pid N's affinity: No such
 * process"), which a Deno process with short-lived worker threads does now
 * and then. Walk again then; a process that is gone itself needs no moving.
 */
async function setAffinity(pid: number, cpus: string): Promise<void> {
  for (let attempt = 1;; attempt++) {
    const out = await new Deno.Command("taskset", {
      args: ["--all-tasks", "--pid", "--cpu-list", cpus, String(pid)],
      stdout: "null",
      stderr: "piped",
    }).output();
    if (out.success) return;
    const why = new TextDecoder().decode(out.stderr).trim();
    const threadEnded = /No such process/.test(why);
    if (threadEnded && !processExists(pid)) return;
    if (!threadEnded || attempt === 5) {
      throw new Error(`taskset could not move ${pid} to CPU ${cpus}: ${why}`);
    }
  }
}

function processExists(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}
