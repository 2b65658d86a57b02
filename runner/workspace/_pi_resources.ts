/**
 * What pi itself would load for a folder: its package manager's resolution
 * of extensions and skills (auto-discovered folders, settings.json entries,
 * installed packages), so the lists baton shows are pi's, not a guess.
 * Nothing is ever installed from here: a package named in settings.json but
 * not installed yet is skipped (pi installs it when a session starts).
 *
 * @module
 */
import { join } from "node:path";
import { projectsTrusted, settingsFolder } from "../project_code.ts";

/** One resource pi resolved, as its package manager reports it. */
export interface PiResource {
  path: string;
  enabled: boolean;
  metadata: { source: string; scope: string; origin: string; baseDir?: string };
}

/** Extensions and skills pi finds for `cwd` with `agentDir` as its user folder. */
export async function resolvePiResources(
  agentDir: string,
  cwd: string,
): Promise<{ extensions: PiResource[]; skills: PiResource[] }> {
  const { DefaultPackageManager, SettingsManager } = await import(
    "@mariozechner/pi-coding-agent"
  );
  // An untrusted project's settings are not read (they may name programs: project_code.ts).
  const trusted = await projectsTrusted(agentDir);
  const settingsManager = SettingsManager.create(settingsFolder(trusted, cwd, agentDir), agentDir);
  const pm = new DefaultPackageManager({ cwd, agentDir, settingsManager });
  const resolved = await pm.resolve(() => Promise.resolve("skip"));
  return { extensions: resolved.extensions, skills: resolved.skills };
}

/**
 * The folders whose changes change what {@linkcode resolvePiResources}
 * answers: a listing is cached until one of their modification times moves
 * (an entry added, removed or renamed there), or until a refresh.
 */
export function watchedFolders(agentDir: string, home: string, cwd: string | null): string[] {
  const out = [
    join(agentDir, "skills"),
    join(agentDir, "extensions"),
    join(agentDir, "agents"),
    join(agentDir, "settings.json"),
    join(home, ".agents", "skills"),
  ];
  if (cwd !== null) {
    out.push(
      join(cwd, ".pi"),
      join(cwd, ".pi", "skills"),
      join(cwd, ".pi", "extensions"),
      join(cwd, ".pi", "agents"),
      join(cwd, ".pi", "settings.json"),
      join(cwd, ".agents", "skills"),
    );
  }
  return out;
}

/** The modification times of `paths` as one string (a missing path counts too). */
export async function signatureOf(paths: string[]): Promise<string> {
  const parts = await Promise.all(paths.map(async (p) => {
    try {
      const st = await Deno.stat(p);
      return `${st.mtime?.getTime() ?? 0}:${st.size}`;
    } catch {
      return "-";
    }
  }));
  return parts.join("|");
}

/** A value per key, computed again when its signature changed or after {@linkcode clear}. */
export class SignedCache<T> {
  readonly #entries = new Map<string, { sig: string; value: T }>();
  /** Keys kept at most (one per project folder asked about). */
  readonly #max: number;

  constructor(max = 64) {
    this.#max = max;
  }

  async get(key: string, sig: string, compute: () => Promise<T>): Promise<T> {
    const hit = this.#entries.get(key);
    if (hit && hit.sig === sig) return hit.value;
    const value = await compute();
    this.#entries.delete(key);
    this.#entries.set(key, { sig, value });
    if (this.#entries.size > this.#max) {
      this.#entries.delete(this.#entries.keys().next().value!);
    }
    return value;
  }

  clear(): void {
    this.#entries.clear();
  }
}
