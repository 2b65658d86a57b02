/**
 * Subprocesses of the bench: servers under test and load generators, each
 * in its own process (own event loop) so that neither measures the other.
 * Structured messages travel as `@{json}` lines on stdout and JSON lines on
 * stdin; CPU time and RSS come from /proc.
 *
 * @module
 */
import { join } from "node:path";
import { readLines } from "../../runner/_lines.ts";
import { ROOT } from "../harness/procs.ts";
import { Conditions } from "../harness/wait.ts";

export const BENCH_DIR = join(ROOT, "tests", "bench");

/** CPU time and memory of a process, from /proc (Linux). */
export interface ProcStat {
  /** User + system CPU time, ms. */
  cpuMs: number;
  /** Resident set size now, bytes. */
  rss: number;
  /** Peak resident set size, bytes. */
  hwm: number;
}

const TICK_MS = 10; // USER_HZ is 100 on Linux.

/** Reads CPU time and RSS of `pid`. */
export function procStat(pid: number): ProcStat {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  // Fields after the command name (which may contain spaces) start at ") ".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = (key: string) => Number(status.match(new RegExp(`^${key}:\\s+(\\d+)`, "m"))?.[1] ?? 0);
  return { cpuMs: (utime + stime) * TICK_MS, rss: kb("VmRSS") * 1024, hwm: kb("VmHWM") * 1024 };
}

/** CPU use of a process over a window, as a share of one core (1.0 = one core busy). */
export function cpuShare(before: ProcStat, after: ProcStat, wallMs: number): number {
  return wallMs > 0 ? (after.cpuMs - before.cpuMs) / wallMs : 0;
}

/** Options of {@linkcode BenchProcess.start}. */
export interface BenchProcessOptions {
  args?: string[];
  env?: Record<string, string>;
  /** Extra flags for `deno run` (e.g. `--cpu-prof`). */
  denoFlags?: string[];
  /** A command to run Deno under, e.g. `taskset -c 1` (see `_pinning.ts`). */
  prefix?: string[];
  /** Echo stderr (set BATON_BENCH_VERBOSE=1). */
  verbose?: boolean;
}

/** A Deno subprocess running one of the bench's scripts. */
export class BenchProcess {
  readonly lines: string[] = [];
  readonly messages: Record<string, unknown>[] = [];
  readonly status: Promise<Deno.CommandStatus>;
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #conditions = new Conditions((what, ms) =>
    `${this.name}: no ${what} within ${ms} ms\n${this.output()}`
  );
  #exited = false;

  private constructor(readonly name: string, child: Deno.ChildProcess, verbose: boolean) {
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    const pump = async (stream: ReadableStream<Uint8Array>, err: boolean) => {
      for await (const line of readLines(stream)) {
        if (line.startsWith("@{")) {
          try {
            this.messages.push(JSON.parse(line.slice(1)));
          } catch {
            this.lines.push(line);
          }
        } else {
          this.lines.push(line);
          if (this.lines.length > 2000) this.lines.splice(0, 1000);
          if (verbose || (err && Deno.env.get("BATON_BENCH_VERBOSE") === "1")) {
            console.error(`  [${name}] ${line}`);
          }
        }
        this.#check();
      }
    };
    const done = Promise.all([pump(child.stdout, false), pump(child.stderr, true)]);
    this.status = child.status.then(async (st) => {
      await done.catch(() => {});
      this.#exited = true;
      this.#check();
      return st;
    });
  }

  /** Starts `deno run -A <script> ...args` from the bench folder. */
  static start(name: string, script: string, options: BenchProcessOptions = {}): BenchProcess {
    const [command, ...prefix] = [...(options.prefix ?? []), Deno.execPath()];
    const child = new Deno.Command(command!, {
      args: [
        ...prefix,
        "run",
        "-A",
        "--quiet",
        "--config",
        join(ROOT, "deno.json"),
        ...(options.denoFlags ?? []),
        join(BENCH_DIR, script),
        ...(options.args ?? []),
      ],
      env: { NO_COLOR: "1", ...options.env },
      cwd: ROOT,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    return new BenchProcess(name, child, options.verbose ?? false);
  }

  get pid(): number {
    return this.#child.pid;
  }

  stat(): ProcStat {
    return procStat(this.pid);
  }

  /** Resolves with the first structured message (past or future) with `ev` equal to `ev`. */
  async message<T = Record<string, unknown>>(ev: string, timeoutMs = 120_000): Promise<T> {
    const find = () => this.messages.find((m) => m.ev === ev);
    await this.#until(() => find() !== undefined, `message '${ev}'`, timeoutMs);
    return find() as T;
  }

  /** Resolves with the first output line matching `re`. */
  async line(re: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
    const find = () => this.lines.map((l) => l.match(re)).find((m) => m !== null);
    await this.#until(() => find() !== undefined, `a line matching ${re}`, timeoutMs);
    return find()!;
  }

  /** Writes one JSON command line to the process's stdin. */
  async send(cmd: Record<string, unknown>): Promise<void> {
    await this.#writer.write(new TextEncoder().encode(JSON.stringify(cmd) + "\n"));
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 5000): Promise<Deno.CommandStatus> {
    this.#writer.close().catch(() => {});
    try {
      this.#child.kill("SIGTERM");
    } catch {
      // Already gone.
    }
    const timer = setTimeout(() => {
      try {
        this.#child.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    }, graceMs);
    const st = await this.status;
    clearTimeout(timer);
    return st;
  }

  output(lastN = 40): string {
    return this.lines.slice(-lastN).map((l) => `    ${this.name}| ${l}`).join("\n");
  }

  #until(pred: () => boolean, what: string, timeoutMs: number): Promise<void> {
    if (!pred() && this.#exited) {
      return Promise.reject(new Error(this.#exitedBefore(what)));
    }
    return this.#conditions.until(pred, what, timeoutMs);
  }

  #check(): void {
    this.#conditions.check();
    if (this.#exited) {
      this.#conditions.failAll((what) => this.#exitedBefore(what));
    }
  }

  #exitedBefore(what: string): string {
    return `${this.name} exited before ${what}\n${this.output()}`;
  }
}

/** Prints a structured message for the parent (`@{json}` on stdout). */
export function emit(ev: string, data: Record<string, unknown> = {}): void {
  console.log("@" + JSON.stringify({ ev, ...data }));
}

/** Lines of JSON commands from the parent on stdin. */
export async function* commands(): AsyncGenerator<Record<string, unknown>> {
  for await (const line of readLines(Deno.stdin.readable)) {
    try {
      yield JSON.parse(line);
    } catch {
      // Not a command.
    }
  }
}

/**
 * Resolves on SIGTERM or SIGINT. Call it before announcing the server, so no
 * signal falls between.
 */
export function untilStopped(): Promise<void> {
  return new Promise((resolve) => {
    for (const sig of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(sig, () => resolve());
  });
}
