/**
 * A project's own pi code, kept out of the worker unless the person trusts
 * projects: the extensions of its `.pi/extensions/` and the `packages` and
 * `extensions` of its `.pi/settings.json`.
 *
 * pi loads them into the session's worker, which runs outside the agent
 * sandbox with the user's rights, at the session's start. A cloned
 * repository can carry them, and the agent's `bash` can make a `.pi` where
 * none was (the sandbox keeps an existing `.pi` read-only, but cannot keep
 * a folder that does not exist from being created): either would run as
 * the user the next time a session starts there. The project's skills,
 * prompt templates and agent definitions (text) still load, and so does
 * the rest of its settings. `"trustProjectConfig": true` in
 * `~/.baton/config.json` (which a project's file cannot set) loads them as
 * pi itself does; so does the person's own code in `~/.baton` in any case.
 *
 * The hooks below are on pi's resource loader and settings manager
 * (0.73.1): the settings the package manager reads, and what it resolves
 * before any module is imported.
 *
 * @module
 */
import type { DefaultResourceLoader, SettingsManager } from "@mariozechner/pi-coding-agent";
import { readUserConfig } from "./config.ts";

interface Resolved {
  extensions: { metadata: { scope?: string } }[];
}

/**
 * Makes `loader` (built over `settings`) skip the project's extensions and
 * packages; answers how many it skipped at its last load.
 */
export function withoutProjectCode(
  loader: DefaultResourceLoader,
  settings: SettingsManager,
): () => number {
  let declared = 0;
  let found = 0;
  const s = settings as unknown as { getProjectSettings(): Record<string, unknown> };
  const project = s.getProjectSettings.bind(s);
  s.getProjectSettings = () => {
    const { packages, extensions, ...rest } = project();
    declared = [packages, extensions].reduce<number>(
      (n, l) => n + (Array.isArray(l) ? l.length : 0),
      0,
    );
    return rest;
  };
  const pm =
    (loader as unknown as { packageManager: { resolve(...a: unknown[]): Promise<Resolved> } })
      .packageManager;
  const resolve = pm.resolve.bind(pm);
  pm.resolve = async (...a: unknown[]) => {
    const r = await resolve(...a);
    const kept = r.extensions.filter((e) => e.metadata.scope !== "project");
    found = r.extensions.length - kept.length;
    return { ...r, extensions: kept };
  };
  return () => declared + found;
}

/**
 * Applies {@linkcode withoutProjectCode} unless `<agentDir>/config.json`
 * trusts projects. Answers the session's notice of what was skipped at the
 * loader's last load (none when trusted, or when nothing was).
 */
export async function guardProjectCode(
  agentDir: string,
  loader: DefaultResourceLoader,
  settings: SettingsManager,
): Promise<() => string | undefined> {
  const global = await readUserConfig(agentDir).catch((): Record<string, unknown> => ({}));
  if (global.trustProjectConfig === true) return () => undefined;
  const skipped = withoutProjectCode(loader, settings);
  return () => {
    const count = skipped();
    return count === 0 ? undefined : `The project's .pi has ${count} extension(s) or ` +
      "package(s) that are not loaded: they would run outside the sandbox with your rights. " +
      'To load a project\'s own, set "trustProjectConfig": true in ~/.baton/config.json.';
  };
}
