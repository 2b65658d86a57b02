/**
 * The runner's plugins: pi's extensions, found where pi finds them (the
 * agent dir's `extensions/`, a project's `.pi/extensions/`, `extensions`
 * entries and installed `packages` of either settings.json). A session
 * loads these unless the runner runs with `--no-plugins` /
 * `BATON_NO_PLUGINS=1` (runner/worker.ts turns pi's extension discovery off).
 *
 * @module
 */
import { basename, dirname, relative } from "node:path";
import type { PluginInfo, PluginsRequest, PluginsResponse } from "../../shared/skills_api.ts";
import { RequestError } from "../control_link.ts";
import {
  type PiResource,
  resolvePiResources,
  signatureOf,
  SignedCache,
  watchedFolders,
} from "./_pi_resources.ts";
import { type CatalogOptions, checkedCwd } from "./skills.ts";

/** Options of {@linkcode PluginCatalog}. */
export interface PluginCatalogOptions extends CatalogOptions {
  /** Sessions skip plugins (`--no-plugins`, `--safe-mode`, `BATON_NO_PLUGINS=1`). */
  skipped: boolean;
}

/** The plugins list, cached per folder until its folders change or a refresh. */
export class PluginCatalog {
  readonly #opts: PluginCatalogOptions;
  readonly #cache = new SignedCache<PluginInfo[]>();

  constructor(options: PluginCatalogOptions) {
    this.#opts = options;
  }

  /** Answers one `plugins` control request. */
  async request(data: unknown): Promise<PluginsResponse> {
    const req = (data ?? {}) as PluginsRequest;
    if (req.action !== "list" && req.action !== "refresh") {
      throw new RequestError("bad_request", "Unknown action");
    }
    if (req.cwd !== undefined && typeof req.cwd !== "string") {
      throw new RequestError("bad_request", "cwd must be a string");
    }
    const cwd = req.cwd ? await checkedCwd(req.cwd, this.#opts) : null;
    if (req.action === "refresh") this.#cache.clear();
    return { plugins: await this.list(cwd), skipped: this.#opts.skipped };
  }

  async list(cwd: string | null): Promise<PluginInfo[]> {
    const { batonDir, home } = this.#opts;
    const sig = await signatureOf(watchedFolders(batonDir, home, cwd));
    return await this.#cache.get(cwd ?? "", sig, async () => {
      const { extensions } = await resolvePiResources(batonDir, cwd ?? batonDir);
      return extensions
        .filter((r) => r.enabled && (cwd !== null || r.metadata.scope !== "project"))
        .map(pluginOf);
    });
  }
}

/** A name for an extension: its package's source, its folder, or its file. */
function pluginOf(r: PiResource): PluginInfo {
  const scope = r.metadata.scope === "project" ? "project" : "user";
  const source = r.metadata.source;
  let name: string;
  if (r.metadata.origin === "package") {
    const base = r.metadata.baseDir;
    const rel = base ? relative(base, r.path) : "";
    name = rel && !rel.startsWith("..") && rel !== basename(r.path)
      ? `${r.metadata.source} (${rel})`
      : r.metadata.source;
  } else {
    const file = basename(r.path);
    name = /^index\.[jt]s$/.test(file) ? basename(dirname(r.path)) : file.replace(/\.[jt]s$/, "");
  }
  return { name, path: r.path, scope, source };
}
