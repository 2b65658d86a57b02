/**
 * The sandbox policy, with no I/O: checking a `sandbox` config object, the
 * spec's merge of a project's config over the global one, the mode override
 * (`--sandbox`, `BATON_SANDBOX`, `BATON_NO_SANDBOX`), the deep merge of
 * `PUT sandbox-config`, the resolved settings handed to
 * `@anthropic-ai/sandbox-runtime`, and the path check the file tools use.
 *
 * @module
 */
import { isAbsolute, join, resolve } from "node:path";
import { SANDBOX_MODES, type SandboxConfig, type SandboxMode } from "../../shared/sandbox_api.ts";
import { isWithin } from "../roots.ts";
import { globToRegex } from "../workspace/gitignore.ts";
import { isObject } from "../../shared/json.ts";

/** A `sandbox` config the runner will not use (printed or answered 400). */
export class SandboxConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SandboxConfigError";
  }
}

/** The default mode. */
export const DEFAULT_MODE: SandboxMode = "basic";

/**
 * Reads denied in basic and full mode (besides baton's own secrets): the
 * spec's, and beyond it the stores of git and GitHub tokens (git's
 * `store` helper, curl's and git's `.netrc`, the `gh` CLI's login), which
 * under basic's open network one `cat` would send anywhere. A token the
 * person means the agent to use goes in a variable (`GH_TOKEN`), which the
 * tools still get.
 */
export const PROTECTED_READS = [
  "~/.ssh",
  "~/.aws",
  "~/.gnupg",
  "~/.config/gcloud",
  "~/.docker/config.json",
  "~/.git-credentials",
  "~/.config/git/credentials",
  "~/.netrc",
  "~/.config/gh",
  // Browser data directories (Linux and macOS).
  "~/.mozilla",
  "~/.config/google-chrome",
  "~/.config/chromium",
  "~/.config/BraveSoftware",
  "~/.config/microsoft-edge",
  "~/snap/firefox",
  "~/Library/Application Support/Google/Chrome",
  "~/Library/Application Support/Firefox",
  "~/Library/Safari",
];
/**
 * Writes blocked in basic and full mode: the spec's, and (beyond it) the
 * project's `.pi`, whose extensions the next session's worker would load
 * outside the sandbox.
 */
export const PROTECTED_WRITES = [".env", ".env.local", "~/.ssh", ".pi"];
/**
 * Denied to the file tools only, in basic and full: `/proc` holds every
 * process's environment, memory and open files, the worker's own (its
 * providers' keys) and any process of the same user (a key in its
 * environment). pi's file tools run in the worker, outside the OS sandbox,
 * so only this gate stands between them and `/proc/<pid>/environ`. It is
 * not given to the runtime: `bash` gets a `/proc` of its own PID namespace.
 * `/dev/fd` and `/dev/std*` lead into `/proc/self` and resolve there.
 */
export const GATE_ONLY_READS = ["/proc"];
/** Where writes go when `filesystem.allowWrite` is not given. */
export const DEFAULT_WRITES = [".", "/tmp"];
/**
 * baton's own secrets under `<home>/.baton`, hidden in every mode but none:
 * the runner's key (`config.json`), pi's provider keys (`auth.json`,
 * `models.json`) and the one-time key hand-over files of `_secrets.ts`.
 */
export const BATON_SECRETS = ["config.json", "auth.json", "models.json", "runner/.handover-*"];

const ARRAY_KEYS = {
  filesystem: ["denyRead", "allowWrite", "denyWrite"],
  network: ["allowedDomains", "deniedDomains", "allowUnixSockets"],
} as const;
const BOOLEAN_KEYS = {
  network: ["allowLocalBinding", "allowAllUnixSockets"],
} as const;

/**
 * Checks a `sandbox` object: a known mode, string arrays where the spec has
 * arrays, booleans where it has booleans. Returns it typed; throws
 * {@linkcode SandboxConfigError} with the first problem.
 */
export function validateSandboxConfig(raw: unknown, where = "sandbox"): SandboxConfig {
  if (raw === undefined || raw === null) return {};
  if (!isObject(raw)) throw new SandboxConfigError(`${where} must be an object`);
  if (raw.mode !== undefined && !SANDBOX_MODES.includes(raw.mode as SandboxMode)) {
    throw new SandboxConfigError(
      `Invalid ${where}.mode: '${String(raw.mode)}' (expected none, basic or full)`,
    );
  }
  for (const group of ["filesystem", "network"] as const) {
    const g = raw[group];
    if (g === undefined) continue;
    if (!isObject(g)) throw new SandboxConfigError(`${where}.${group} must be an object`);
    for (const k of ARRAY_KEYS[group]) {
      const v = g[k];
      if (v === undefined) continue;
      if (!Array.isArray(v)) {
        throw new SandboxConfigError(`${where}.${group}.${k} must be an array`);
      }
      const bad = v.findIndex((e) => typeof e !== "string");
      if (bad >= 0) {
        throw new SandboxConfigError(`${where}.${group}.${k}[${bad}] must be a string`);
      }
    }
    for (const k of (BOOLEAN_KEYS as Record<string, readonly string[]>)[group] ?? []) {
      if (g[k] !== undefined && typeof g[k] !== "boolean") {
        throw new SandboxConfigError(`${where}.${group}.${k} must be true or false`);
      }
    }
  }
  for (const k of ["enableWeakerNetworkIsolation", "allowPty", "failClosed"]) {
    if (raw[k] !== undefined && typeof raw[k] !== "boolean") {
      throw new SandboxConfigError(`${where}.${k} must be true or false`);
    }
  }
  const depth = raw.mandatoryDenySearchDepth;
  if (depth !== undefined && (!Number.isInteger(depth) || (depth as number) < 1)) {
    throw new SandboxConfigError(`${where}.mandatoryDenySearchDepth must be a positive integer`);
  }
  const iv = raw.ignoreViolations;
  if (iv !== undefined) {
    if (!isObject(iv)) throw new SandboxConfigError(`${where}.ignoreViolations must be an object`);
    for (const [cmd, paths] of Object.entries(iv)) {
      if (!Array.isArray(paths) || paths.some((p) => typeof p !== "string")) {
        throw new SandboxConfigError(
          `${where}.ignoreViolations['${cmd}'] must be an array of strings`,
        );
      }
    }
  }
  return raw as SandboxConfig;
}

/** The mode a config asks for (default basic). */
export function modeOf(c: SandboxConfig): SandboxMode {
  return c.mode ?? DEFAULT_MODE;
}

function rank(m: SandboxMode): number {
  return SANDBOX_MODES.indexOf(m);
}

/** Where relative entries and `~` point. */
export interface PathContext {
  home: string;
  cwd: string;
}

/** An entry as an absolute path: `~` is home, a relative one is under cwd. */
export function absoluteEntry(entry: string, ctx: PathContext): string {
  if (entry === "~") return ctx.home;
  if (entry.startsWith("~/")) return join(ctx.home, entry.slice(2));
  return isAbsolute(entry) ? resolve(entry) : resolve(ctx.cwd, entry);
}

function union(a: string[] | undefined, b: string[] | undefined): string[] | undefined {
  if (a === undefined && b === undefined) return undefined;
  return [...new Set([...(a ?? []), ...(b ?? [])])];
}

/** Whether domain pattern `outer` admits every host `inner` admits. */
export function domainCovers(outer: string, inner: string): boolean {
  const o = outer.toLowerCase();
  const i = inner.toLowerCase();
  if (o === i) return true;
  if (!o.startsWith("*.")) return false;
  const suffix = o.slice(1); // ".example.com"
  const bare = i.startsWith("*.") ? i.slice(1) : "." + i;
  return bare.endsWith(suffix) && bare.length > suffix.length;
}

/**
 * The project's list narrowed to what the global one admits. `global`
 * undefined means the global layer does not restrict (every entry stays).
 */
function intersect(
  global: string[] | undefined,
  project: string[] | undefined,
  covers: (outer: string, inner: string) => boolean,
): string[] | undefined {
  if (project === undefined) return global;
  if (global === undefined) return project;
  return project.filter((p) => global.some((g) => covers(g, p)));
}

/**
 * The spec's merge of a project's `sandbox` over the global one: the mode
 * may only escalate; `denyRead`, `denyWrite` and `deniedDomains` are the
 * union; `allowWrite` and `allowedDomains` the intersection (the project may
 * only narrow). Every other key (`allowAllUnixSockets`, overrides of the
 * sandbox runtime, ...) could weaken the sandbox, so it comes from the
 * global config only; `failClosed` may only be turned on by a project.
 */
export function mergeProjectConfig(
  global: SandboxConfig,
  project: SandboxConfig,
  ctx: PathContext,
): SandboxConfig {
  const out: SandboxConfig = structuredClone(global);
  const gMode = modeOf(global);
  const pMode = project.mode;
  const mode = pMode && rank(pMode) > rank(gMode) ? pMode : gMode;
  if (global.mode !== undefined || mode !== gMode) out.mode = mode;
  if (project.failClosed === true) out.failClosed = true;

  const pathCovers = (g: string, p: string) =>
    isWithin(absoluteEntry(p, ctx), absoluteEntry(g, ctx), "linux");
  const fs = { ...(global.filesystem ?? {}) };
  const pfs = project.filesystem ?? {};
  const denyRead = union(fs.denyRead, pfs.denyRead);
  const denyWrite = union(fs.denyWrite, pfs.denyWrite);
  // An absent global allowWrite is the preset (cwd and /tmp), which bounds the project's.
  const allowWrite = intersect(fs.allowWrite ?? DEFAULT_WRITES, pfs.allowWrite, pathCovers);
  if (denyRead) fs.denyRead = denyRead;
  if (denyWrite) fs.denyWrite = denyWrite;
  if (pfs.allowWrite !== undefined || fs.allowWrite !== undefined) fs.allowWrite = allowWrite;
  if (Object.keys(fs).length > 0) out.filesystem = fs;

  const net = { ...(global.network ?? {}) };
  const pnet = project.network ?? {};
  const deniedDomains = union(net.deniedDomains, pnet.deniedDomains);
  // An absent global allow list admits everything in none and basic, nothing in full.
  const gAllowed = net.allowedDomains ?? (gMode === "full" ? [] : undefined);
  const allowedDomains = intersect(gAllowed, pnet.allowedDomains, domainCovers);
  if (deniedDomains) net.deniedDomains = deniedDomains;
  if (allowedDomains !== undefined) net.allowedDomains = allowedDomains;
  if (Object.keys(net).length > 0) out.network = net;
  return out;
}

/** Where the mode may be overridden, strongest first. */
export interface ModeOverride {
  /** `BATON_NO_SANDBOX=1`: none, whatever else says. */
  noSandbox?: boolean;
  /** `--sandbox <mode>`. */
  flag?: string;
  /** `BATON_SANDBOX`. */
  env?: string;
}

/** Checks a mode given on the command line or in the environment. */
export function parseMode(raw: string, what: string): SandboxMode {
  const m = raw.trim().toLowerCase();
  if (!SANDBOX_MODES.includes(m as SandboxMode)) {
    throw new SandboxConfigError(`Invalid ${what}: '${raw}' (expected none, basic or full)`);
  }
  return m as SandboxMode;
}

/**
 * The global config with the command line or environment's mode in place of
 * its own (`--sandbox` over `BATON_SANDBOX` over the file). A project may
 * still escalate it; `BATON_NO_SANDBOX=1` is applied after the project
 * merge, by {@linkcode resolveSandbox}.
 */
export function applyModeOverride(global: SandboxConfig, o: ModeOverride): SandboxConfig {
  const raw = o.flag ?? (o.env !== undefined && o.env.trim() !== "" ? o.env : undefined);
  if (raw === undefined) return global;
  const what = o.flag !== undefined ? "--sandbox" : "BATON_SANDBOX";
  return { ...global, mode: parseMode(raw, what) };
}

/**
 * `PUT sandbox-config`'s merge into the global config: `null` removes a
 * key, objects merge key by key, arrays and scalars replace.
 */
export function deepMerge(
  base: Record<string, unknown>,
  patch: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else if (isObject(v) && isObject(out[k])) {
      out[k] = deepMerge(out[k] as Record<string, unknown>, v);
    } else if (isObject(v)) out[k] = deepMerge({}, v);
    else out[k] = v;
  }
  return out;
}

/** What a session runs under. */
export interface ResolvedSandbox {
  mode: SandboxMode;
  failClosed: boolean;
  /** The settings for `SandboxManager.initialize`; null in mode none. */
  runtime: Record<string, unknown> | null;
  /** Absolute paths the file tools check (the same lists as `runtime`). */
  paths: { denyRead: string[]; allowWrite: string[]; denyWrite: string[] };
  /** The merged config, as `/sandbox config` and the status show it. */
  config: SandboxConfig;
}

/** What {@linkcode resolveSandbox} needs besides the config. */
export interface ResolveOptions extends PathContext {
  /** `<home>/.baton`. */
  batonDir: string;
  /** More folders to hide in every mode but none (the relay's data folder on this machine). */
  protect?: string[];
  /** `$SSH_AUTH_SOCK`, added to the unix-socket allowlist. */
  sshAuthSock?: string;
  /** `BATON_NO_SANDBOX=1`. */
  noSandbox?: boolean;
}

const SPEC_KEYS = new Set(["mode", "filesystem", "network", "failClosed"]);

/**
 * The settings of one session: presets, baton's secrets, the config's lists
 * and its pass-through keys, as `@anthropic-ai/sandbox-runtime` takes them.
 */
export function resolveSandbox(config: SandboxConfig, o: ResolveOptions): ResolvedSandbox {
  const mode: SandboxMode = o.noSandbox ? "none" : modeOf(config);
  const merged: SandboxConfig = { ...config, mode };
  const failClosed = config.failClosed === true;
  const abs = (list: string[]) => [...new Set(list.map((e) => absoluteEntry(e, o)))];
  if (mode === "none") {
    return {
      mode,
      failClosed,
      runtime: null,
      paths: { denyRead: [], allowWrite: ["/"], denyWrite: [] },
      config: merged,
    };
  }
  const fs = config.filesystem ?? {};
  const net = config.network ?? {};
  const secrets = [...BATON_SECRETS.map((f) => join(o.batonDir, f)), ...(o.protect ?? [])];
  const denyRead = abs([...PROTECTED_READS, ...secrets, ...(fs.denyRead ?? [])]);
  const allowWrite = abs(fs.allowWrite ?? DEFAULT_WRITES);
  // All of `~/.baton` is kept from writes: besides the keys, it holds pi's extensions
  // and settings, which the (unsandboxed) worker of the next session would load.
  const denyWrite = abs([
    ...PROTECTED_WRITES,
    o.batonDir,
    ...(o.protect ?? []),
    ...(fs.denyWrite ?? []),
  ]);
  const unixSockets = [...(net.allowUnixSockets ?? [])];
  if (o.sshAuthSock && !unixSockets.includes(o.sshAuthSock)) unixSockets.push(o.sshAuthSock);
  const network: Record<string, unknown> = {
    deniedDomains: net.deniedDomains ?? [],
    allowLocalBinding: net.allowLocalBinding ?? true,
    allowUnixSockets: unixSockets,
    ...(net.allowAllUnixSockets !== undefined
      ? { allowAllUnixSockets: net.allowAllUnixSockets }
      : {}),
  };
  // Without allowedDomains the runtime leaves the network alone (basic); with
  // them (always in full, where none means none) it goes through its proxy.
  if (mode === "full") network.allowedDomains = net.allowedDomains ?? [];
  else if (net.allowedDomains !== undefined) network.allowedDomains = net.allowedDomains;
  let runtime: Record<string, unknown> = {
    filesystem: { denyRead, allowWrite, denyWrite },
    network,
  };
  // Pass-through keys and any override in the runtime's own format, on top.
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) if (!SPEC_KEYS.has(k)) extra[k] = v;
  const fsExtra = Object.fromEntries(
    Object.entries(fs).filter(([k]) => !(ARRAY_KEYS.filesystem as readonly string[]).includes(k)),
  );
  const netExtra = Object.fromEntries(
    Object.entries(net).filter(([k]) =>
      ![...ARRAY_KEYS.network, ...BOOLEAN_KEYS.network].includes(k as never)
    ),
  );
  runtime = deepMerge(runtime, { ...extra, filesystem: fsExtra, network: netExtra });
  const gate = { denyRead: [...denyRead, ...GATE_ONLY_READS], allowWrite, denyWrite };
  return { mode, failClosed, runtime, paths: gate, config: merged };
}

/**
 * Why a tool that reads every file below `dir` (pi's `grep`, which also
 * searches hidden folders) may not search it: a read-denied path lies
 * inside (`~/.ssh` below the home folder, `/proc` below `/`). Null when
 * none does.
 */
export function searchRefused(paths: ResolvedSandbox["paths"], dir: string): string | null {
  const inside = paths.denyRead.find((e) => isWithin(e, dir, "linux"));
  return inside
    ? `Sandbox: searching '${dir}' would read '${inside}', which is denied; search a folder that does not hold it`
    : null;
}

/**
 * Whether list entry `e` holds `path`: the path itself or below it; an
 * entry with `*`, `?` or `[` (`runner/.handover-*`) as a glob over one
 * path segment each, as the sandbox runtime reads it.
 */
function covers(e: string, path: string): boolean {
  if (!/[*?[]/.test(e)) return isWithin(path, e, "linux");
  return new RegExp(`^${globToRegex(e)}(/.*)?$`).test(path);
}

/**
 * Why the policy refuses `op` on `path` (an absolute real path), or null
 * when it allows it. Reads fail under a read-denied path; writes must be
 * under an allowed path and under no denied one (nor a read-denied one).
 */
export function checkAccess(
  paths: ResolvedSandbox["paths"],
  op: "read" | "write",
  path: string,
): string | null {
  const within = (list: string[]) => list.find((e) => covers(e, path));
  if (op === "write") {
    const denied = within(paths.denyWrite);
    if (denied) return `Sandbox: writing '${denied}' is denied`;
  }
  const hidden = within(paths.denyRead);
  if (hidden) return `Sandbox: ${op === "read" ? "reading" : "writing"} '${hidden}' is denied`;
  if (op === "read") return null;
  if (!within(paths.allowWrite)) {
    return `Sandbox: writes are allowed only in ${paths.allowWrite.join(", ")}`;
  }
  return null;
}
