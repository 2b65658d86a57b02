/**
 * A stdio MCP server for tests: `<label> <tag> serve|hang [marker]`. `serve`
 * offers the tools of `testServer`; `hang` reads its stdin and never
 * answers. With a marker path, it writes that file when it starts.
 * `<label> <tag> gate <file>` serves once `file` exists (a server that is
 * late on purpose).
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { testServer } from "./mcp_tools.ts";

const [label = "stdio", _tag, mode = "serve", marker] = Deno.args;
if (mode === "gate") {
  while (!(await Deno.stat(marker!).then(() => true, () => false))) {
    await new Promise((r) => setTimeout(r, 50));
  }
} else if (marker) Deno.writeTextFileSync(marker, "started\n");
if (mode === "hang") {
  // Hold stdin open and answer nothing, for as long as it is let live.
  setInterval(() => {}, 1000);
  for await (const _ of Deno.stdin.readable) { /* never answer */ }
} else {
  await testServer(label).connect(new StdioServerTransport());
}
