/**
 * The sandbox seen from the daemon: the ring of the last 100 violations of
 * every session (they pass through as `sandbox:violation` events), the
 * status and config requests of the relay (`sandbox_status`,
 * `sandbox_config`), and the answers to `/sandbox`, `/sandbox violations`
 * and `/sandbox config` typed in a session.
 *
 * @module
 */
import type { SessionEventBody } from "../../shared/protocol.ts";
import {
  RECENT_VIOLATIONS,
  type SandboxConfig,
  type SandboxConfigSaved,
  type SandboxStatus,
  type SandboxViolation,
  VIOLATION_RING_SIZE,
} from "../../shared/sandbox_api.ts";
import { readUserConfig, updateUserConfig } from "../config.ts";
import { folderSandboxConfig, type PolicySource } from "./folder_policy.ts";
import { RequestError } from "../control_link.ts";
import { missingPrograms } from "./deps.ts";
import { sessionHiddenVariables } from "./tool_env.ts";
import { deepMerge, SandboxConfigError, validateSandboxConfig } from "./policy.ts";

/** What the service needs from the daemon. */
export interface SandboxServiceOptions {
  home: string;
  batonDir: string;
  /** `--sandbox` / `BATON_SANDBOX`, already checked. */
  modeOverride: string | null;
  /** `BATON_NO_SANDBOX=1`. */
  noSandbox: boolean;
  os?: typeof Deno.build.os;
  /** `PATH`, to find bwrap and socat. */
  path?: string;
}

const OPERATIONS = new Set(["read", "write", "network"]);

/** The daemon's sandbox state and answers. */
export class SandboxService {
  readonly #o: SandboxServiceOptions;
  readonly #ring: SandboxViolation[] = [];
  #total = 0;

  constructor(o: SandboxServiceOptions) {
    this.#o = o;
  }

  /** Keeps a violation a worker reported (the oldest drops out past 100). */
  record(e: SessionEventBody): void {
    if (!OPERATIONS.has(String(e.operation))) return;
    this.#total++;
    this.#ring.push({
      timestamp: String(e.timestamp ?? new Date().toISOString()).slice(0, 40),
      operation: e.operation as SandboxViolation["operation"],
      target: String(e.target ?? "").slice(0, 4096),
      reason: String(e.reason ?? "").slice(0, 1000),
    });
    if (this.#ring.length > VIOLATION_RING_SIZE) this.#ring.shift();
  }

  /**
   * The global config (with the mode override), and a project's merged over
   * it: a broken global file is an error to show, a project's is left out.
   */
  resolvedConfig(cwd?: string): Promise<SandboxConfig> {
    const src: PolicySource = {
      home: this.#o.home,
      batonDir: this.#o.batonDir,
      modeOverride: this.#o.modeOverride,
      noSandbox: this.#o.noSandbox,
      protect: [],
      sshAuthSock: null,
    };
    return folderSandboxConfig(src, cwd || undefined, { global: "throw", project: "skip" });
  }

  /** `GET sandbox-status`. */
  async status(cwd?: string): Promise<SandboxStatus> {
    const config = await this.resolvedConfig(cwd);
    const os = this.#o.os ?? Deno.build.os;
    const platform = os === "windows" ? "win32" : os === "darwin" ? "darwin" : "linux";
    let inactiveReason: string | undefined;
    if (config.mode === "none") inactiveReason = "Mode is none";
    else if (platform === "win32") inactiveReason = "The sandbox is inactive on Windows";
    else if (platform === "linux") {
      const missing = missingPrograms(["bwrap", "socat"], this.#o.path);
      if (missing.length) inactiveReason = `Missing on this machine: ${missing.join(", ")}`;
    }
    const active = inactiveReason === undefined;
    // Names only, of variables this runner has: what `env` in the agent's shell lacks.
    const env = (k: string) => Deno.env.get(k);
    const hidden = active ? await sessionHiddenVariables(this.#o.batonDir, env) : new Set<string>();
    return {
      mode: config.mode ?? "basic",
      active,
      platform,
      hiddenVariables: [...hidden].filter((k) => env(k) !== undefined).sort(),
      violations: this.#total,
      recentViolations: this.#ring.slice(-RECENT_VIOLATIONS).reverse(),
      config,
      ...(inactiveReason ? { inactiveReason } : {}),
    };
  }

  /** `PUT sandbox-config`: deep-merged into the global config file. */
  async saveConfig(patch: unknown): Promise<SandboxConfigSaved> {
    if (typeof patch !== "object" || patch === null || Array.isArray(patch)) {
      throw new RequestError("bad_request", "The sandbox config must be an object");
    }
    const file = await readUserConfig(this.#o.batonDir);
    const current = typeof file.sandbox === "object" && file.sandbox !== null
      ? file.sandbox as Record<string, unknown>
      : {};
    const next = deepMerge(current, patch as Record<string, unknown>);
    try {
      validateSandboxConfig(next);
    } catch (err) {
      if (err instanceof SandboxConfigError) {
        throw new RequestError("bad_request", err.message);
      }
      throw err;
    }
    await updateUserConfig(this.#o.batonDir, { sandbox: next });
    return {
      saved: true,
      resolvedConfig: await this.resolvedConfig(),
      message: "Saved: the changes apply to sessions started from now on",
    };
  }

  /** The relay's requests (`sandbox_status`, `sandbox_config`). */
  request(op: string, data: unknown): Promise<unknown> {
    if (op === "sandbox_config") {
      return this.saveConfig((data as { config?: unknown } | null)?.config);
    }
    return this.status();
  }

  /**
   * The answer to `/sandbox`, `/sandbox violations` or `/sandbox config`
   * typed in a session in `cwd`, as an event for that session; null for any
   * other text (which goes to the agent).
   */
  async slash(text: string, cwd: string): Promise<SessionEventBody | null> {
    const m = text.trim().match(/^\/sandbox(?:\s+(violations|config))?$/);
    if (!m) return null;
    const what = (m[1] ?? "status") as "status" | "violations" | "config";
    const st = await this.status(cwd);
    const command = text.trim();
    if (what === "violations") {
      const list = this.#ring.slice();
      const lines = list.map((v) => `${v.timestamp} ${v.operation} ${v.target}: ${v.reason}`);
      return {
        type: "sandbox:info",
        command,
        violations: list,
        text: list.length
          ? `Sandbox violations (${list.length} of ${this.#total}, oldest first):\n${
            lines.join("\n")
          }`
          : "No sandbox violations since the runner started",
      };
    }
    if (what === "config") {
      return {
        type: "sandbox:info",
        command,
        config: st.config,
        text: `Sandbox config (global plus this project's):\n${JSON.stringify(st.config, null, 2)}`,
      };
    }
    return {
      type: "sandbox:info",
      command,
      status: {
        mode: st.mode,
        active: st.active,
        platform: st.platform,
        violations: st.violations,
      },
      text:
        `Sandbox: mode ${st.mode}, ${
          st.active ? "active" : "inactive"
        }, platform ${st.platform}, ${st.violations} violation${st.violations === 1 ? "" : "s"}` +
        (st.inactiveReason ? ` (${st.inactiveReason})` : "") +
        (st.hiddenVariables.length
          ? `; provider keys kept from tools: ${st.hiddenVariables.join(", ")}`
          : ""),
    };
  }
}
