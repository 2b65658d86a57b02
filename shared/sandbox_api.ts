/**
 * Wire types of the agent sandbox: its configuration (under `sandbox` in
 * `~/.baton/config.json` and a project's `.baton/config.json`), a violation,
 * and the answers of `GET /api/runners/{runnerId}/sandbox-status` and
 * `PUT /api/runners/{runnerId}/sandbox-config`. Plain types only; the web
 * client imports them.
 *
 * @module
 */

/** The sandbox modes, weakest first (a project may only move right). */
export const SANDBOX_MODES = ["none", "basic", "full"] as const;
/** One of {@linkcode SANDBOX_MODES}. */
export type SandboxMode = typeof SANDBOX_MODES[number];

/** The `sandbox` object of a config file (every key optional; extra keys pass through). */
export interface SandboxConfig {
  mode?: SandboxMode;
  filesystem?: {
    denyRead?: string[];
    allowWrite?: string[];
    denyWrite?: string[];
    [key: string]: unknown;
  };
  network?: {
    allowedDomains?: string[];
    deniedDomains?: string[];
    allowLocalBinding?: boolean;
    allowUnixSockets?: string[];
    allowAllUnixSockets?: boolean;
    [key: string]: unknown;
  };
  mandatoryDenySearchDepth?: number;
  enableWeakerNetworkIsolation?: boolean;
  allowPty?: boolean;
  ignoreViolations?: Record<string, string[]>;
  /** Beyond the spec: refuse to run tools when the sandbox cannot start (default false). */
  failClosed?: boolean;
  [key: string]: unknown;
}

/** What the sandbox blocked. `network` is beyond the spec (a denied outbound connection). */
export interface SandboxViolation {
  /** ISO 8601. */
  timestamp: string;
  operation: "read" | "write" | "network";
  /** A path (read, write) or a host (network). */
  target: string;
  reason: string;
}

/** The most violations a runner keeps (the spec's ring buffer). */
export const VIOLATION_RING_SIZE = 100;
/** How many `sandbox-status` lists, newest first. */
export const RECENT_VIOLATIONS = 20;

/** `GET /api/runners/{runnerId}/sandbox-status`. */
export interface SandboxStatus {
  mode: SandboxMode;
  /** Whether enforcement runs (false on Windows, in `none`, or without bwrap/socat on Linux). */
  active: boolean;
  platform: "darwin" | "linux" | "win32";
  /**
   * Names of the runner's variables that sandboxed tools (bash, hooks, MCP
   * servers) start without: the model providers' keys (docs/sandbox.md,
   * "Provider keys"). Empty while the sandbox is inactive.
   */
  hiddenVariables: string[];
  /** Violations since the runner started. */
  violations: number;
  /** The last 20, newest first. */
  recentViolations: SandboxViolation[];
  /** The resolved configuration (global config; a session also merges its project's). */
  config: SandboxConfig;
  /** Why `active` is false, when it is (missing helpers, platform, mode). */
  inactiveReason?: string;
}

/** `PUT /api/runners/{runnerId}/sandbox-config`. */
export interface SandboxConfigSaved {
  saved: true;
  resolvedConfig: SandboxConfig;
  message: string;
}
