/**
 * MCP servers for tests, built on the real SDK: the tools they offer, a
 * stdio server (`tests/testdata/mcp_stdio_server.ts`, started by the
 * runner's worker from `mcpServers`) and a streamable HTTP server in the
 * test process.
 *
 * @module
 */
import { join } from "node:path";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import assert from "node:assert/strict";
import type { SessionEvent } from "../../shared/protocol.ts";
import { applyEvents, emptyConversation } from "../../shared/conversation.ts";
import { json, signUp, type User, Viewer } from "./client.ts";
import { startTestRelay, type TestRelay } from "./in_process.ts";
import { MockLlm } from "./mock_llm.ts";
import { ROOT, type RunnerProcess, startRunner, tempDir } from "./procs.ts";
import { testServer } from "../testdata/mcp_tools.ts";

export { testServer };

/** The stdio server script. */
export const STDIO_SERVER = join(ROOT, "tests", "testdata", "mcp_stdio_server.ts");

/**
 * The `mcpServers` entry that starts the stdio server (`hang`: it never
 * answers; `gate`: it answers once that file exists).
 */
export function stdioEntry(
  o: { label: string; tag: string; hang?: boolean; marker?: string; gate?: string },
) {
  return {
    command: Deno.execPath(),
    args: [
      "run",
      "-A",
      "--quiet",
      "--cached-only",
      "--config",
      join(ROOT, "deno.json"),
      STDIO_SERVER,
      o.label,
      o.tag,
      o.hang ? "hang" : o.gate ? "gate" : "serve",
      ...(o.gate ? [o.gate] : o.marker ? [o.marker] : []),
    ],
  };
}

/** A streamable HTTP MCP server on a free port (stateless: a server per request). */
export function startHttpMcp(label: string, o: { token?: string } = {}) {
  const requests: Request[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    requests.push(req);
    if (o.token && req.headers.get("authorization") !== `Bearer ${o.token}`) {
      return new Response("unauthorized", { status: 401 });
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    await testServer(label).connect(transport);
    return await transport.handleRequest(req);
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/mcp`,
    requests,
    close: () => server.shutdown(),
  };
}

/** Processes whose command line holds `tag` (the stdio server's, inside a sandbox or not). */
export async function processesWith(tag: string): Promise<number[]> {
  const out: number[] = [];
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name) || Number(e.name) === Deno.pid) continue;
    try {
      const cmd = await Deno.readTextFile(`/proc/${e.name}/cmdline`);
      if (cmd.includes(tag)) out.push(Number(e.name));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/** bubblewrap and socat are here: the sandbox is active. */
export const haveBwrap = Deno.build.os === "linux" &&
  ["/usr/bin/bwrap", "/usr/bin/socat"].every((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });

/** A relay, a runner and the mock model. */
export interface AgentWorld {
  relay: TestRelay;
  llm: MockLlm;
  user: User;
  runner: RunnerProcess;
  home: string;
  project: string;
}

/** A relay, and a runner whose HOME has `~/.ssh/id_rsa` and whose `~/.baton/config.json` is `config`. */
export async function withAgentWorld(
  config: Record<string, unknown>,
  fn: (w: AgentWorld) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  await using relay = await startTestRelay();
  const llm = MockLlm.start();
  const home = await tempDir("baton-mcp-home-");
  const project = await tempDir("baton-mcp-proj-");
  await Deno.mkdir(join(home, ".baton"), { recursive: true });
  await Deno.mkdir(join(home, ".ssh"), { recursive: true });
  await Deno.writeTextFile(join(home, ".ssh", "id_rsa"), "PRIVATE-KEY-MATERIAL\n");
  await Deno.writeTextFile(join(home, ".baton", "config.json"), JSON.stringify(config));
  await llm.writeModelsJson(home);
  const user = await signUp(relay.url);
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home, env });
    await fn({ relay, llm, user, runner, home, project });
    ok = true;
  } finally {
    if (runner && !ok) console.error(runner.proc.output());
    await runner?.stop();
    await llm.close();
  }
}

/** Spawns a session in the project and watches it. */
export async function spawnIn(w: AgentWorld, prompt = "Go") {
  const [runner] = await (await w.user.api("/api/runners")).json();
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: runner.id, prompt, cwd: w.project }),
  );
  const { sessionId } = await res.json();
  assert.ok(sessionId, "spawn failed");
  const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
  viewer.subscribe(sessionId);
  return { sessionId: sessionId as string, viewer };
}

/** Each tool call's result text, by call id. */
export function resultsOf(events: SessionEvent[]): Map<string, { text: string; isError: boolean }> {
  const out = new Map<string, { text: string; isError: boolean }>();
  for (const { e } of events) {
    if (e.type !== "tool_execution_end") continue;
    const r = e.result as { content?: { text?: string }[] } | undefined;
    const text = (r?.content ?? []).map((c) => c.text ?? "").join("");
    out.set(String(e.toolCallId), { text, isError: e.isError === true });
  }
  return out;
}

/** The notices a viewer shows for the session (what the user reads). */
export function noticesOf(events: SessionEvent[]): string[] {
  return applyEvents(emptyConversation(), events).items.flatMap((i) =>
    i.kind === "notice" ? [i.text] : []
  );
}

/** The tools the session's agent has (MCP servers' tools join with `mcp:ready`). */
export function toolNamesOf(events: SessionEvent[]): string[] {
  const last = events.findLast((e) => e.e.type === "mcp:ready" || e.e.type === "session_start");
  return (last?.e.tools as string[] | undefined) ?? [];
}

/** Whether a path exists. */
export async function exists(p: string): Promise<boolean> {
  try {
    await Deno.lstat(p);
    return true;
  } catch {
    return false;
  }
}
