/**
 * MCP servers for tests, built on the real SDK: the tools they offer, a
 * stdio server (`tests/testdata/mcp_stdio_server.ts`, started by the
 * runner's worker from `mcpServers`) and a streamable HTTP server in the
 * test process. The relay, runner and model they run with are
 * agent_world.ts's.
 *
 * @module
 */
import { join } from "node:path";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { ROOT } from "./procs.ts";
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
