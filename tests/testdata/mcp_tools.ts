/** The tools of the test MCP servers (no harness imports: the stdio server loads it). */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

/**
 * An MCP server with `word_count` (`{text}` → `Words: N (from <label>)`),
 * `read_file` (`{target}`, a name the sandbox gate does not check) → `[content]`) and `fail` (an MCP error result).
 */
export function testServer(label: string): Server {
  const server = new Server({ name: `test-${label}`, version: "1.0.0" }, {
    capabilities: { tools: {} },
  });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [
      {
        name: "word_count",
        description: "Counts the words of a text",
        inputSchema: {
          type: "object",
          properties: { text: { type: "string", description: "The text" } },
          required: ["text"],
        },
      },
      {
        name: "read_file",
        description: "Reads a file",
        inputSchema: {
          type: "object",
          properties: { target: { type: "string" } },
          required: ["target"],
        },
      },
      {
        name: "fail",
        description: "Always fails",
        inputSchema: { type: "object", properties: {} },
      },
    ],
  }));
  server.setRequestHandler(
    CallToolRequestSchema,
    (req: { params: { name: string; arguments?: Record<string, unknown> } }) => {
      if (req.params.name === "fail") {
        return { isError: true, content: [{ type: "text", text: `Failure from ${label}` }] };
      }
      if (req.params.name === "read_file") {
        try {
          return {
            content: [{
              type: "text",
              text: `[${Deno.readTextFileSync(String(req.params.arguments?.target))}]`,
            }],
          };
        } catch (err) {
          return { content: [{ type: "text", text: `Cannot read: ${(err as Error).name}` }] };
        }
      }
      const text = String(req.params.arguments?.text ?? "");
      const n = text.split(/\s+/).filter(Boolean).length;
      return { content: [{ type: "text", text: `Words: ${n} (from ${label})` }] };
    },
  );
  return server;
}
