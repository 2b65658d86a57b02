/**
 * Where runner services are found: every folder under
 * `<home>/.baton/services/`, and under a `services/` folder inside each
 * plugin (pi's extensions and packages, as runner/workspace/plugins.ts
 * lists them), unless plugins are skipped (`--no-plugins`).
 *
 * @module
 */
import { basename, dirname, join } from "node:path";
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

/** Every candidate service folder, `~/.baton/services/` first, each folder once. */
export async function discoverServices(o: DiscoveryOptions): Promise<FoundService[]> {
  const found: FoundService[] = (await subfolders(join(o.batonDir, "services")))
    .map((dir) => ({ dir, source: "home" as const }));
  if (o.skipPlugins) return found;
  let plugins: { path: string }[] = [];
  try {
    const catalog = new PluginCatalog({
      batonDir: o.batonDir,
      home: o.home,
      roots: null,
      skipped: false,
    });
    plugins = await catalog.list(null);
  } catch (err) {
    o.log?.(`services: listing plugins failed: ${err instanceof Error ? err.message : err}`);
  }
  const seen = new Set(found.map((f) => f.dir));
  for (const p of plugins) {
    const root = await pluginRoot(p.path, o.batonDir);
    if (!root) continue;
    for (const dir of await subfolders(join(root, "services"))) {
      if (seen.has(dir)) continue;
      seen.add(dir);
      found.push({ dir, source: "plugin" });
    }
  }
  return found;
}
