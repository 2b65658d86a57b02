/**
 * A session's MCP servers, in its worker: each one started in parallel
 * through `@modelcontextprotocol/sdk` (a stdio child under the session's
 * sandbox, or a streamable HTTP endpoint), bounded by `mcpTimeout` from
 * spawn to its tool list; a server that fails or times out is reported and
 * skipped. Its tools become pi tools named `mcp__{server}__{tool}`. The
 * stdio children end with the worker (its {@linkcode ChildReaper}).
 *
 * @module
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { ToolDefinition } from "@mariozechner/pi-coding-agent";
import type { ChildReaper } from "../child_reaper.ts";
import type { SandboxState } from "../sandbox/session.ts";
import { sandboxedShellCommand, shellFor, shellQuote } from "../sandbox/command.ts";
import { type McpServerConfig, type McpSettings, SLOW_STARTUP_MS, toolName } from "./config.ts";

/** What a session shows about its MCP servers. */
export interface McpNotice {
  level: "info" | "error";
  text: string;
  server?: string;
}

/** One started server's outcome, as `session_start.mcp` lists it. */
export interface McpServerStatus {
  name: string;
  ok: boolean;
  tools: number;
  ms: number;
  error?: string;
}

/** Options of {@linkcode McpServers.start}. */
export interface McpStartOptions {
  cwd: string;
  sandbox: SandboxState;
  /** The worker's environment, the base of each stdio server's. */
  env: Record<string, string>;
  /** Shown in the session as it happens (the slow-startup warning, failures). */
  notify: (n: McpNotice) => void;
  /** Ends the stdio children with the worker. */
  reaper: ChildReaper;
  /** Timers (replaceable in tests). */
  setTimeout?: typeof setTimeout;
}

/** The MCP client's classes, loaded on first use (see {@linkcode loadMcpClient}). */
interface McpClientModules {
  Client: typeof Client;
  StdioClientTransport: typeof StdioClientTransport;
  StreamableHTTPClientTransport: typeof StreamableHTTPClientTransport;
}

let mcpClient: Promise<McpClientModules> | null = null;

/**
 * The SDK's client modules, imported once when a session has a server (or a
 * spare worker waits): they cost a cold worker half a second here, and most
 * sessions have none.
 */
export function loadMcpClient(): Promise<McpClientModules> {
  mcpClient ??= Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/stdio.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
  ]).then(([index, stdio, http]) => ({
    Client: index.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
  }));
  return mcpClient;
}

/** The most of a server's stderr kept to explain a failure. */
const STDERR_TAIL = 2000;
/** A tool result longer than this is cut before it reaches the model. */
const MAX_RESULT_CHARS = 200_000;

interface Running {
  name: string;
  client: Client;
  transport: Transport;
  /** The stdio child's process id (its shell or bwrap), for the last-moment kill. */
  pid: () => number | null;
}

/** The MCP servers of one session. */
export class McpServers {
  readonly #running: Running[] = [];
  #tools: ToolDefinition[] = [];
  #status: McpServerStatus[] = [];

  /** Tools of the servers that started, for `createAgentSession({ customTools })`. */
  get tools(): ToolDefinition[] {
    return this.#tools;
  }

  get status(): McpServerStatus[] {
    return this.#status;
  }

  /**
   * Starts every server at once and waits for all (each one bounded by
   * `mcpTimeout`). Never throws: failures become notices and statuses.
   */
  async start(settings: McpSettings, o: McpStartOptions): Promise<void> {
    for (const p of settings.problems) o.notify({ level: "error", text: p });
    if (settings.servers.length === 0) return;
    const timers = o.setTimeout ?? setTimeout;
    const began = Date.now();
    let pending = settings.servers.map((s) => s.name);
    const slow = settings.slowStartupWarning
      ? timers(() => {
        o.notify({
          level: "info",
          text: `MCP servers are slow to start (over ${SLOW_STARTUP_MS / 1000} s), waiting ` +
            `for: ${pending.join(", ")}` +
            (settings.timeoutMs > 0 ? ` (limit ${settings.timeoutMs / 1000} s each)` : ""),
        });
      }, SLOW_STARTUP_MS)
      : null;
    try {
      this.#status = await Promise.all(settings.servers.map(async (server) => {
        const t0 = Date.now();
        try {
          const tools = await this.#startOne(server, settings, o);
          // Two names may sanitise alike (`a.b` and `a_b`): the first one keeps it.
          const taken = new Set(this.#tools.map((t) => t.name));
          const clash: string[] = [];
          const kept = tools.filter((t) => {
            if (taken.has(t.name)) clash.push(t.name);
            else taken.add(t.name);
            return !clash.includes(t.name);
          });
          if (clash.length) {
            o.notify({
              level: "error",
              server: server.name,
              text: `MCP server '${server.name}': tools left out, their names are taken: ` +
                clash.slice(0, 10).join(", "),
            });
          }
          this.#tools.push(...kept);
          return { name: server.name, ok: true, tools: kept.length, ms: Date.now() - t0 };
        } catch (err) {
          const error = errorText(err);
          o.notify({
            level: "error",
            server: server.name,
            text: `MCP server '${server.name}' skipped: ${error}`,
          });
          return { name: server.name, ok: false, tools: 0, ms: Date.now() - t0, error };
        } finally {
          pending = pending.filter((n) => n !== server.name);
        }
      }));
    } finally {
      if (slow !== null) clearTimeout(slow);
    }
    const took = Date.now() - began;
    if (took > SLOW_STARTUP_MS && settings.slowStartupWarning) {
      o.notify({ level: "info", text: `MCP servers took ${(took / 1000).toFixed(1)} s to start` });
    }
  }

  async #startOne(
    server: McpServerConfig,
    settings: McpSettings,
    o: McpStartOptions,
  ): Promise<ToolDefinition[]> {
    const limit = settings.timeoutMs;
    const abort = new AbortController();
    let stderr = "";
    const sdk = await loadMcpClient();
    const { transport, pid } = await this.#transport(sdk, server, o, abort.signal, (chunk) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL);
      for (const line of chunk.split("\n")) {
        if (line.trim()) console.error(`mcp ${server.name}: ${line}`);
      }
    });
    const client = new sdk.Client({ name: "baton", version: "0.1.0" });
    // A server that exits is no longer the reaper's (its pid may be reused).
    client.onclose = () => {
      const p = pid();
      if (p) o.reaper.remove(p);
    };
    const entry: Running = { name: server.name, client, transport, pid };
    this.#running.push(entry);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = limit > 0
      ? new Promise<never>((_, reject) => {
        timer = (o.setTimeout ?? setTimeout)(() => {
          abort.abort();
          reject(new Error(`no answer within mcpTimeout (${limit} ms)`));
        }, limit);
      })
      : null;
    const work = (async () => {
      // The SDK's own request limit too, so nothing of it outlives ours.
      const opts = { signal: abort.signal, ...(limit > 0 ? { timeout: limit } : {}) };
      await client.connect(transport, opts);
      const tools: ToolDefinition[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {}, opts);
        for (const t of page.tools) {
          tools.push(mcpTool(server.name, t, client, settings.toolTimeoutMs));
        }
        cursor = page.nextCursor;
      } while (cursor && tools.length < 1000);
      return tools;
    })();
    try {
      return await (deadline ? Promise.race([work, deadline]) : work);
    } catch (err) {
      work.catch(() => {});
      this.#kill(entry);
      const p = pid();
      if (p) o.reaper.remove(p);
      const tail = stderr.trim().split("\n").slice(-3).join(" | ").slice(-500);
      throw new Error(`${errorText(err)}${tail ? ` (stderr: ${tail})` : ""}`);
    } finally {
      clearTimeout(timer);
    }
  }

  async #transport(
    sdk: McpClientModules,
    server: McpServerConfig,
    o: McpStartOptions,
    signal: AbortSignal,
    onStderr: (chunk: string) => void,
  ): Promise<{ transport: Transport; pid: () => number | null }> {
    if (server.type === "http") {
      const transport = new sdk.StreamableHTTPClientTransport(new URL(server.url), {
        requestInit: { headers: server.headers },
      });
      return { transport, pid: () => null };
    }
    const line = [server.command, ...server.args].map(shellQuote).join(" ");
    const wrapped = await sandboxedShellCommand(o.sandbox, line, signal);
    const shell = shellFor();
    // Under the sandbox the server runs inside the runtime's bubblewrap (or
    // Seatbelt) invocation; without it, the command itself, as other clients do.
    const direct = wrapped === line;
    const transport = new sdk.StdioClientTransport({
      command: direct ? server.command : shell.cmd,
      args: direct ? server.args : [shell.flag, wrapped],
      env: { ...o.env, ...server.env },
      cwd: server.cwd ?? o.cwd,
      stderr: "pipe",
    });
    const decoder = new TextDecoder();
    transport.stderr?.on("data", (b: Uint8Array) => onStderr(decoder.decode(b)));
    // Kept from the spawn on: the SDK forgets it when a close or an abort begins.
    let spawned: number | null = null;
    const start = transport.start.bind(transport);
    transport.start = async () => {
      await start();
      spawned = transport.pid;
      if (spawned) o.reaper.add(spawned);
    };
    return { transport, pid: () => spawned };
  }

  /** Closes every server (the SDK ends a stdio child's stdin, then signals it). */
  async close(): Promise<void> {
    const all = this.#running.splice(0);
    await Promise.all(all.map((r) => r.client.close().catch(() => {})));
  }

  #kill(entry: Running): void {
    const i = this.#running.indexOf(entry);
    if (i >= 0) this.#running.splice(i, 1);
    killPid(entry.pid());
    entry.client.close().catch(() => {});
  }
}

function killPid(pid: number | null): void {
  if (!pid) return;
  try {
    Deno.kill(pid, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** An MCP tool as listed by `tools/list`. */
interface ListedTool {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

type Content = { type: "text"; text: string } | { type: "image"; data: string; mimeType: string };

/** The pi tool that calls one MCP tool. */
function mcpTool(server: string, t: ListedTool, client: Client, timeoutMs: number): ToolDefinition {
  const name = toolName(server, t.name);
  const schema: Record<string, unknown> = { ...(t.inputSchema ?? {}) };
  delete schema.$schema;
  if (schema.type !== "object") schema.type = "object";
  schema.properties ??= {};
  return {
    name,
    label: `${server}: ${t.title ?? t.name}`,
    description: (t.description ?? "").slice(0, 4000) || `MCP tool ${t.name} of ${server}`,
    // pi validates a plain JSON schema as it is (no TypeBox metadata needed).
    parameters: schema as unknown as ToolDefinition["parameters"],
    async execute(_id, params, signal) {
      const res = await client.callTool(
        { name: t.name, arguments: (params ?? {}) as Record<string, unknown> },
        undefined,
        { ...(signal ? { signal } : {}), timeout: timeoutMs || 2_147_483_647 },
      );
      const content = toContent(res as Record<string, unknown>);
      if (res.isError) {
        throw new Error(content.map((c) => c.type === "text" ? c.text : "[image]").join("\n"));
      }
      return { content, details: { server, tool: t.name } };
    },
  } as ToolDefinition;
}

/** An MCP tool result as the model's content: text and images; other kinds as JSON text. */
function toContent(res: Record<string, unknown>): Content[] {
  const out: Content[] = [];
  let chars = 0;
  const push = (c: Content) => {
    if (c.type === "text") {
      const room = MAX_RESULT_CHARS - chars;
      if (room <= 0) return;
      const text = c.text.length > room
        ? c.text.slice(0, room) + `\n… (cut at ${MAX_RESULT_CHARS} characters)`
        : c.text;
      chars += text.length;
      out.push({ type: "text", text });
    } else out.push(c);
  };
  for (const c of Array.isArray(res.content) ? res.content : []) {
    if (c?.type === "text" && typeof c.text === "string") push({ type: "text", text: c.text });
    else if (c?.type === "image" && typeof c.data === "string") {
      push({ type: "image", data: c.data, mimeType: String(c.mimeType ?? "image/png") });
    } else if (c?.type === "resource" && typeof c.resource?.text === "string") {
      push({ type: "text", text: c.resource.text });
    } else push({ type: "text", text: JSON.stringify(c) });
  }
  if (out.length === 0 && res.structuredContent !== undefined) {
    push({ type: "text", text: JSON.stringify(res.structuredContent) });
  }
  if (out.length === 0) out.push({ type: "text", text: "(no output)" });
  return out;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
