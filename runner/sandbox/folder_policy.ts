/**
 * The sandbox policy of a folder: the global `~/.baton/config.json` with
 * the mode override (`--sandbox`, `BATON_SANDBOX`, `BATON_NO_SANDBOX`), a
 * project's `.baton/config.json` merged over it (it may only tighten), and
 * the options the resolution needs (paths to protect, the ssh agent). One
 * way for the three places that need it: a session's worker
 * (session.ts), `sandbox-status` in the daemon (service.ts) and the git
 * service's bubblewrap (git_sandbox.ts). They differ only in what an
 * invalid file does ({@linkcode Leniency}). No sandbox runtime here: the
 * daemon loads this module.
 *
 * @module
 */
import { join } from "node:path";
import type { SandboxConfig } from "../../shared/sandbox_api.ts";
import { readUserConfig } from "../config.ts";
import {
  applyModeOverride,
  mergeProjectConfig,
  modeOf,
  type ResolvedSandbox,
  resolveSandbox,
  validateSandboxConfig,
} from "./policy.ts";

/** Environment variables the daemon sets on workers (and reads itself). */
export const SANDBOX_ENV = {
  /** A mode from `--sandbox` (or the user's `BATON_SANDBOX`). */
  mode: "BATON_SANDBOX",
  /** `1`: no sandbox at all. */
  off: "BATON_NO_SANDBOX",
  /** More paths to hide, joined by the platform's list separator (the relay's data folder). */
  protect: "BATON_SANDBOX_PROTECT",
} as const;

/** Where a policy comes from, besides the folder. */
export interface PolicySource {
  home: string;
  /** `<home>/.baton` (the global config file's folder). */
  batonDir: string;
  /** `--sandbox` / `BATON_SANDBOX`, unchecked. */
  modeOverride: string | null;
  /** `BATON_NO_SANDBOX=1`. */
  noSandbox: boolean;
  /** `BATON_SANDBOX_PROTECT`, split. */
  protect: string[];
  /** `$SSH_AUTH_SOCK`. */
  sshAuthSock: string | null;
}

/**
 * A {@linkcode PolicySource} from an environment (a worker's, or the
 * daemon's); `home` defaults to the environment's own.
 */
export function policySourceFrom(
  env: (name: string) => string | undefined,
  home = env("HOME") ?? env("USERPROFILE") ?? "/",
  batonDir = join(home, ".baton"),
): PolicySource {
  const separator = Deno.build.os === "windows" ? ";" : ":";
  return {
    home,
    batonDir,
    modeOverride: env(SANDBOX_ENV.mode) ?? null,
    noSandbox: env(SANDBOX_ENV.off) === "1",
    protect: (env(SANDBOX_ENV.protect) ?? "").split(separator).filter((p) => p.trim() !== ""),
    sshAuthSock: env("SSH_AUTH_SOCK") || null,
  };
}

/**
 * What an invalid config does: a session refuses to start on either (the
 * person fixes the file); `sandbox-status` shows a broken global file as an
 * error and a project's as absent; the git service runs under the default
 * policy and the global one respectively, never none.
 */
export interface Leniency {
  global: "throw" | "default";
  project: "throw" | "skip";
}

/** Sessions' rule: any invalid file is an error. */
export const STRICT: Leniency = { global: "throw", project: "throw" };

/** The config for `cwd` (global with the override, the project's over it), its mode set. */
export async function folderSandboxConfig(
  src: PolicySource,
  cwd: string | undefined,
  leniency: Leniency,
): Promise<SandboxConfig> {
  let config: SandboxConfig;
  try {
    config = validateSandboxConfig((await readUserConfig(src.batonDir)).sandbox);
    config = applyModeOverride(config, { env: src.modeOverride ?? undefined });
  } catch (err) {
    if (leniency.global === "throw") throw err;
    config = {};
  }
  if (cwd !== undefined) {
    try {
      const project = validateSandboxConfig(
        (await readUserConfig(join(cwd, ".baton"))).sandbox,
        "sandbox (project .baton/config.json)",
      );
      config = mergeProjectConfig(config, project, { home: src.home, cwd });
    } catch (err) {
      if (leniency.project === "throw") throw err;
    }
  }
  return { ...config, mode: src.noSandbox ? "none" : modeOf(config) };
}

/** The resolved policy of a folder: paths, network and the runtime's settings. */
export async function folderPolicy(
  src: PolicySource,
  cwd: string,
  leniency: Leniency,
): Promise<ResolvedSandbox> {
  const config = await folderSandboxConfig(src, cwd, leniency);
  return resolveSandbox(config, {
    home: src.home,
    cwd,
    batonDir: src.batonDir,
    protect: src.protect,
    ...(src.sshAuthSock ? { sshAuthSock: src.sshAuthSock } : {}),
    noSandbox: src.noSandbox,
  });
}
