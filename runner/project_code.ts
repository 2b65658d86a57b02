/**
 * A project's own pi code and settings, kept out of the worker (and of the
 * daemon's listings) unless the person trusts projects: the extensions of
 * its `.pi/extensions/`, and its whole `.pi/settings.json` (its `packages`
 * and `extensions`, and settings such as `npmCommand` or `shellPath` that
 * name a program pi runs).
 *
 * pi loads them into the session's worker, which runs outside the agent
 * sandbox with the user's rights, at the session's start. A cloned
 * repository can carry them, and the agent's `bash` can make a `.pi` where
 * none was (the sandbox keeps an existing `.pi` read-only, but cannot keep
 * a folder that does not exist from being created): either would run as
 * the user the next time a session starts there. The project's skills,
 * prompt templates and agent definitions (text) still load.
 * `"trustProjectConfig": true` in `~/.baton/config.json` (which a project's
 * file cannot set) loads them as pi itself does; the person's own code and
 * settings in `~/.baton` load in any case.
 *
 * The hook below is on pi's resource loader (0.73.1): what its package
 * manager resolves, before any module is imported.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { DefaultResourceLoader, SettingsManager } from "@mariozechner/pi-coding-agent";
import { readUserConfig } from "./config.ts";

interface Resolved {
  extensions: { metadata: { scope?: string } }[];
}

/** Whether `<agentDir>/config.json` trusts projects (`trustProjectConfig: true`). */
export async function projectsTrusted(agentDir: string): Promise<boolean> {
  const global = await readUserConfig(agentDir).catch((): Record<string, unknown> => ({}));
  return global.trustProjectConfig === true;
}

/**
 * The folder pi's settings manager should read a project's settings under:
 * the project itself when trusted, else the agent folder (which holds no
 * `.pi/settings.json`), so no project setting is read at all.
 */
export function settingsFolder(trusted: boolean, cwd: string, agentDir: string): string {
  return trusted ? cwd : agentDir;
}

/**
 * Makes `loader` skip the project's extensions (`.pi/extensions`), and
 * answers the session's notice of what was skipped at its last load (none
 * when nothing was). Its settings manager must read no project settings
 * ({@linkcode settingsFolder}).
 */
export function withoutProjectCode(
  loader: DefaultResourceLoader,
  cwd: string,
): () => string | undefined {
  let found = 0;
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
  return () => {
    const settings = existsSync(join(cwd, ".pi", "settings.json"));
    if (found === 0 && !settings) return undefined;
    const what = [
      ...(found ? [`${found} extension(s)`] : []),
      ...(settings ? ["a settings.json"] : []),
    ].join(" and ");
    return `The project's .pi has ${what} that are not loaded: they would run outside the ` +
      'sandbox with your rights. To load a project\'s own, set "trustProjectConfig": true ' +
      "in ~/.baton/config.json.";
  };
}

/**
 * A session's pi settings for `cwd` (a project's only when trusted) and the
 * guard to put on its resource loader, which answers the skipped notice.
 */
export async function projectScope(agentDir: string, cwd: string): Promise<{
  settingsManager: SettingsManager;
  guard(loader: DefaultResourceLoader): () => string | undefined;
}> {
  const { SettingsManager } = await import("@mariozechner/pi-coding-agent");
  const trusted = await projectsTrusted(agentDir);
  return {
    settingsManager: SettingsManager.create(settingsFolder(trusted, cwd, agentDir), agentDir),
    guard: (loader) => trusted ? () => undefined : withoutProjectCode(loader, cwd),
  };
}
