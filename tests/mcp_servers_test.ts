import assert from "node:assert/strict";
import { startHttpMcp } from "./harness/mcp.ts";
import { ChildReaper } from "../runner/child_reaper.ts";
import { mcpSettings } from "../runner/mcp/config.ts";
import { type McpNotice, McpServers } from "../runner/mcp/servers.ts";

const sandbox = { mode: "none" as const, active: false };

async function startAll(config: Record<string, unknown>) {
  const notices: McpNotice[] = [];
  const servers = new McpServers();
  await servers.start(mcpSettings(config, {}, () => undefined), {
    cwd: Deno.cwd(),
    sandbox,
    env: {},
    reaper: new ChildReaper({ sandboxActive: false }),
    notify: (n) => notices.push(n),
  });
  return { servers, notices };
}

Deno.test("MCP tools whose names sanitise alike: the first server keeps them, the session is told", async () => {
  const a = startHttpMcp("a");
  const b = startHttpMcp("b");
  try {
    const { servers, notices } = await startAll({
      mcpServers: { "my.srv": { url: a.url }, my_srv: { url: b.url } },
    });
    const names = servers.tools.map((t) => t.name).sort();
    assert.deepEqual(names, [
      "mcp__my_srv__fail",
      "mcp__my_srv__read_file",
      "mcp__my_srv__word_count",
    ]);
    assert.equal(notices.length, 1);
    assert.match(notices[0]!.text, /tools left out, their names are taken: mcp__my_srv__/);
    const statuses = servers.status.map((s) => s.tools).sort();
    assert.deepEqual(statuses, [0, 3]);
    // The tool answers through the SDK client.
    const tool = servers.tools.find((t) => t.name === "mcp__my_srv__word_count")!;
    // deno-lint-ignore no-explicit-any
    const res = await tool.execute("id", { text: "x y" }, undefined, undefined, {} as any);
    assert.match(JSON.stringify(res.content), /Words: 2 \(from [ab]\)/);
    await servers.close();
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("an MCP server that refuses the client is skipped with the reason", async () => {
  const locked = startHttpMcp("locked", { token: "right" });
  try {
    const { servers, notices } = await startAll({
      mcpServers: {
        locked: { url: locked.url, headers: { Authorization: "Bearer wrong" } },
      },
    });
    assert.deepEqual(servers.tools, []);
    assert.equal(servers.status[0]?.ok, false);
    assert.match(
      notices.map((n) => n.text).join("\n"),
      /MCP server 'locked' skipped: .*unauthorized/,
    );
    await servers.close();
  } finally {
    await locked.close();
  }
});
