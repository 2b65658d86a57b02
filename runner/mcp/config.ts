/**
 * MCP settings from `<home>/.baton/config.json` and a project's
 * `.baton/config.json`: `mcpServers` in the format Claude Code and other
 * clients use (stdio `command`/`args`/`env`/`cwd`; streamable HTTP
 * `url`/`headers`), `mcpTimeout`, `slowStartupWarning` and
 * `mcpToolTimeout`. No I/O: the worker reads the files.
 *
 * @module
 */

import { domainCovers } from "../sandbox/policy.ts";
import { isObject } from "../../shared/json.ts";

/** Default of `mcpTimeout` (spec): how long one server may take to start and list its tools. */
export const DEFAULT_MCP_TIMEOUT_MS = 30_000;
/** Startup slower than this shows a warning in the session (spec: 5 s). */
export const SLOW_STARTUP_MS = 5_000;
/**
 * Default of `mcpToolTimeout` (beyond the spec): one tool call's limit. The
 * SDK's own default (60 s) cuts builds and searches that MCP tools run.
 */
export const DEFAULT_MCP_TOOL_TIMEOUT_MS = 600_000;

/** A server started as a child process that speaks MCP on stdin/stdout. */
export interface StdioServer {
  type: "stdio";
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
}

/** A server reached over MCP's streamable HTTP transport. */
export interface HttpServer {
  type: "http";
  url: string;
  headers: Record<string, string>;
}

/** One configured server, by its name. */
export type McpServerConfig = (StdioServer | HttpServer) & { name: string; from: string };

/** What a session starts. */
export interface McpSettings {
  servers: McpServerConfig[];
  /** Per server; 0: no limit. */
  timeoutMs: number;
  toolTimeoutMs: number;
  slowStartupWarning: boolean;
  /** Entries that were skipped, one line each (shown in the session). */
  problems: string[];
}

/**
 * `${VAR}` and `${VAR:-default}` in a value, from the worker's environment
 * (as Claude Code expands them); an unset variable without a default is empty.
 */
export function expandVars(text: string, env: (k: string) => string | undefined): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g,
    (_m, name: string, def?: string) => env(name) ?? def ?? "",
  );
}

function stringMap(
  v: unknown,
  where: string,
  env: (k: string) => string | undefined,
): Record<string, string> {
  if (v === undefined) return {};
  if (!isObject(v)) throw new Error(`${where} must be an object of strings`);
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== "string") throw new Error(`${where}.${k} must be a string`);
    out[k] = expandVars(val, env);
  }
  return out;
}

/** One `mcpServers` entry, checked; throws with what is wrong. */
export function parseServer(
  name: string,
  raw: unknown,
  env: (k: string) => string | undefined,
): StdioServer | HttpServer {
  const where = `mcpServers.${name}`;
  if (!isObject(raw)) throw new Error(`${where} must be an object`);
  const type = raw.type ?? (typeof raw.url === "string" ? "http" : "stdio");
  if (type === "stdio") {
    if (typeof raw.command !== "string" || raw.command.trim() === "") {
      throw new Error(`${where}.command must be a non-empty string`);
    }
    const args = raw.args ?? [];
    if (!Array.isArray(args) || args.some((a) => typeof a !== "string")) {
      throw new Error(`${where}.args must be an array of strings`);
    }
    if (raw.cwd !== undefined && typeof raw.cwd !== "string") {
      throw new Error(`${where}.cwd must be a string`);
    }
    return {
      type: "stdio",
      command: expandVars(raw.command, env),
      args: (args as string[]).map((a) => expandVars(a, env)),
      env: stringMap(raw.env, `${where}.env`, env),
      ...(typeof raw.cwd === "string" ? { cwd: expandVars(raw.cwd, env) } : {}),
    };
  }
  if (type === "http" || type === "streamable-http" || type === "streamableHttp") {
    if (typeof raw.url !== "string") throw new Error(`${where}.url must be a string`);
    const url = expandVars(raw.url, env);
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new Error(`${where}.url is not a URL: '${url}'`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new Error(`${where}.url must be http(s): '${url}'`);
    }
    return { type: "http", url, headers: stringMap(raw.headers, `${where}.headers`, env) };
  }
  throw new Error(
    `${where}.type '${String(type)}' is not supported (stdio or http; sse is not)`,
  );
}

function durationMs(v: unknown, key: string, fallback: number, problems: string[]): number {
  if (v === undefined) return fallback;
  if (typeof v === "number" && Number.isFinite(v) && v >= 0) return Math.round(v);
  problems.push(`${key} must be a number of milliseconds (0: no limit): using ${fallback}`);
  return fallback;
}

/**
 * The network rules of the session's sandbox as far as a project's HTTP
 * servers are concerned: the worker reaches them from outside the sandbox,
 * so a project (which the agent may write) must not name a host the
 * agent's own commands cannot reach. Null: no rule (the sandbox is off).
 */
export interface ProjectNetwork {
  /** Hosts allowed (`*.example.com` patterns); undefined: every host. */
  allowedDomains?: string[];
  deniedDomains?: string[];
  /** Refuse every project server (`failClosed` after a failed init). */
  refuse?: string;
}

/** Why a project may not use an HTTP server at `url`, or null. */
export function projectUrlRefused(url: string, net: ProjectNetwork | null): string | null {
  if (net === null) return null;
  if (net.refuse) return net.refuse;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (net.deniedDomains?.some((d) => domainCovers(d, host))) {
    return `its host '${host}' is in the sandbox's network.deniedDomains`;
  }
  if (net.allowedDomains && !net.allowedDomains.some((d) => domainCovers(d, host))) {
    return `its host '${host}' is not in the sandbox's network.allowedDomains`;
  }
  return null;
}

/**
 * The settings a session in a project runs with: the global file's servers
 * and the project's added to them. A project cannot replace a server the
 * user configured under the same name (the global one stays: a cloned
 * repository must not take over a name the user trusts). Bad entries are
 * skipped with a line in `problems`; the timeouts and the warning switch
 * come from the global file only. A project's HTTP servers must pass the
 * sandbox's network rules ({@linkcode projectUrlRefused}), and its `${VAR}`
 * expand from `projectEnv` (the environment without the providers' keys).
 */
export function mcpSettings(
  global: Record<string, unknown>,
  project: Record<string, unknown>,
  env: (k: string) => string | undefined,
  projectNetwork: ProjectNetwork | null = null,
  projectEnv: (k: string) => string | undefined = env,
): McpSettings {
  const problems: string[] = [];
  const servers: McpServerConfig[] = [];
  const add = (file: Record<string, unknown>, from: string) => {
    const list = file.mcpServers;
    if (list === undefined) return;
    if (!isObject(list)) {
      problems.push(`mcpServers in the ${from} config must be an object: ignored`);
      return;
    }
    for (const [name, raw] of Object.entries(list)) {
      if (!/^[A-Za-z0-9_. -]{1,64}$/.test(name)) {
        problems.push(
          `MCP server '${name.slice(0, 64)}' (${from}): the name must be 1-64 ` +
            `letters, digits, spaces, '.', '_' or '-': skipped`,
        );
        continue;
      }
      if (isObject(raw) && raw.disabled === true) continue;
      if (servers.some((s) => s.name === name)) {
        problems.push(
          `MCP server '${name}' of the ${from} config is also in the global ` +
            `config: the global one is used`,
        );
        continue;
      }
      try {
        const server = parseServer(name, raw, from === "project" ? projectEnv : env);
        const refused = from === "project" && server.type === "http"
          ? projectUrlRefused(server.url, projectNetwork)
          : null;
        if (refused) throw new Error(refused);
        servers.push({ ...server, name, from });
      } catch (err) {
        problems.push(`MCP server '${name}' (${from}): ${(err as Error).message}: skipped`);
      }
    }
  };
  add(global, "global");
  add(project, "project");
  return {
    servers,
    timeoutMs: durationMs(global.mcpTimeout, "mcpTimeout", DEFAULT_MCP_TIMEOUT_MS, problems),
    toolTimeoutMs: durationMs(
      global.mcpToolTimeout,
      "mcpToolTimeout",
      DEFAULT_MCP_TOOL_TIMEOUT_MS,
      problems,
    ),
    slowStartupWarning: global.slowStartupWarning !== false,
    problems,
  };
}

/** The agent's name of an MCP tool: `mcp__{server}__{tool}`, within what model APIs accept. */
export function toolName(server: string, tool: string): string {
  const clean = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, "_");
  const name = `mcp__${clean(server)}__${clean(tool)}`;
  // OpenAI and Anthropic accept at most 64 characters: keep the start, and a
  // hash of the whole so two long names stay apart.
  if (name.length <= 64) return name;
  let h = 0;
  for (const c of name) h = (Math.imul(h, 31) + c.charCodeAt(0)) >>> 0;
  return `${name.slice(0, 55)}_${h.toString(36).padStart(7, "0").slice(0, 8)}`;
}
