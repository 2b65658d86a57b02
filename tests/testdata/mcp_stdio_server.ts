/**
 * A stdio MCP server for tests: `<label> <tag> serve|hang [marker]`. `serve`
 * offers the tools of `testServer`; `hang` reads its stdin and never
 * answers. With a marker path, it writes that file when it starts.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { testServer } from "./mcp_tools.ts";

const [label = "stdio", _tag, mode = "serve", marker] = Deno.args;
if (marker) Deno.writeTextFileSync(marker, "started\n");
if (mode === "hang") {
  // Hold stdin open and answer nothing, for as long as it is let live.
  setInterval(() => {}, 1000);
  for await (const _ of Deno.stdin.readable) { /* never answer */ }
} else {
  await testServer(label).connect(new StdioServerTransport());
}
