import { hostname } from "node:os";
import { join } from "node:path";
import { RUNNER_WS_PATH } from "../shared/protocol.ts";
import type { SandboxMode } from "../shared/sandbox_api.ts";
import { parseMode, SandboxConfigError } from "./sandbox/policy.ts";
import { FileShapeError, readBoundedText } from "./bounded_read.ts";

/** A configuration problem the user must fix (printed as one line, exit code 2). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** Which optional parts a session skips (`--safe-mode`, `BATON_NO_*`). */
export interface SkipOptions {
  mcp: boolean;
  plugins: boolean;
  hooks: boolean;
  /** Runner services, `~/.baton/services/` included (safe mode only). */
  services: boolean;
  relay: boolean;
}

/** What the runner needs to know, from the environment and `<home>/.baton/config.json`. */
export interface RunnerConfig {
  home: string;
  /** `<home>/.baton`: pi's agent dir and baton's runner files. */
  batonDir: string;
  /**
   * The first relay node's http(s) base URL, or null when the relay is
   * turned off: what calls the relay without following the control channel
   * uses (services' `BATON_RELAY_URL`, `baton doctor`).
   */
  relayUrl: string | null;
  /**
   * Every relay node the runner may use, in order (`--relay URL[,URL…]`):
   * the control channel moves on to the next one when its node fails
   * (runner/relay_nodes.ts). Empty when the relay is turned off.
   */
  relayUrls: string[];
  apiKey: string | null;
  /** Workspace roots as configured (unresolved), or null to accept any cwd. */
  roots: string[] | null;
  /** The variable the roots came from. */
  rootsSource: string | null;
  name: string;
  skip: SkipOptions;
  /** How long a session may go without a turn before its worker stops (0: never). */
  sleepAfterMs: number;
  /** How long a worker may take to start its session before the session ends with an error (0: no limit). */
  startTimeoutMs: number;
  /** The sandbox mode from `--sandbox` or `BATON_SANDBOX` (null: the config files decide). */
  sandboxMode: SandboxMode | null;
}

/** Default of `sleepAfter`: an idle session's worker stops after 10 minutes. */
export const DEFAULT_SLEEP_AFTER_MS = 10 * 60_000;
/**
 * Default of `startTimeout`: a worker starts its session in about a second
 * (docs/performance.md); its MCP servers are bounded apart (`mcpTimeout`)
 * and do not hold the start. What takes minutes is a stuck extension or a
 * pi package installing from an unreachable registry.
 */
export const DEFAULT_START_TIMEOUT_MS = 2 * 60_000;

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * A duration such as `10m`, `90s`, `500ms` or `1h` (a bare number is
 * seconds) in milliseconds; `0` or `off` is 0 (never).
 */
export function parseDuration(raw: string | number, what: string): number {
  if (typeof raw === "number") raw = String(raw);
  const text = raw.trim().toLowerCase();
  if (text === "off" || text === "never") return 0;
  const m = text.match(/^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/);
  const ms = m ? Math.round(Number(m[1]) * DURATION_UNITS[m[2] ?? "s"]!) : NaN;
  if (!Number.isSafeInteger(ms) || ms > 30 * 86_400_000) {
    throw new ConfigError(
      `Invalid ${what}: '${raw}' (expected a duration such as 10m, 90s or off)`,
    );
  }
  return ms;
}

/** Reads an environment variable (replaceable in tests). */
export type EnvGetter = (name: string) => string | undefined;

/** The largest `config.json` read (a project's is the agent's to write). */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * The user config file `<home>/.baton/config.json`, or {} when it does not
 * exist. Also reads a project's `.baton/config.json`, which the agent may
 * have made a pipe or a link to a device: only a regular file up to
 * {@linkcode MAX_CONFIG_BYTES} is read.
 */
export async function readUserConfig(batonDir: string): Promise<Record<string, unknown>> {
  const path = join(batonDir, "config.json");
  let text: string;
  try {
    text = await readBoundedText(path, MAX_CONFIG_BYTES);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return {};
    if (err instanceof FileShapeError) {
      throw new ConfigError(
        `Invalid config file: '${path}' (${
          err.code === "too_large" ? `over ${MAX_CONFIG_BYTES / 1024} KiB` : "not a regular file"
        })`,
      );
    }
    throw err;
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    // V8's message quotes the file, which holds the API key: say less.
    throw new ConfigError(`Invalid config file: '${path}' (not valid JSON)`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new ConfigError(`Invalid config file: '${path}' (not a JSON object)`);
  }
  return v as Record<string, unknown>;
}

/** Writes keys into `<home>/.baton/config.json`, keeping the others (mode 0600: it holds a key). */
export async function updateUserConfig(
  batonDir: string,
  patch: Record<string, unknown>,
): Promise<string> {
  await Deno.mkdir(batonDir, { recursive: true, mode: 0o700 });
  const current = await readUserConfig(batonDir);
  const path = join(batonDir, "config.json");
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  await Deno.writeTextFile(tmp, JSON.stringify({ ...current, ...patch }, null, 2) + "\n", {
    mode: 0o600,
  });
  await Deno.rename(tmp, path);
  return path;
}

/**
 * Workspace roots from the environment, in the spec's priority:
 * `BATON_WORKSPACE_ROOTS` (comma list) > `BATON_WORKSPACE_ROOT` > `BATON_RUNNER_ROOTS`.
 */
export function rootsFromEnv(env: EnvGetter): { roots: string[] | null; source: string | null } {
  for (const name of ["BATON_WORKSPACE_ROOTS", "BATON_WORKSPACE_ROOT", "BATON_RUNNER_ROOTS"]) {
    const raw = env(name);
    if (raw === undefined || raw.trim() === "") continue;
    const roots = name === "BATON_WORKSPACE_ROOT"
      ? [raw.trim()]
      : raw.split(",").map((r) => r.trim()).filter((r) => r !== "");
    return { roots, source: name };
  }
  return { roots: null, source: null };
}

/** The relay's http(s) base from an http(s) or ws(s) URL, with or without the control path. */
export function normalizeRelayUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(`Invalid relay URL: '${raw}'`);
  }
  const proto = { "ws:": "http:", "wss:": "https:", "http:": "http:", "https:": "https:" }[
    url.protocol
  ];
  if (!proto) throw new ConfigError(`Invalid relay URL: '${raw}' (expected http(s) or ws(s))`);
  let path = url.pathname.replace(/\/+$/, "");
  if (path.endsWith(RUNNER_WS_PATH)) path = path.slice(0, -RUNNER_WS_PATH.length);
  return `${proto}//${url.host}${path}`;
}

/**
 * The relay nodes of a comma-separated list (`--relay`, `BATON_RELAY_URL`,
 * config `relayUrl`) or of config `relayUrls`, each normalized, duplicates
 * dropped; `what` names the source in the one-line error.
 */
export function parseRelayUrls(raw: string | readonly unknown[], what: string): string[] {
  const entries = typeof raw === "string" ? raw.split(",") : raw;
  const urls: string[] = [];
  for (const entry of entries) {
    if (typeof entry !== "string") {
      throw new ConfigError(`Invalid ${what}: expected relay URLs as strings`);
    }
    if (entry.trim() === "") continue;
    let url: string;
    try {
      url = normalizeRelayUrl(entry.trim());
    } catch (err) {
      throw new ConfigError(`${(err as Error).message} in ${what}`);
    }
    if (!urls.includes(url)) urls.push(url);
  }
  if (urls.length === 0) throw new ConfigError(`Invalid ${what}: no relay URL in it`);
  return urls;
}

/** The control WebSocket URL for a relay base URL. */
export function controlUrl(relayUrl: string): string {
  return relayUrl.replace(/^http/, "ws") + RUNNER_WS_PATH;
}

/** Flags of `baton runner` that change the configuration. */
export interface RunnerFlags {
  name?: string;
  /** `--relay URL[,URL…]` (repeatable): the relay nodes, over `BATON_RELAY_URL` and the config. */
  relay?: string;
  safeMode?: boolean;
  noMcp?: boolean;
  noPlugins?: boolean;
  noHooks?: boolean;
  noRelay?: boolean;
  /** `--sandbox <none|basic|full>`. */
  sandbox?: string;
}

/** The flags of `baton runner`, which the supervisor passes on to its daemon. */
export const RUNNER_FLAGS = {
  name: { type: "string" },
  relay: { type: "string", multiple: true },
  "safe-mode": { type: "boolean" },
  "no-mcp": { type: "boolean" },
  "no-plugins": { type: "boolean" },
  "no-hooks": { type: "boolean" },
  "no-relay": { type: "boolean" },
  sandbox: { type: "string" },
} as const;

/** {@linkcode RunnerFlags} from the parsed values of {@linkcode RUNNER_FLAGS}. */
export function runnerFlags(values: {
  name?: string;
  relay?: string;
  "safe-mode"?: boolean;
  "no-mcp"?: boolean;
  "no-plugins"?: boolean;
  "no-hooks"?: boolean;
  "no-relay"?: boolean;
  sandbox?: string;
}): RunnerFlags {
  return {
    ...(values.name !== undefined ? { name: values.name } : {}),
    ...(values.relay !== undefined ? { relay: values.relay } : {}),
    ...(values.sandbox !== undefined ? { sandbox: values.sandbox } : {}),
    safeMode: values["safe-mode"] ?? false,
    noMcp: values["no-mcp"] ?? false,
    noPlugins: values["no-plugins"] ?? false,
    noHooks: values["no-hooks"] ?? false,
    noRelay: values["no-relay"] ?? false,
  };
}

/** Resolves the runner configuration: flags > environment > config file. */
export async function loadRunnerConfig(
  env: EnvGetter,
  flags: RunnerFlags = {},
): Promise<RunnerConfig> {
  const home = env("HOME") ?? env("USERPROFILE");
  if (!home) throw new ConfigError("HOME is not set");
  const batonDir = join(home, ".baton");
  const file = await readUserConfig(batonDir);
  const on = (name: string) => env(name) === "1";
  // Safe mode skips what a session loads from config (MCP, plugins, hooks), and the
  // runner's services (~/.baton/services too: code that runs at every start).
  // Not the relay, which the spec's CLI also turns off: a runner needs it.
  const safe = (flags.safeMode ?? false) || on("BATON_SAFE_MODE");
  const skip: SkipOptions = {
    mcp: safe || (flags.noMcp ?? false) || on("BATON_NO_MCP"),
    plugins: safe || (flags.noPlugins ?? false) || on("BATON_NO_PLUGINS"),
    hooks: safe || (flags.noHooks ?? false) || on("BATON_NO_HOOKS"),
    services: safe,
    relay: (flags.noRelay ?? false) || on("BATON_NO_RELAY"),
  };
  const relayUrls = relayUrlsFrom(env, file, flags, skip);
  const apiKey = env("BATON_API_KEY") || env("BATON_RUNNER_API_KEY") ||
    (typeof file.apiKey === "string" ? file.apiKey : null) || null;
  const { roots, source } = rootsFromEnv(env);
  const name = flags.name || env("BATON_RUNNER_NAME") ||
    (typeof file.runnerName === "string" ? file.runnerName : "") || hostname();
  /** A duration: the variable (when not blank) over the config key over the default. */
  const duration = (variable: string, key: string, fallback: number): number => {
    const raw = env(variable);
    if (raw !== undefined && raw.trim() !== "") return parseDuration(raw, variable);
    const v = file[key];
    return typeof v === "string" || typeof v === "number"
      ? parseDuration(v, `${key} in config.json`)
      : fallback;
  };
  const sleepAfterMs = duration("BATON_SLEEP_AFTER", "sleepAfter", DEFAULT_SLEEP_AFTER_MS);
  const startTimeoutMs = duration("BATON_START_TIMEOUT", "startTimeout", DEFAULT_START_TIMEOUT_MS);
  let sandboxMode: SandboxMode | null = null;
  try {
    const rawMode = flags.sandbox ?? env("BATON_SANDBOX");
    if (rawMode !== undefined && rawMode.trim() !== "") {
      sandboxMode = parseMode(rawMode, flags.sandbox !== undefined ? "--sandbox" : "BATON_SANDBOX");
    }
  } catch (err) {
    if (err instanceof SandboxConfigError) throw new ConfigError(err.message);
    throw err;
  }
  return {
    sandboxMode,
    home,
    batonDir,
    relayUrl: relayUrls[0] ?? null,
    relayUrls,
    apiKey,
    roots,
    rootsSource: source,
    name,
    skip,
    sleepAfterMs,
    startTimeoutMs,
  };
}

/**
 * The relay nodes: `--relay` > `BATON_RELAY_URL` > config `relayUrls` (an
 * array) > config `relayUrl` (a string, commas allowed). "off" in the
 * variable or `relayUrl` turns the relay off (`skip.relay`); so does
 * `--no-relay`, before any URL is read.
 */
function relayUrlsFrom(
  env: EnvGetter,
  file: Record<string, unknown>,
  flags: RunnerFlags,
  skip: SkipOptions,
): string[] {
  if (skip.relay) return [];
  if (flags.relay !== undefined) return parseRelayUrls(flags.relay, "--relay");
  const fromEnv = env("BATON_RELAY_URL");
  // Set but empty, it still hides the config file's (docs/configuration.md).
  if (fromEnv !== undefined) {
    if (fromEnv.trim() === "") return [];
    if (fromEnv.trim().toLowerCase() === "off") return (skip.relay = true, []);
    return parseRelayUrls(fromEnv, "BATON_RELAY_URL");
  }
  if (file.relayUrls !== undefined) {
    if (!Array.isArray(file.relayUrls)) {
      throw new ConfigError("Invalid relayUrls in config.json: expected an array of URLs");
    }
    return parseRelayUrls(file.relayUrls, "relayUrls in config.json");
  }
  if (typeof file.relayUrl !== "string" || file.relayUrl.trim() === "") return [];
  if (file.relayUrl.trim().toLowerCase() === "off") return (skip.relay = true, []);
  return parseRelayUrls(file.relayUrl, "relayUrl in config.json");
}

/** `<home>/.baton/runner.json`'s runner id, created on first use and kept after. */
export async function ensureRunnerId(batonDir: string): Promise<string> {
  const path = join(batonDir, "runner.json");
  try {
    const data = JSON.parse(await Deno.readTextFile(path));
    if (typeof data?.runnerId === "string" && /^[A-Za-z0-9_-]{1,64}$/.test(data.runnerId)) {
      return data.runnerId;
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound) && !(err instanceof SyntaxError)) throw err;
  }
  await Deno.mkdir(batonDir, { recursive: true, mode: 0o700 });
  const runnerId = crypto.randomUUID();
  const tmp = `${path}.${runnerId}.tmp`;
  await Deno.writeTextFile(tmp, JSON.stringify({ runnerId }, null, 2) + "\n", { mode: 0o600 });
  await Deno.rename(tmp, path);
  return runnerId;
}
