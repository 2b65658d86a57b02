/**
 * The worker's entry to MCP: reads `mcpServers` and the MCP settings from the
 * global and the project's config files and starts the session's servers.
 *
 * @module
 */
import { join } from "node:path";
import { ConfigError, readUserConfig } from "../config.ts";
import type { ResolvedSandbox } from "../sandbox/policy.ts";
import type { SandboxState } from "../sandbox/session.ts";
import { toolEnvironment } from "../sandbox/tool_env.ts";
import { mcpSettings, type ProjectNetwork } from "./config.ts";
import type { ChildReaper } from "../child_reaper.ts";
import { type McpNotice, McpServers } from "./servers.ts";

/** Options of {@linkcode startSessionMcp}. */
export interface SessionMcpOptions {
  batonDir: string;
  cwd: string;
  sandbox: SandboxState;
  /** Variables kept from the servers while the sandbox is active (the providers' keys). */
  hidden: ReadonlySet<string>;
  reaper: ChildReaper;
  /** The sandbox's network rules for a project's HTTP servers (null: none). */
  projectNetwork: ProjectNetwork | null;
  notify: (n: McpNotice) => void;
}

/** A config file's object, or {} with a notice when it cannot be read. */
export async function readConfigOrNotice(
  dir: string,
  notify: (n: { level: "error"; text: string }) => void,
): Promise<Record<string, unknown>> {
  try {
    return await readUserConfig(dir);
  } catch (err) {
    if (!(err instanceof ConfigError) && !(err instanceof Deno.errors.PermissionDenied)) throw err;
    notify({ level: "error", text: err.message });
    return {};
  }
}

/**
 * Whether a project's own hooks and MCP servers may run: always under an
 * enforcing sandbox (they get no more than the agent has), and otherwise
 * only when the person's own `~/.baton/config.json` says
 * `"trustProjectConfig": true` (a project's file cannot say it for itself):
 * a cloned repository's `.baton/config.json` would otherwise run its
 * commands with the user's rights as soon as a session starts there.
 */
export function projectTrusted(global: Record<string, unknown>, sandbox: SandboxState): boolean {
  return sandbox.active || global.trustProjectConfig === true;
}

/** The notice of project entries left out by {@linkcode projectTrusted}. */
export function untrustedNotice(what: string, count: number): string {
  return `The project's .baton/config.json has ${count} ${what} that are not run: the sandbox is ` +
    `off, so they would run with your rights. To run a project's ${what} anyway, set ` +
    `"trustProjectConfig": true in ~/.baton/config.json.`;
}

/** Starts the MCP servers a session in `cwd` is configured with (never throws). */
export async function startSessionMcp(o: SessionMcpOptions): Promise<McpServers> {
  const servers = new McpServers();
  const global = await readConfigOrNotice(o.batonDir, o.notify);
  let project = await readConfigOrNotice(join(o.cwd, ".baton"), o.notify);
  const declared = project.mcpServers;
  if (!projectTrusted(global, o.sandbox) && declared && typeof declared === "object") {
    const count = Object.keys(declared).length;
    if (count > 0) o.notify({ level: "error", text: untrustedNotice("MCP server(s)", count) });
    project = { ...project, mcpServers: undefined };
  }
  // The global file's `${VAR}` may name any variable (the person wrote it);
  // a project's, and the servers' own environment, not the hidden ones.
  const all = Deno.env.toObject();
  const env = toolEnvironment(o.sandbox, o.hidden);
  const settings = mcpSettings(global, project, (k) => all[k], o.projectNetwork, (k) => env[k]);
  await servers.start(settings, {
    cwd: o.cwd,
    sandbox: o.sandbox,
    env,
    reaper: o.reaper,
    notify: o.notify,
  });
  return servers;
}

/**
 * The rules a project's HTTP servers pass: the sandbox's network lists when
 * it is active, every server refused when it refuses tools, none when off.
 */
export function projectNetworkOf(
  policy: ResolvedSandbox,
  state: SandboxState,
): ProjectNetwork | null {
  if (state.refuse) return { refuse: state.refuse };
  if (!state.active) return null;
  const net = (policy.runtime?.network ?? {}) as {
    allowedDomains?: string[];
    deniedDomains?: string[];
  };
  return {
    ...(net.allowedDomains ? { allowedDomains: net.allowedDomains } : {}),
    ...(net.deniedDomains ? { deniedDomains: net.deniedDomains } : {}),
  };
}
