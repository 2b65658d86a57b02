/**
 * `baton doctor`: checks what baton needs on this machine and says, one line
 * each, what is right and how to fix what is not: the version, the relay
 * (reachable, the key accepted, this runner known to it, the clocks agree),
 * the workspace roots, git, rg, the sandbox's programs, the models and their
 * providers' keys, and the disk space of the data folder.
 *
 * @module
 */
import { statfsSync } from "node:fs";
import { join } from "node:path";
import { VERSION_INFO } from "./_version.ts";
import { MAX_SKEW_MS, type RunnerListResponse } from "../shared/mod.ts";
import {
  ConfigError,
  listModels,
  loadRunnerConfig,
  missingPrograms,
  type RunnerConfig,
} from "../runner/mod.ts";
import { parseFlags } from "./_args.ts";

export const DOCTOR_HELP = `Usage: baton doctor [--data-dir <dir>]

Check this machine for baton, one line per check with a fix for what fails:
version, each relay node reachable (all of a comma-separated BATON_RELAY_URL
or relayUrls), the API key accepted and this runner registered,
the clocks of this machine and the relay (webhook signatures allow 5 minutes),
workspace roots, git, rg, the sandbox's bwrap and socat (Linux), the models and
which providers have keys, and the free space of the data folder (--data-dir,
default ~/.baton). Exit code 1 when a check fails.
`;

/** One check's verdict. */
export interface CheckResult {
  status: "ok" | "warn" | "fail";
  name: string;
  detail: string;
  fix?: string;
}

/** A verdict as the one line printed. */
export function formatCheck(c: CheckResult): string {
  return `${c.status.padEnd(4)} ${c.name}: ${c.detail}${c.fix ? ` (fix: ${c.fix})` : ""}`;
}

/** What the checks need from the machine (tests and platforms inject them). */
export interface DoctorOptions {
  env: (k: string) => string | undefined;
  os: typeof Deno.build.os;
  fetch: typeof fetch;
  now: () => number;
  /** Runs `program --version`; its first line, or null when it is not there. */
  version: (program: string) => Promise<string | null>;
  /** Bytes free for the user at `path`, or null when unknown. */
  freeBytes: (path: string) => number | null;
  dataDir?: string;
}

/** The clock check: how far the relay's `Date` is from ours. */
export function clockCheck(
  relayDate: string | null,
  sentAt: number,
  receivedAt: number,
): CheckResult {
  const name = "clock";
  const at = relayDate ? Date.parse(relayDate) : NaN;
  if (Number.isNaN(at)) return { status: "warn", name, detail: "the relay sent no Date header" };
  // Date has whole seconds: the relay's clock was in [at, at + 1 s) when it answered.
  const ours = (sentAt + receivedAt) / 2;
  const skew = ours < at ? at - ours : ours > at + 1000 ? ours - (at + 1000) : 0;
  const secs = Math.round(skew / 1000);
  const dir = ours < at ? "behind" : "ahead of";
  if (skew <= 30_000) {
    return { status: "ok", name, detail: `within ${Math.max(secs, 1)} s of the relay's` };
  }
  const fix =
    "turn on time sync (Linux: timedatectl set-ntp true; macOS: sntp -sS time.apple.com; " +
    "Windows: w32tm /resync) on this machine or the relay's";
  if (skew <= MAX_SKEW_MS / 2) {
    return { status: "warn", name, detail: `${secs} s ${dir} the relay's`, fix };
  }
  return {
    status: "fail",
    name,
    detail: `${secs} s ${dir} the relay's: signed webhooks older than ${
      MAX_SKEW_MS / 60_000
    } minutes are refused`,
    fix,
  };
}

async function readRunnerId(batonDir: string): Promise<string | null> {
  try {
    const data = JSON.parse(await Deno.readTextFile(join(batonDir, "runner.json")));
    return typeof data?.runnerId === "string" ? data.runnerId : null;
  } catch {
    return null;
  }
}

const INSTALL: Record<string, Record<string, string>> = {
  git: {
    linux: "apt-get install git",
    darwin: "xcode-select --install",
    windows: "winget install Git.Git",
  },
  rg: {
    linux: "apt-get install ripgrep",
    darwin: "brew install ripgrep",
    windows: "winget install BurntSushi.ripgrep.MSVC",
  },
};

/** One relay node: does it answer /health, and does its clock agree with ours? */
async function relayCheck(
  base: string,
  o: DoctorOptions,
): Promise<{ ok: boolean; results: CheckResult[] }> {
  const sentAt = o.now();
  let health: Response;
  try {
    health = await o.fetch(`${base}/health`, { signal: AbortSignal.timeout(5000) });
    await health.body?.cancel();
  } catch (err) {
    return {
      ok: false,
      results: [{
        status: "fail",
        name: "relay",
        detail: `cannot reach ${base}: ${err instanceof Error ? err.message : String(err)}`,
        fix:
          "check the address in ~/.baton/config.json (relayUrl), that the relay runs, and the network",
      }],
    };
  }
  const ms = o.now() - sentAt;
  return {
    ok: health.ok,
    results: [
      health.ok ? { status: "ok", name: "relay", detail: `${base} answers (${ms} ms)` } : {
        status: "fail",
        name: "relay",
        detail: `${base}/health answered ${health.status}`,
        fix: "is this the relay's address (not a proxy's or another service's)?",
      },
      clockCheck(health.headers.get("date"), sentAt, o.now()),
    ],
  };
}

/** Runs every check; the verdicts in order. */
export async function runChecks(o: DoctorOptions): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  out.push({ status: "ok", name: "version", detail: VERSION_INFO() });

  let config: RunnerConfig | null = null;
  try {
    config = await loadRunnerConfig(o.env);
    out.push({
      status: "ok",
      name: "config",
      detail: `${join(config.batonDir, "config.json")} read`,
    });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    out.push({
      status: "fail",
      name: "config",
      detail: err.message,
      fix: "correct or remove the file, then run 'baton setup'",
    });
  }

  // The relay.
  if (config && !config.relayUrl) {
    out.push({
      status: "fail",
      name: "relay",
      detail: "no relay configured",
      fix: "run 'baton setup' or set BATON_RELAY_URL",
    });
  } else if (config?.relayUrl) {
    // Every node of a deployment (`--relay`/relayUrls takes several): a node the
    // runner cannot reach is where its failover would stall. The key and the
    // runner are checked on the first node that answers, since all of them
    // share one store.
    let keysChecked = false;
    for (const url of config.relayUrls) {
      const base = url.replace(/\/+$/, "");
      const answered = await relayCheck(base, o);
      out.push(...answered.results);
      if (answered.ok && !keysChecked) {
        keysChecked = true;
        out.push(...await keyChecks(base, config, o));
      }
    }
  }

  // Workspace roots.
  if (config) {
    if (!config.roots) {
      out.push({
        status: "ok",
        name: "roots",
        detail: "any folder (BATON_WORKSPACE_ROOTS is not set)",
      });
    } else {
      for (const root of config.roots) {
        let isDir = false;
        try {
          isDir = (await Deno.stat(root)).isDirectory;
        } catch {
          // Reported below.
        }
        out.push(
          isDir ? { status: "ok", name: "root", detail: root } : {
            status: "fail",
            name: "root",
            detail: `${root} is not a folder here`,
            fix: `create it, or correct ${config.rootsSource ?? "BATON_WORKSPACE_ROOTS"}`,
          },
        );
      }
    }
  }

  // Programs.
  const git = await o.version("git");
  out.push(
    git ? { status: "ok", name: "git", detail: git } : {
      status: "fail",
      name: "git",
      detail: "not found on PATH: the Changes panel and git tools do not work",
      fix: INSTALL.git![o.os] ?? "install git",
    },
  );
  const rg = await o.version("rg");
  out.push(
    rg ? { status: "ok", name: "rg", detail: rg } : {
      status: "warn",
      name: "rg",
      detail: "not found on PATH: file search uses a slower walker",
      fix: INSTALL.rg![o.os] ?? "install ripgrep",
    },
  );
  if (o.os === "linux") {
    const missing = missingPrograms(["bwrap", "socat"], o.env("PATH") ?? "");
    out.push(
      missing.length === 0 ? { status: "ok", name: "sandbox", detail: "bwrap and socat found" } : {
        status: "warn",
        name: "sandbox",
        detail: `${missing.join(", ")} not found: sessions run unsandboxed`,
        fix: "apt-get install bubblewrap socat",
      },
    );
  } else if (o.os === "windows") {
    out.push({
      status: "warn",
      name: "sandbox",
      detail: "inactive on Windows: tools run unrestricted",
    });
  } else {
    out.push({ status: "ok", name: "sandbox", detail: "macOS sandbox-exec" });
  }

  // Models.
  if (config) {
    try {
      const { models, error } = await listModels(config.batonDir);
      const providers = [...new Set(models.map((m) => m.provider))];
      if (error) {
        out.push({
          status: "fail",
          name: "models",
          detail: error,
          fix: `correct ${join(config.batonDir, "models.json")}`,
        });
      } else if (models.length === 0) {
        out.push({
          status: "fail",
          name: "models",
          detail: "none: no provider has a key and ~/.baton/models.json names no model",
          fix:
            "set a provider's key (e.g. ANTHROPIC_API_KEY, OPENAI_API_KEY) in the runner's environment, or add models.json",
        });
      } else {
        out.push({
          status: "ok",
          name: "models",
          detail: `${models.length} from ${
            providers.join(", ")
          } (providers with a key or in models.json)`,
        });
      }
    } catch (err) {
      out.push({
        status: "fail",
        name: "models",
        detail: err instanceof Error ? err.message : String(err),
      });
    }
  }

  // Disk.
  const dataDir = o.dataDir ?? (config?.batonDir ?? null);
  if (dataDir) {
    const free = o.freeBytes(dataDir);
    if (free === null) {
      out.push({ status: "warn", name: "disk", detail: `free space of ${dataDir} unknown` });
    } else {
      const gb = (free / 1e9).toFixed(1);
      out.push(
        free < 200e6
          ? {
            status: "fail",
            name: "disk",
            detail: `${gb} GB free at ${dataDir}`,
            fix: "free space: events, attachments and conversations are written there",
          }
          : free < 1e9
          ? {
            status: "warn",
            name: "disk",
            detail: `${gb} GB free at ${dataDir}`,
            fix: "free some space soon",
          }
          : { status: "ok", name: "disk", detail: `${gb} GB free at ${dataDir}` },
      );
    }
  }
  return out;
}

async function keyChecks(
  base: string,
  config: RunnerConfig,
  o: DoctorOptions,
): Promise<CheckResult[]> {
  if (!config.apiKey) {
    return [{
      status: "fail",
      name: "key",
      detail: "no API key configured",
      fix: "run 'baton setup' or set BATON_API_KEY",
    }];
  }
  let res: Response;
  try {
    res = await o.fetch(`${base}/api/runners`, {
      headers: { "x-api-key": config.apiKey },
      signal: AbortSignal.timeout(5000),
    });
  } catch (err) {
    return [{
      status: "fail",
      name: "key",
      detail: `could not ask the relay: ${err instanceof Error ? err.message : err}`,
    }];
  }
  const runnerId = await readRunnerId(config.batonDir);
  if (res.status === 401) {
    await res.body?.cancel();
    return [{
      status: "fail",
      name: "key",
      detail: "the relay refuses the API key (revoked, expired, or another relay's)",
      fix: "create a key in the web app (Settings, Keys) or with 'baton key', then 'baton setup'",
    }];
  }
  if (res.status === 403) {
    await res.body?.cancel();
    return [
      { status: "ok", name: "key", detail: "accepted (a runner token: it cannot list runners)" },
      runnerId
        ? { status: "ok", name: "runner", detail: `id ${runnerId} (~/.baton/runner.json)` }
        : {
          status: "warn",
          name: "runner",
          detail: "not registered yet",
          fix: "start it: 'baton runner' or 'baton runner install'",
        },
    ];
  }
  if (!res.ok) {
    await res.body?.cancel();
    return [{
      status: "warn",
      name: "key",
      detail: `the relay answered ${res.status} to a key check`,
    }];
  }
  const runners: RunnerListResponse = await res.json();
  const key: CheckResult = { status: "ok", name: "key", detail: "accepted" };
  if (!runnerId) {
    return [key, {
      status: "warn",
      name: "runner",
      detail: "not registered yet (no ~/.baton/runner.json)",
      fix: "start it: 'baton runner' or 'baton runner install'",
    }];
  }
  const me = runners.find((r) => r.id === runnerId);
  if (!me) {
    return [key, {
      status: "warn",
      name: "runner",
      detail: `${runnerId} is not among this key's runners: it registers when it first connects`,
      fix: "start it ('baton runner'), with a key of the account you use in the browser",
    }];
  }
  return [key, {
    status: me.connected ? "ok" : "warn",
    name: "runner",
    detail: `registered as '${me.name}' (${
      me.connected ? "connected" : `offline${me.lastSeenAt ? `, last seen ${me.lastSeenAt}` : ""}`
    })`,
    ...(me.connected
      ? {}
      : { fix: "start it: 'baton runner start' (a service) or 'baton runner'" }),
  }];
}

async function programVersion(program: string): Promise<string | null> {
  try {
    const out = await new Deno.Command(program, {
      args: ["--version"],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!out.success) return null;
    return new TextDecoder().decode(out.stdout).split("\n")[0]!.trim();
  } catch {
    return null;
  }
}

function freeBytes(path: string): number | null {
  try {
    const s = statfsSync(path);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return null;
  }
}

/** `baton doctor`. */
export async function doctorMain(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, { "data-dir": { type: "string" } });
  const results = await runChecks({
    env: (k) => Deno.env.get(k),
    os: Deno.build.os,
    fetch,
    now: () => Date.now(),
    version: programVersion,
    freeBytes,
    ...(values["data-dir"] ? { dataDir: values["data-dir"] as string } : {}),
  });
  for (const r of results) console.log(formatCheck(r));
  return results.some((r) => r.status === "fail") ? 1 : 0;
}
