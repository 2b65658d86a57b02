/**
 * The `baton` command line as a user meets it: help, usage errors, and the
 * relay, setup, runner and up commands run as real subprocesses.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import denoJson from "../deno.json" with { type: "json" };
import { baseEnv, BatonProcess, RelayProcess, ROOT, tempDir } from "./harness/procs.ts";
import { json, signIn, signUp } from "./harness/client.ts";
import type { RunnerInfo } from "../shared/protocol.ts";

const MAIN = join(ROOT, "main.ts");
const CONNECTED = /connected to relay as runner/;

// ---------------------------------------------------------------------------
// Helpers

/** What a one-shot `baton` command printed, and how it ended. */
interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `baton <args>` to completion with stdout and stderr kept apart (the
 * command line of {@linkcode BatonProcess.start}); killed after `timeoutMs`.
 */
async function run(
  args: string[],
  env: Record<string, string>,
  options: { stdin?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), options.timeoutMs ?? 30_000);
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--quiet", "--config", join(ROOT, "deno.json"), MAIN, ...args],
      env,
      clearEnv: true,
      cwd: ROOT,
      stdin: options.stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
      signal: abort.signal,
    }).spawn();
    if (options.stdin !== undefined) {
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode(options.stdin));
      await writer.close();
    }
    const out = await child.output();
    assert.ok(!abort.signal.aborted, `baton ${args.join(" ")} did not finish in time`);
    const text = new TextDecoder();
    return { code: out.code, stdout: text.decode(out.stdout), stderr: text.decode(out.stderr) };
  } finally {
    clearTimeout(timer);
  }
}

/** Asserts a usage error: exit code 2, nothing on stdout, one line on stderr; returns the line. */
function assertUsageError(res: RunResult, re: RegExp): string {
  const detail = JSON.stringify(res);
  assert.equal(res.code, 2, detail);
  assert.equal(res.stdout, "", detail);
  const lines = res.stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, `expected one line on stderr, got:\n${res.stderr}`);
  assert.match(lines[0]!, re);
  return lines[0]!;
}

/** Asserts a help text: exit code 0, nothing on stderr, every string in `mentions` on stdout. */
function assertHelp(res: RunResult, mentions: string[]): void {
  assert.equal(res.code, 0, JSON.stringify(res));
  assert.equal(res.stderr, "");
  for (const m of mentions) assert.ok(res.stdout.includes(m), `help lacks ${m}:\n${res.stdout}`);
}

/** Subprocesses and folders of one test, released whatever happens. */
class Scope {
  readonly procs: BatonProcess[] = [];
  readonly #dirs: string[] = [];

  async dir(prefix = "baton-cli-test-"): Promise<string> {
    const d = await tempDir(prefix);
    this.#dirs.push(d);
    return d;
  }

  /** Starts `baton <args>`; it is stopped when the test ends. */
  start(name: string, args: string[], env: Record<string, string>): BatonProcess {
    const p = BatonProcess.start(name, { args, env });
    this.procs.push(p);
    return p;
  }

  /** Starts `baton relay` through the harness; it is stopped when the test ends. */
  async relay(options: Parameters<typeof RelayProcess.start>[0] = {}): Promise<RelayProcess> {
    const home = options.home ?? await this.dir("baton-relay-home-");
    const relay = await RelayProcess.start({ ...options, home });
    this.procs.push(relay.proc);
    return relay;
  }

  async release(failed: boolean): Promise<void> {
    for (const p of this.procs) await p.stop();
    if (failed) {
      for (const p of this.procs) console.error(`--- ${p.name}\n${p.output()}`);
    }
    for (const d of this.#dirs) await Deno.remove(d, { recursive: true }).catch(() => {});
  }
}

/** Runs `fn` with a {@linkcode Scope} that is released at the end, printing output on failure. */
async function withScope(fn: (scope: Scope) => Promise<void>): Promise<void> {
  const scope = new Scope();
  let failed = false;
  try {
    await fn(scope);
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    await scope.release(failed);
  }
}

/** The first output line matching `re`; fails at once if the process exits first. */
async function line(proc: BatonProcess, re: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
  let exited = false;
  const found = proc.waitFor(re, timeoutMs);
  const early = proc.status.then((st) => {
    exited = true;
    return st;
  });
  const winner = await Promise.race([found, early]);
  if (exited && !Array.isArray(winner)) {
    // The line may still have been the last one printed before exiting.
    const m = proc.lines.map((l) => l.match(re)).find((x) => x);
    if (m) return m;
    const st = winner as Deno.CommandStatus;
    throw new Error(`${proc.name} exited (${st.code}) before printing ${re}\n${proc.output()}`);
  }
  return winner as RegExpMatchArray;
}

/**
 * A pattern that matches only its `n`th matching line: `BatonProcess.waitFor`
 * tries each line (past, then future) once, so this waits for the nth one.
 */
class NthLine extends RegExp {
  #seen = 0;
  constructor(re: RegExp, readonly n: number) {
    super(re.source, re.flags);
  }
  override [Symbol.match](s: string): RegExpMatchArray | null {
    const m = super[Symbol.match](s);
    return m && ++this.#seen >= this.n ? m : null;
  }
}

/** Resolves with the exit status if the process ends within `ms`, else fails. */
async function exitsWithin(proc: BatonProcess, ms: number): Promise<Deno.CommandStatus> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${proc.name} still running after ${ms} ms\n${proc.output()}`)),
      ms,
    );
  });
  try {
    return await Promise.race([proc.status, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The parsed JSON body of a response, with its status checked. */
async function body<T = Record<string, unknown>>(res: Response, status = 200): Promise<T> {
  const text = await res.text();
  assert.equal(res.status, status, text);
  return JSON.parse(text);
}

async function readJsonFile(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await Deno.readTextFile(path));
}

/** The runner id kept in `<home>/.baton/runner.json`. */
async function runnerIdOf(home: string): Promise<string> {
  const { runnerId } = await readJsonFile(join(home, ".baton", "runner.json"));
  assert.equal(typeof runnerId, "string");
  return runnerId as string;
}

/** The permission bits of a file. */
/** Every process below `pid`, from /proc. */
function descendants(pid: number): number[] {
  const out: number[] = [];
  for (const task of Deno.readDirSync(`/proc/${pid}/task`)) {
    const text = Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/children`);
    for (const child of text.split(" ").filter(Boolean).map(Number)) {
      out.push(child, ...descendants(child));
    }
  }
  return out;
}

/** The environment a process was started with, from /proc. */
function environOf(pid: number): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of Deno.readTextFileSync(`/proc/${pid}/environ`).split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

async function mode(path: string): Promise<number> {
  return (await Deno.stat(path)).mode! & 0o777;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

// ---------------------------------------------------------------------------
// First run

Deno.test("the first deno task on a new machine prints no warning about npm build scripts", async () => {
  // Before a task, `deno task` installs the npm packages of deno.json, as
  // `deno install` does, and warns about install scripts it skips. It warns
  // once per project folder (the marker it leaves in the npm cache is keyed
  // by the folder's path), so the config copied to a new folder meets the
  // packages as a fresh clone does, from the cache, with nothing to download.
  const dir = await tempDir("baton-first-install-");
  try {
    await Deno.mkdir(join(dir, "web", "app"), { recursive: true });
    for (const file of ["deno.json", "deno.lock", "web/app/deno.json"]) {
      await Deno.copyFile(join(ROOT, file), join(dir, file));
    }
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["install", "--frozen", "--cached-only"],
      cwd: dir,
      env: { NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    assert.doesNotMatch(stderr, /Ignored build scripts|lifecycle scripts/i);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// Help and usage errors

Deno.test("baton prints its help and version and exits 0", async (t) => {
  const home = await tempDir();
  const env = baseEnv(home);
  try {
    await t.step("--help lists the commands", async () => {
      assertHelp(await run(["--help"], env), ["Usage: baton", "up", "relay", "runner", "setup"]);
    });

    await t.step("--version prints the version from deno.json", async () => {
      for (const flag of ["--version", "-V"]) {
        const res = await run([flag], env);
        assert.equal(res.code, 0);
        assert.equal(res.stdout.trim(), `baton ${denoJson.version}`);
        assert.equal(res.stderr, "");
      }
    });

    await t.step("help relay prints the relay's help", async () => {
      assertHelp(await run(["help", "relay"], env), ["Usage: baton relay", "--port"]);
    });

    const flags: Record<string, string[]> = {
      relay: ["--port", "--host", "--data-dir", "--base-url", "--allow-signup", "--trust-proxy"],
      runner: ["--name", "--safe-mode", "--no-mcp", "--no-plugins", "--no-hooks", "--no-relay"],
      up: ["--port", "--host", "--data-dir", "--base-url", "--email", "--no-runner", "--safe-mode"],
      setup: ["--relay", "--email", "--name", "--password-stdin"],
    };
    for (const [cmd, mentions] of Object.entries(flags)) {
      await t.step(`${cmd} --help lists the command's flags`, async () => {
        assertHelp(await run([cmd, "--help"], env), [`Usage: baton ${cmd}`, "--help", ...mentions]);
      });
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("baton rejects command-line mistakes with exit code 2 and one line", async (t) => {
  const home = await tempDir();
  const dataDir = join(home, "relay-data");
  // Where a value under test is valid after all, the relay must not take a fixed port.
  const relay = ["relay", "--port", "0", "--data-dir", dataDir];
  const cases: { name: string; args: string[]; env?: Record<string, string>; re: RegExp }[] = [
    { name: "an unknown command", args: ["nope"], re: /unknown command: 'nope'/ },
    { name: "an unknown flag", args: [...relay, "--nope"], re: /--nope/ },
    { name: "an out-of-range port", args: ["relay", "--port", "99999"], re: /--port.*99999/ },
    { name: "a port that is not a number", args: ["relay", "--port", "abc"], re: /--port.*abc/ },
    {
      name: "a base URL that is not a URL",
      args: [...relay, "--base-url", "notaurl"],
      re: /--base-url.*notaurl/,
    },
    {
      name: "BATON_PORT that is not a number",
      args: ["relay"],
      env: { BATON_PORT: "abc" },
      re: /abc/,
    },
    {
      name: "BATON_ALLOW_SIGNUP that is not 0 or 1",
      args: relay,
      env: { BATON_ALLOW_SIGNUP: "maybe" },
      re: /BATON_ALLOW_SIGNUP.*maybe/,
    },
    {
      name: "BATON_RELAY_EVENT_BUFFER_SIZE of 0",
      args: relay,
      env: { BATON_RELAY_EVENT_BUFFER_SIZE: "0" },
      re: /BATON_RELAY_EVENT_BUFFER_SIZE/,
    },
    {
      name: "BATON_RETENTION_MAX_AGE_DAYS that is not a number of days",
      args: relay,
      env: { BATON_RETENTION_MAX_AGE_DAYS: "-1" },
      re: /Invalid BATON_RETENTION_MAX_AGE_DAYS: '-1' \(expected an integer from 0 to 36500\)/,
    },
    {
      name: "BATON_SHUTDOWN_DRAIN_MS in seconds",
      args: relay,
      env: { BATON_SHUTDOWN_DRAIN_MS: "30s" },
      re: /Invalid BATON_SHUTDOWN_DRAIN_MS: '30s'/,
    },
    {
      name: "BATON_RETENTION_USER_MAX_MB with a unit",
      args: relay,
      env: { BATON_RETENTION_USER_MAX_MB: "2GB" },
      re: /Invalid BATON_RETENTION_USER_MAX_MB: '2GB'/,
    },
    {
      name: "BATON_RETENTION_MAX_MB of up that is not a number",
      args: ["up", "--port", "0", "--data-dir", dataDir, "--no-runner"],
      env: { BATON_RETENTION_MAX_MB: "lots" },
      re: /Invalid BATON_RETENTION_MAX_MB: 'lots'/,
    },
    { name: "a stray positional argument", args: [...relay, "extra"], re: /extra/ },
    {
      name: "an allowed host with a path",
      args: [...relay, "--allowed-hosts", "relay.lan,relay.lan/x"],
      re: /--allowed-hosts.*relay\.lan\/x/,
    },
    {
      name: "BATON_ALLOWED_HOSTS with a URL that is not http(s)",
      args: relay,
      env: { BATON_ALLOWED_HOSTS: "ftp://relay.lan" },
      re: /--allowed-hosts.*ftp/,
    },
    {
      name: "BATON_SLEEP_AFTER that is not a duration",
      args: ["runner"],
      env: {
        BATON_RELAY_URL: "http://127.0.0.1:9",
        BATON_API_KEY: "bk_x",
        BATON_SLEEP_AFTER: "soon",
      },
      re: /Invalid BATON_SLEEP_AFTER: 'soon'/,
    },
    {
      name: "a sandbox mode that does not exist",
      args: ["runner", "--sandbox", "strict"],
      env: { BATON_RELAY_URL: "http://127.0.0.1:9", BATON_API_KEY: "bk_x" },
      re: /Invalid --sandbox: 'strict' \(expected none, basic or full\)/,
    },
    {
      name: "BATON_SANDBOX that is not a mode",
      args: ["runner"],
      env: { BATON_RELAY_URL: "http://127.0.0.1:9", BATON_API_KEY: "bk_x", BATON_SANDBOX: "on" },
      re: /Invalid BATON_SANDBOX: 'on'/,
    },
    {
      name: "up with a sandbox mode that does not exist",
      args: ["up", "--sandbox", "x"],
      re: /--sandbox/,
    },
    { name: "a flag without its value", args: ["relay", "--port"], re: /--port/ },
    { name: "an unknown flag of up", args: ["up", "--nope"], re: /--nope/ },
    { name: "an unknown flag of setup", args: ["setup", "--nope"], re: /--nope/ },
    {
      name: "setup without --email off a terminal",
      args: ["setup", "--relay", "http://127.0.0.1:9"],
      env: { BATON_PASSWORD: "some password" },
      re: /--email/,
    },
    {
      name: "setup without a password off a terminal",
      args: ["setup", "--relay", "http://127.0.0.1:9", "--email", "a@example.com"],
      re: /password/i,
    },
  ];
  try {
    for (const c of cases) {
      await t.step(`${c.name} is a usage error`, async () => {
        assertUsageError(await run(c.args, baseEnv(home, c.env)), c.re);
      });
    }
    await t.step("none of them started a relay", async () => {
      assert.equal(await exists(join(dataDir, "relay.db")), false);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("baton runner refuses to start without a usable relay configuration", async (t) => {
  const home = await tempDir();
  const batonDir = join(home, ".baton");
  const configPath = join(batonDir, "config.json");
  const relayEnv = { BATON_RELAY_URL: "http://127.0.0.1:9", BATON_API_KEY: "bk_unused" };
  const off = /relay is turned off/;
  try {
    await t.step("no relay URL points to BATON_RELAY_URL and setup", async () => {
      assertUsageError(await run(["runner"], baseEnv(home)), /BATON_RELAY_URL.*setup/);
    });

    await t.step("BATON_NO_RELAY=1 says the relay is off", async () => {
      assertUsageError(
        await run(["runner"], baseEnv(home, { ...relayEnv, BATON_NO_RELAY: "1" })),
        off,
      );
    });

    await t.step("--safe-mode leaves the relay on (it skips MCP, plugins and hooks)", async () => {
      assertUsageError(
        await run(["runner", "--safe-mode"], baseEnv(home)),
        /BATON_RELAY_URL.*setup/,
      );
    });

    await t.step("--no-relay says the relay is off", async () => {
      assertUsageError(await run(["runner", "--no-relay"], baseEnv(home, relayEnv)), off);
    });

    await t.step('relayUrl "off" in config.json says the relay is off', async () => {
      await Deno.mkdir(batonDir, { recursive: true });
      await Deno.writeTextFile(configPath, JSON.stringify({ relayUrl: "off", apiKey: "bk_x" }));
      try {
        assertUsageError(await run(["runner"], baseEnv(home)), off);
      } finally {
        await Deno.remove(configPath);
      }
    });

    await t.step("a relay URL without an API key is a usage error", async () => {
      const env = baseEnv(home, { BATON_RELAY_URL: relayEnv.BATON_RELAY_URL });
      assertUsageError(await run(["runner"], env), /API key/);
    });

    await t.step("a config.json that is not JSON is named in a one-line message", async () => {
      await Deno.mkdir(batonDir, { recursive: true });
      try {
        for (const text of ["{ not json\n", "not json\n"]) {
          await Deno.writeTextFile(configPath, text);
          const res = await run(["runner"], baseEnv(home, relayEnv));
          const msg = assertUsageError(res, /config/);
          assert.ok(msg.includes(configPath), msg);
        }
      } finally {
        await Deno.remove(configPath);
      }
    });

    await t.step("no runner id was created by any of them", async () => {
      assert.equal(await exists(join(batonDir, "runner.json")), false);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

// ---------------------------------------------------------------------------
// baton relay

Deno.test("baton relay listens on a free port, stops on a signal and keeps its data", async (t) => {
  await withScope(async (scope) => {
    const home = await scope.dir();
    const dataDir = join(home, "data");
    const env = baseEnv(home);

    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      await t.step(`it serves /health and exits 0 promptly on ${signal}`, async () => {
        const relay = scope.start("relay", ["relay", "--port", "0", "--data-dir", dataDir], env);
        const [, url, port] = await line(relay, /listening on (http:\/\/127\.0\.0\.1:(\d+))/);
        assert.notEqual(Number(port), 0);
        assert.deepEqual(await body(await fetch(`${url}/health`)), { status: "ok" });
        assert.ok(await exists(join(dataDir, "relay.db")));
        relay.kill(signal);
        const st = await exitsWithin(relay, 5000);
        assert.equal(st.code, 0, relay.output());
        assert.equal(st.signal, null);
      });
    }

    // Deno's first signal listener takes ~0.5 ms to put in place: when the
    // relay said it was listening before that, half of these signals killed it
    // (exit code 130) instead of stopping it.
    await t.step("a SIGINT sent the moment it says it is listening still exits 0", async () => {
      for (let i = 0; i < 4; i++) {
        const relay = scope.start("relay", ["relay", "--port", "0", "--data-dir", dataDir], env);
        await line(relay, /listening on/);
        relay.kill("SIGINT");
        const st = await exitsWithin(relay, 5000);
        assert.equal(st.code, 0, `attempt ${i + 1}: ${relay.output()}`);
      }
    });

    await t.step("an account survives a restart on the same data dir", async () => {
      const first = await scope.relay({ home, dataDir });
      const user = await signUp(first.url, { email: "keep@example.com" });
      assert.equal((await first.stop()).code, 0);
      const second = await scope.relay({ home, dataDir });
      const cookie = await signIn(second.url, user.email, user.password);
      assert.match(cookie, /baton/);
      const res = await fetch(`${second.url}/api/runners`, { headers: { cookie } });
      assert.deepEqual(await body(res), []);
    });
  });
});

// ---------------------------------------------------------------------------
// baton setup, then baton runner from the saved config

Deno.test("baton setup saves an API key that baton runner then uses", async (t) => {
  await withScope(async (scope) => {
    const relay = await scope.relay();
    const email = "setup@example.com";
    const password = "correct horse battery";
    const home = await scope.dir("baton-setup-home-");
    const configPath = join(home, ".baton", "config.json");
    let apiKey = "";

    await t.step("setup creates the account and saves relayUrl and apiKey (0600)", async () => {
      await Deno.mkdir(join(home, ".baton"));
      await Deno.writeTextFile(configPath, JSON.stringify({ runnerName: "kept-name", other: 42 }));
      const res = await run(
        ["setup", "--relay", relay.url, "--email", email, "--name", "Setup User"],
        baseEnv(home, { BATON_PASSWORD: password }),
      );
      assert.equal(res.code, 0, JSON.stringify(res));
      assert.match(res.stdout, /Signed in/);
      const config = await readJsonFile(configPath);
      assert.equal(config.relayUrl, relay.url);
      assert.equal(typeof config.apiKey, "string");
      assert.match(config.apiKey as string, /^bk_/);
      assert.equal(config.runnerName, "kept-name", "existing keys are kept");
      assert.equal(config.other, 42, "existing keys are kept");
      assert.equal(await mode(configPath), 0o600);
      apiKey = config.apiKey as string;
      const me = await fetch(`${relay.url}/api/runners`, { headers: { "x-api-key": apiKey } });
      assert.deepEqual(await body(me), []);
    });

    await t.step(
      "setup with a wrong password exits 1 with one line and saves nothing",
      async () => {
        const other = await scope.dir("baton-setup-home-");
        const res = await run(
          ["setup", "--relay", relay.url, "--email", email],
          baseEnv(other, { BATON_PASSWORD: "wrong password!" }),
        );
        assert.equal(res.code, 1, JSON.stringify(res));
        assert.equal(res.stderr.trimEnd().split("\n").length, 1, res.stderr);
        assert.match(res.stderr, /^baton setup: .*(invalid|password)/i);
        assert.equal(await exists(join(other, ".baton", "config.json")), false);
      },
    );

    await t.step("setup exits 1 with one line when the relay cannot be reached", async () => {
      const other = await scope.dir("baton-setup-home-");
      // A port that was free a moment ago: nothing listens there.
      const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const closed = `http://127.0.0.1:${listener.addr.port}`;
      listener.close();
      const res = await run(
        ["setup", "--relay", closed, "--email", email],
        baseEnv(other, { BATON_PASSWORD: password }),
      );
      assert.equal(res.code, 1, JSON.stringify(res));
      assert.equal(res.stderr.trimEnd().split("\n").length, 1, res.stderr);
      assert.match(res.stderr, /cannot reach the relay/);
      assert.equal(await exists(join(other, ".baton", "config.json")), false);
    });

    await t.step("setup --password-stdin reads the password from stdin", async () => {
      const other = await scope.dir("baton-setup-home-");
      const res = await run(
        ["setup", "--relay", relay.url, "--email", email, "--password-stdin"],
        // The variable is wrong on purpose: stdin wins.
        baseEnv(other, { BATON_PASSWORD: "wrong password!" }),
        { stdin: password + "\n" },
      );
      assert.equal(res.code, 0, JSON.stringify(res));
      const config = await readJsonFile(join(other, ".baton", "config.json"));
      assert.equal(config.relayUrl, relay.url);
      assert.match(config.apiKey as string, /^bk_/);
      assert.notEqual(config.apiKey, apiKey);
    });

    await t.step("runner takes relayUrl and apiKey from config.json and keeps its id", async () => {
      assert.ok(apiKey, "needs the first step");
      const api = (path: string) =>
        fetch(`${relay.url}${path}`, { headers: { "x-api-key": apiKey } });
      const env = baseEnv(home);
      assert.equal(env.BATON_RELAY_URL, undefined);
      assert.equal(env.BATON_API_KEY, undefined);

      const first = scope.start("runner", ["runner"], env);
      await line(first, CONNECTED);
      const runnerId = await runnerIdOf(home);
      let runners = await body<RunnerInfo[]>(await api("/api/runners"));
      assert.equal(runners.length, 1);
      assert.equal(runners[0]!.id, runnerId);
      assert.equal(runners[0]!.name, "kept-name");
      assert.equal(runners[0]!.connected, true);
      assert.equal((await first.stop()).code, 0, first.output());

      const second = scope.start("runner", ["runner"], env);
      await line(second, CONNECTED);
      assert.match(second.lines.find((l) => CONNECTED.test(l))!, new RegExp(runnerId));
      assert.equal(await runnerIdOf(home), runnerId);
      runners = await body<RunnerInfo[]>(await api("/api/runners"));
      assert.deepEqual(runners.map((r) => [r.id, r.connected]), [[runnerId, true]]);
      assert.equal((await second.stop()).code, 0, second.output());
    });
  });
});

// ---------------------------------------------------------------------------
// Stop and restart requests

Deno.test("baton runner restarts and stops when the relay asks it to", async (t) => {
  await withScope(async (scope) => {
    const relay = await scope.relay();
    const user = await signUp(relay.url);
    const home = await scope.dir("baton-runner-home-");
    const runner = scope.start(
      "runner",
      ["runner"],
      baseEnv(home, { BATON_RELAY_URL: relay.url, BATON_API_KEY: user.apiKey }),
    );
    let exited = false;
    runner.status.then(() => exited = true);
    await line(runner, CONNECTED);
    const runnerId = await runnerIdOf(home);

    await t.step("a restart request brings the daemon back with the same id", async () => {
      const res = await user.api("/api/runners/restart", json("POST", { runnerId }));
      assert.deepEqual(await body(res), { ok: true });
      await line(runner, new NthLine(CONNECTED, 2));
      assert.equal(runner.count(/restarting the daemon as requested/), 1, runner.output());
      const lines = runner.lines.filter((l) => CONNECTED.test(l));
      assert.equal(lines.length, 2);
      for (const l of lines) assert.ok(l.includes(runnerId), l);
      assert.equal(exited, false, "the runner process is still running");
      const runners = await body<RunnerInfo[]>(await user.api("/api/runners"));
      assert.deepEqual(runners.map((r) => [r.id, r.connected]), [[runnerId, true]]);
    });

    await t.step("a stop request makes baton runner exit 0 by itself", async () => {
      const res = await user.api("/api/runners/stop", json("POST", { runnerId }));
      assert.deepEqual(await body(res), { ok: true });
      const st = await exitsWithin(runner, 10_000);
      assert.equal(st.code, 0, runner.output());
      assert.equal(st.signal, null);
      assert.equal(runner.count(/runner stopped/), 1, runner.output());
    });
  });
});

// ---------------------------------------------------------------------------
// baton up

Deno.test("baton up starts a relay with an owner account and a local runner", async (t) => {
  await withScope(async (scope) => {
    const home = await scope.dir("baton-up-home-");
    const dataDir = join(home, ".baton", "relay");
    const password = "owner password 1";
    const env = baseEnv(home, { BATON_OWNER_PASSWORD: password });
    let runnerId = "";
    let tokenFile = "";

    /** Starts `baton up`, waits until it is up (and its runner connected); returns it and its URL. */
    const up = async (upEnv: Record<string, string>, args: string[] = []) => {
      const proc = scope.start("up", ["up", "--port", "0", ...args], upEnv);
      const [, url] = await line(proc, /listening on (http:\/\/\S+)/);
      await line(proc, /baton is up/);
      if (!args.includes("--no-runner")) await line(proc, CONNECTED);
      return { proc, url: url! };
    };

    /** SIGINT, then exit code 0 with the relay gone. */
    const interrupt = async (proc: BatonProcess, url: string) => {
      proc.kill("SIGINT");
      const st = await exitsWithin(proc, 15_000);
      assert.equal(st.code, 0, proc.output());
      assert.equal(st.signal, null);
      await assert.rejects(fetch(`${url}/health`), "the relay is down");
    };

    /** The runners the owner sees, signed in with a cookie as the web client is. */
    const runnersOf = async (url: string, email: string, pw: string) => {
      const cookie = await signIn(url, email, pw);
      const res = await fetch(`${url}/api/runners`, { headers: { cookie } });
      return await body<RunnerInfo[]>(res);
    };

    await t.step("the first start creates the owner and connects the local runner", async () => {
      const { proc, url } = await up(env);
      assert.equal(proc.count(/Created the owner account owner@baton\.local\./), 1, proc.output());
      assert.equal(await exists(join(dataDir, "initial-password")), false);
      assert.equal(proc.count(/with the password in/), 0, proc.output());
      const runners = await runnersOf(url, "owner@baton.local", password);
      assert.equal(runners.length, 1);
      assert.equal(runners[0]!.connected, true);
      runnerId = runners[0]!.id;
      assert.equal(await runnerIdOf(home), runnerId);
      tokenFile = await Deno.readTextFile(join(dataDir, "local-runner.json"));
      assert.equal(typeof JSON.parse(tokenFile).apiKey, "string");
      assert.equal(await mode(join(dataDir, "local-runner.json")), 0o600);
      assert.equal(await mode(dataDir), 0o700);
      for (const file of ["secret", "relay.db", "relay.db-wal", "relay.db-shm"]) {
        assert.equal(await mode(join(dataDir, file)), 0o600, file);
      }
      // The local runner gets its relay and token, not the owner's password
      // nor what the relay set for itself (DENO_USE_WRITEV).
      const children = descendants(proc.pid).map(environOf);
      const token = JSON.parse(tokenFile).apiKey;
      // The daemon gets its token on stdin: no process has it in its
      // environment (/proc/<pid>/environ is readable by the agents' tools).
      assert.ok(children.length >= 2, `${children.length} processes under baton up`);
      for (const env of children) {
        assert.equal(Object.values(env).some((v) => v.includes(token)), false, "token in an env");
        assert.equal(env.BATON_API_KEY, undefined);
        assert.equal(env.BATON_OWNER_PASSWORD, undefined);
        assert.equal(env.DENO_USE_WRITEV, undefined);
      }
      assert.ok(children.some((e) => e.BATON_RELAY_URL === url), "no child has the relay URL");
      await interrupt(proc, url);
    });

    await t.step(
      "a second start reuses the account, the runner token and the runner id",
      async () => {
        assert.ok(runnerId, "needs the first step");
        // An earlier version saved the email above the password: the file
        // keeps the password alone, so that it can be pasted.
        const passwordFile = join(dataDir, "initial-password");
        await Deno.writeTextFile(passwordFile, `owner@baton.local\n${password}\n`, { mode: 0o600 });
        const { proc, url } = await up(env);
        assert.equal(proc.count(/Created the owner account/), 0, proc.output());
        assert.equal(await Deno.readTextFile(passwordFile), `${password}\n`);
        assert.equal(await mode(passwordFile), 0o600);
        assert.equal(proc.count(/with the password in/), 0, "the password was not generated");
        assert.equal(await Deno.readTextFile(join(dataDir, "local-runner.json")), tokenFile);
        const runners = await runnersOf(url, "owner@baton.local", password);
        assert.deepEqual(runners.map((r) => [r.id, r.connected]), [[runnerId, true]]);
        await interrupt(proc, url);
      },
    );

    await t.step("a data folder open to others is made owner-only", async () => {
      const other = await scope.dir("baton-up-home-");
      const shared = join(other, "shared-data");
      await Deno.mkdir(shared, { mode: 0o755 });
      await Deno.chmod(shared, 0o755);
      const { proc, url } = await up(baseEnv(other, { BATON_OWNER_PASSWORD: password }), [
        "--no-runner",
        "--data-dir",
        shared,
      ]);
      assert.equal(await mode(shared), 0o700, "an existing folder is made owner-only");
      for (const file of ["secret", "relay.db", "relay.db-wal", "relay.db-shm"]) {
        assert.equal(await mode(join(shared, file)), 0o600, file);
      }
      await interrupt(proc, url);
    });

    await t.step("without BATON_OWNER_PASSWORD it saves a generated password", async () => {
      const other = await scope.dir("baton-up-home-");
      const email = "env-owner@example.com";
      const { proc, url } = await up(baseEnv(other, { BATON_OWNER_EMAIL: email }));
      const [, shown] = await line(proc, /Created the owner account \S+ with password: (\S+)/);
      const path = join(other, ".baton", "relay", "initial-password");
      assert.equal(await Deno.readTextFile(path), `${shown}\n`);
      assert.equal(await mode(path), 0o600);
      // Where the password is, and for which account, is said last.
      const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
      await line(
        proc,
        new RegExp(
          `^baton is up: .* sign in as ${literal(email)} with the password in ${literal(path)}$`,
        ),
      );
      // The file pasted into a password field (which drops line breaks) signs in.
      const pasted = (await Deno.readTextFile(path)).replace(/[\r\n]/g, "");
      assert.equal((await runnersOf(url, email, pasted)).length, 1);

      // The README shows this first start as it is (but for the runner's own
      // lines, which start with '[', and the example's values).
      const readme = await Deno.readTextFile(join(ROOT, "README.md"));
      const block = readme.match(/```text\nTask up [^\n]*\n([^`]*)```/)?.[1];
      assert.ok(block, "the README shows a first start");
      const own = (lines: string[]) => lines.filter((l) => l.trim() !== "" && !l.startsWith("["));
      const example = own(block.split("\n")).map((l) =>
        l.replaceAll("http://127.0.0.1:7420", url)
          .replaceAll("owner@baton.local", email)
          .replaceAll("/home/ada/.baton/relay/initial-password", path)
          .replaceAll("1OY3CrypnjjxwZY_", shown!)
      );
      assert.deepEqual(own(proc.lines), example);
      await interrupt(proc, url);
    });

    await t.step("--email takes precedence over BATON_OWNER_EMAIL", async () => {
      const other = await scope.dir("baton-up-home-");
      const email = "flag-owner@example.com";
      const { proc, url } = await up(
        baseEnv(other, {
          BATON_OWNER_EMAIL: "env-owner@example.com",
          BATON_OWNER_PASSWORD: password,
        }),
        ["--email", email],
      );
      assert.equal(proc.count(/Created the owner account flag-owner@example\.com\./), 1);
      await line(proc, /sign in as flag-owner@example\.com/);
      assert.equal((await runnersOf(url, email, password)).length, 1);
      await interrupt(proc, url);
    });

    await t.step("a SIGINT sent the moment it says it is up still exits 0", async () => {
      const other = await scope.dir("baton-up-home-");
      for (let i = 0; i < 4; i++) {
        const proc = scope.start(
          "up",
          ["up", "--port", "0", "--no-runner"],
          baseEnv(other, { BATON_OWNER_PASSWORD: password }),
        );
        await line(proc, /baton is up/);
        proc.kill("SIGINT");
        const st = await exitsWithin(proc, 15_000);
        assert.equal(st.code, 0, `attempt ${i + 1}: ${proc.output()}`);
      }
    });

    await t.step("--no-runner serves the relay alone until a signal", async () => {
      const other = await scope.dir("baton-up-home-");
      const { proc, url } = await up(baseEnv(other, { BATON_OWNER_PASSWORD: password }), [
        "--no-runner",
      ]);
      let exited = false;
      proc.status.then(() => exited = true);
      const health = await fetch(`${url}/health`).catch((err) => {
        throw new Error(`the relay is gone (baton up exited: ${exited}): ${err}`);
      });
      assert.deepEqual(await body(health), { status: "ok" });
      assert.deepEqual(await runnersOf(url, "owner@baton.local", password), []);
      assert.equal(exited, false, "baton up --no-runner exited before a signal");
      assert.equal(proc.count(CONNECTED), 0);
      await interrupt(proc, url);
    });
  });
});
