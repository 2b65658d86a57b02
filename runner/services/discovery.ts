/**
 * Where runner services are found: every folder under
 * `<home>/.baton/services/`, and under a `services/` folder inside each
 * plugin (pi's extensions and packages, as runner/workspace/plugins.ts
 * lists them), unless plugins are skipped (`--no-plugins`). Safe mode
 * (`--safe-mode`) skips them all.
 *
 * @module
 */
import { basename, dirname, join } from "node:path";
import { readLines } from "../_lines.ts";
import { withoutSecrets } from "../_secrets.ts";
import { selfCommand } from "../_self.ts";
import { PluginCatalog } from "../workspace/plugins.ts";

/** A folder that may hold a service (its manifest is read later). */
export interface FoundService {
  dir: string;
  source: "home" | "plugin";
}

/** Options of {@linkcode discoverServices}. */
export interface DiscoveryOptions {
  batonDir: string;
  home: string;
  /** Plugins are skipped: their services are too. */
  skipPlugins: boolean;
  /** Safe mode: no service at all, `~/.baton/services/` included. */
  skipServices?: boolean;
  log?: (line: string) => void;
}

/** The sub-folders of `dir`, sorted by name (none when it does not exist). */
async function subfolders(dir: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      if (e.name.startsWith(".")) continue;
      const full = join(dir, e.name);
      // A symlinked service folder counts (a checkout linked into place).
      const isDir = e.isDirectory || (e.isSymlink && (await Deno.stat(full).catch(() => null))
        ?.isDirectory);
      if (isDir) out.push(full);
    }
  } catch (err) {
    if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) return [];
    throw err;
  }
  return out.sort();
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * A plugin's own folder from the path of its extension: the nearest folder
 * up with a `package.json` (a package), or the folder of an `index.ts`
 * extension; null for a single-file extension.
 */
async function pluginRoot(path: string, stop: string): Promise<string | null> {
  let d = dirname(path);
  for (let i = 0; i < 4 && d !== stop && d !== dirname(d); i++) {
    if (await exists(join(d, "package.json"))) return d;
    d = dirname(d);
  }
  return /^index\.[jt]sx?$/.test(basename(path)) ? dirname(path) : null;
}

/**
 * Whether the user has any plugin at all: an entry in `~/.baton/extensions/`
 * or a `~/.baton/settings.json` (which may list packages). Without one, pi
 * (tens of MB) is not loaded into the daemon just to list nothing.
 */
async function mayHavePlugins(batonDir: string): Promise<boolean> {
  if (await exists(join(batonDir, "settings.json"))) return true;
  try {
    for await (const _ of Deno.readDir(join(batonDir, "extensions"))) return true;
  } catch { /* no folder */ }
  return false;
}

/** Every candidate service folder, `~/.baton/services/` first, each folder once. */
export async function discoverServices(o: DiscoveryOptions): Promise<FoundService[]> {
  if (o.skipServices) return [];
  const found: FoundService[] = (await subfolders(join(o.batonDir, "services")))
    .map((dir) => ({ dir, source: "home" as const }));
  if (o.skipPlugins || !await mayHavePlugins(o.batonDir)) return found;
  let plugins: string[] = [];
  try {
    plugins = await pluginPathsInChild(o.batonDir, o.home);
  } catch (err) {
    o.log?.(`services: listing plugins failed: ${err instanceof Error ? err.message : err}`);
  }
  const seen = new Set(found.map((f) => f.dir));
  for (const path of plugins) {
    const root = await pluginRoot(path, o.batonDir);
    if (!root) continue;
    for (const dir of await subfolders(join(root, "services"))) {
      if (seen.has(dir)) continue;
      seen.add(dir);
      found.push({ dir, source: "plugin" });
    }
  }
  return found;
}

/** The paths of the user's plugins (pi's extensions), as pi resolves them. */
export async function pluginPaths(batonDir: string, home: string): Promise<string[]> {
  const catalog = new PluginCatalog({ batonDir, home, roots: null, skipped: false });
  return (await catalog.list(null)).map((p) => p.path);
}

/**
 * {@linkcode pluginPaths} asked of a short-lived `baton _service --plugins`
 * process: resolving plugins loads pi (~100 MB measured), which the daemon
 * would otherwise keep for good.
 */
async function pluginPathsInChild(batonDir: string, home: string): Promise<string[]> {
  const { cmd, args } = selfCommand("_service", ["--plugins", batonDir, home]);
  const child = new Deno.Command(cmd, {
    args,
    env: withoutSecrets(),
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "null",
    signal: AbortSignal.timeout(60_000),
  }).spawn();
  let paths: string[] = [];
  for await (const line of readLines(child.stdout)) {
    let parsed: { paths?: unknown };
    try {
      parsed = JSON.parse(line);
    } catch {
      continue; // something pi printed
    }
    if (Array.isArray(parsed?.paths)) paths = parsed.paths.filter((p) => typeof p === "string");
  }
  const st = await child.status;
  if (!st.success) throw new Error(`plugin listing exited with ${st.signal ?? st.code}`);
  return paths;
}
