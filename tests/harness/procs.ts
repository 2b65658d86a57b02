/**
 * Real baton processes for integration tests: the relay and runners run as
 * subprocesses of `main.ts`, exactly as a user starts them.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { readLines } from "../../runner/_lines.ts";

/** The repository root (where deno.json and main.ts live). */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const MAIN = join(ROOT, "main.ts");

/** Temporary folders made by `tempDir`, removed when the test module ends. */
const made = new Set<string>();
globalThis.addEventListener("unload", () => {
  for (const dir of made) {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // Already gone, or a process is still writing there: it stays.
    }
  }
});

/** A temporary folder, removed when the test module that made it ends. */
export async function tempDir(prefix = "baton-test-"): Promise<string> {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix }));
  made.add(dir);
  return dir;
}

/** Options of {@linkcode BatonProcess.start}. */
export interface ProcessOptions {
  args: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Echo the output live (set BATON_TEST_VERBOSE=1 to see every process). */
  verbose?: boolean;
  /** `deno` arguments before the subcommand (default: run main.ts of this tree). */
  program?: string[];
}

/** `deno` arguments that run baton from this source tree. */
const SOURCE_PROGRAM = ["run", "-A", "--quiet", "--config", join(ROOT, "deno.json"), MAIN];

/** A `baton` subprocess with its output captured line by line. */
export class BatonProcess {
  readonly lines: string[] = [];
  readonly #child: Deno.ChildProcess;
  readonly #watchers: { re: RegExp; resolve: (m: RegExpMatchArray) => void }[] = [];
  readonly status: Promise<Deno.CommandStatus>;
  readonly name: string;

  private constructor(child: Deno.ChildProcess, name: string, verbose: boolean) {
    this.#child = child;
    this.name = name;
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      for await (const line of readLines(stream)) {
        this.lines.push(line);
        if (verbose) console.error(`  [${name}] ${line}`);
        for (const w of [...this.#watchers]) {
          const m = line.match(w.re);
          if (m) {
            this.#watchers.splice(this.#watchers.indexOf(w), 1);
            w.resolve(m);
          }
        }
      }
    };
    const done = Promise.all([pump(child.stdout), pump(child.stderr)]);
    this.status = child.status.then(async (st) => {
      await done.catch(() => {});
      return st;
    });
  }

  static start(name: string, options: ProcessOptions): BatonProcess {
    const verbose = options.verbose ?? Deno.env.get("BATON_TEST_VERBOSE") === "1";
    const child = new Deno.Command(Deno.execPath(), {
      args: [...(options.program ?? SOURCE_PROGRAM), ...options.args],
      env: options.env ?? {},
      clearEnv: true,
      cwd: options.cwd ?? ROOT,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    return new BatonProcess(child, name, verbose);
  }

  get pid(): number {
    return this.#child.pid;
  }

  /** Resolves with the first output line (past or future) matching `re`. */
  waitFor(re: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    for (const line of this.lines) {
      const m = line.match(re);
      if (m) return Promise.resolve(m);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#watchers.splice(this.#watchers.indexOf(w), 1);
        reject(
          new Error(
            `${this.name}: no line matching ${re} within ${timeoutMs} ms\n${this.output()}`,
          ),
        );
      }, timeoutMs);
      const w = {
        re,
        resolve: (m: RegExpMatchArray) => {
          clearTimeout(timer);
          resolve(m);
        },
      };
      this.#watchers.push(w);
    });
  }

  /** Counts output lines matching `re`. */
  count(re: RegExp): number {
    return this.lines.filter((l) => re.test(l)).length;
  }

  kill(signal: Deno.Signal = "SIGTERM"): void {
    try {
      this.#child.kill(signal);
    } catch {
      // Already gone.
    }
  }

  /** SIGTERM, then SIGKILL if it is still running after `graceMs`. */
  async stop(graceMs = 10_000): Promise<Deno.CommandStatus> {
    this.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), graceMs);
    const st = await this.status;
    clearTimeout(timer);
    return st;
  }

  output(): string {
    return this.lines.map((l) => `    ${this.name}| ${l}`).join("\n");
  }
}

/**
 * The whole environment of a baton subprocess of a test (they start with
 * `clearEnv`): a private HOME, PATH, and what reaching the network and
 * Deno's cache needs. Nothing else of the test runner's environment leaks
 * in: not a developer's BATON_* variables, nor what an in-process relay
 * set for itself.
 */
export function baseEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {
    HOME: home,
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    DENO_DIR: Deno.env.get("DENO_DIR") ?? join(Deno.env.get("HOME") ?? "/root", ".cache", "deno"),
    NO_COLOR: "1",
  };
  for (const k of PASSED_THROUGH) {
    const v = Deno.env.get(k);
    if (v) env[k] = v;
  }
  return { ...env, ...extra };
}

/** Variables of the test runner's environment that baton subprocesses keep. */
const PASSED_THROUGH = [
  "LANG",
  "LC_ALL",
  "TMPDIR",
  "DENO_TLS_CA_STORE",
  "DENO_CERT",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "NPM_CONFIG_REGISTRY",
  "npm_config_registry",
];

/** A relay subprocess on its own data folder. */
export class RelayProcess {
  proc!: BatonProcess;
  url = "";
  port = 0;
  #program: string[] | undefined;
  #cwd: string | undefined;

  private constructor(
    readonly dataDir: string,
    readonly home: string,
    readonly env: Record<string, string>,
  ) {}

  /** Starts `baton relay` on a free port (or `port`) and waits until it listens. */
  static async start(
    options: {
      dataDir?: string;
      home?: string;
      port?: number;
      env?: Record<string, string>;
      args?: string[];
      /** `deno` arguments before the subcommand (default: this source tree). */
      program?: string[];
      cwd?: string;
    } = {},
  ): Promise<RelayProcess> {
    const home = options.home ?? await tempDir("baton-relay-home-");
    const dataDir = options.dataDir ?? join(home, "relay-data");
    const r = new RelayProcess(dataDir, home, options.env ?? {});
    r.#program = options.program;
    r.#cwd = options.cwd;
    await r.#launch(options.port ?? 0, options.args ?? []);
    return r;
  }

  async #launch(port: number, args: string[]): Promise<void> {
    this.proc = BatonProcess.start("relay", {
      args: ["relay", "--port", String(port), "--data-dir", this.dataDir, ...args],
      env: baseEnv(this.home, this.env),
      ...(this.#program ? { program: this.#program } : {}),
      ...(this.#cwd ? { cwd: this.#cwd } : {}),
    });
    const m = await Promise.race([
      this.proc.waitFor(/listening on (http:\/\/[^\s]+)/),
      this.proc.status.then((st) => {
        throw new Error(`relay exited (${st.code}) before listening\n${this.proc.output()}`);
      }),
    ]);
    this.url = m[1]!;
    this.port = Number(new URL(this.url).port);
  }

  /** Starts the relay again on the same port and data folder (after a stop or kill). */
  async restart(args: string[] = []): Promise<void> {
    await this.#launch(this.port, args);
  }

  kill(signal: Deno.Signal = "SIGKILL"): Promise<Deno.CommandStatus> {
    this.proc.kill(signal);
    return this.proc.status;
  }

  stop(): Promise<Deno.CommandStatus> {
    return this.proc.stop();
  }
}

/** Options of {@linkcode startRunner}. */
export interface RunnerOptions {
  relayUrl: string;
  apiKey: string;
  /** The runner's HOME (created when absent). */
  home?: string;
  env?: Record<string, string>;
  args?: string[];
  /** `deno` arguments before the subcommand (default: this source tree). */
  program?: string[];
  cwd?: string;
}

/** A `baton runner` subprocess with its HOME. */
export interface RunnerProcess {
  proc: BatonProcess;
  home: string;
  /** Resolves once the daemon says it is connected (counting reconnects: the nth time). */
  connected(nth?: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<Deno.CommandStatus>;
}

/** Starts `baton runner` against a relay and waits until it is connected. */
export async function startRunner(options: RunnerOptions): Promise<RunnerProcess> {
  const home = options.home ?? await tempDir("baton-runner-home-");
  const proc = BatonProcess.start("runner", {
    args: ["runner", ...(options.args ?? [])],
    ...(options.program ? { program: options.program } : {}),
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: baseEnv(home, {
      BATON_RELAY_URL: options.relayUrl,
      BATON_API_KEY: options.apiKey,
      ...options.env,
    }),
  });
  const r: RunnerProcess = {
    proc,
    home,
    async connected(nth = 1, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (proc.count(/connected to relay as runner/) < nth) {
        if (Date.now() > deadline) {
          throw new Error(`runner did not connect (${nth}) in time\n${proc.output()}`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    stop: () => proc.stop(),
  };
  await r.connected();
  return r;
}

/** Runs `baton <args>` with `env` only; its exit code and output. */
export async function baton(args: string[], env: Record<string, string>) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--quiet",
      "--config",
      join(ROOT, "deno.json"),
      join(ROOT, "main.ts"),
      ...args,
    ],
    env,
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Whether process `pid` still runs (Linux: its /proc entry). */
export function processAlive(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}
