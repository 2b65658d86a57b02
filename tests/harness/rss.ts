/**
 * Memory of the processes a test starts, read from /proc (Linux): a
 * process's resident set, the runner daemon under its supervisor, and a
 * sampler of peaks while a load runs.
 *
 * @module
 */

const MB = 1024 * 1024;

/** The resident set of `pid`, in bytes. */
export function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  if (!m) throw new Error(`No VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** The `_daemon` child of a runner's supervisor process. */
export function daemonPid(supervisor: number): number {
  const children = Deno.readTextFileSync(`/proc/${supervisor}/task/${supervisor}/children`)
    .trim().split(/\s+/).map(Number);
  const daemon = children.find((pid) =>
    Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0").includes("_daemon")
  );
  if (!daemon) throw new Error(`No _daemon child of ${supervisor}`);
  return daemon;
}

/** Samples the peak RSS of some processes until stopped. */
export class RssWatch {
  readonly before: number[];
  readonly peak: number[];
  readonly #timer: ReturnType<typeof setInterval>;
  constructor(readonly pids: number[]) {
    this.before = pids.map(rssOf);
    this.peak = [...this.before];
    this.#timer = setInterval(() => this.sample(), 50);
  }
  sample(): void {
    this.pids.forEach((pid, i) => this.peak[i] = Math.max(this.peak[i]!, rssOf(pid)));
  }
  /** Growth over the start, in MB, per process. */
  stop(): number[] {
    clearInterval(this.#timer);
    this.sample();
    return this.peak.map((p, i) => (p - this.before[i]!) / MB);
  }
}
