/**
 * What a session's agent works with beyond pi's own tools, built once per
 * worker: its MCP servers (started while pi loads), its hooks, its question
 * desk, the pi extensions that gate every tool call (sandbox, approvals,
 * hooks), and baton's tools (triggers, sandboxed bash, subagents,
 * ask_user) beside the MCP servers' tools.
 *
 * @module
 */
import type { SessionEventBody } from "../shared/protocol.ts";
import type { ChildReaper } from "./child_reaper.ts";
import { effectivePolicy } from "./approvals/service.ts";
import { loadSessionHooks } from "./hooks/load.ts";
import { projectNetworkOf, startSessionMcp } from "./mcp/session.ts";
import { McpServers } from "./mcp/servers.ts";
import { QuestionDesk } from "./questions.ts";
import type { resolveForSession, SandboxState, SessionSandbox } from "./sandbox/session.ts";
import { type AgentFolders, listAgentDefinitions, subagentTool } from "./subagents.ts";
import { triggerTools } from "./trigger_tools.ts";

/** Options of {@linkcode sessionTools}. */
export interface SessionToolsOptions {
  sessionId: string;
  cwd: string;
  agentDir: string;
  /** What the runner was told to skip (`BATON_NO_MCP`, `BATON_NO_HOOKS`). */
  skip: { mcp: boolean; hooks: boolean };
  policy: Awaited<ReturnType<typeof resolveForSession>>;
  sandbox: SessionSandbox;
  sandboxState: SandboxState;
  /** Ends what the MCP servers and hooks start. */
  reaper: ChildReaper;
  emit: (e: SessionEventBody) => void;
  /** Asks the relay (through the daemon) on behalf of this session. */
  call: (op: string, data: Record<string, unknown>) => Promise<unknown>;
}

/** Starts the session's MCP servers and loads its hooks and approval policy. */
export async function sessionTools(o: SessionToolsOptions) {
  const { cwd, agentDir, sandbox, sandboxState: state, reaper } = o;
  // MCP servers start while pi loads; hooks and servers run under the sandbox.
  const mcpStarting = o.skip.mcp ? Promise.resolve(new McpServers()) : startSessionMcp({
    batonDir: agentDir,
    cwd,
    sandbox: state,
    reaper,
    projectNetwork: projectNetworkOf(o.policy, state),
    notify: (n) => o.emit({ type: "mcp:notice", ...n }),
  });
  const hooks = o.skip.hooks ? null : await loadSessionHooks({
    batonDir: agentDir,
    cwd,
    sessionId: o.sessionId,
    sandbox: state,
    reaper,
    notify: (n) => o.emit({ type: "hook:notice", ...n }),
  });
  const questions = new QuestionDesk({
    emit: (e) => o.emit(e),
    policy: await effectivePolicy(agentDir, o.sessionId),
  });
  return {
    hooks,
    questions,
    /** pi extensions: the sandbox's gate, the approvals', the hooks'. */
    extensions: [sandbox.gate(), questions.gate(), ...(hooks?.count ? [hooks.extension()] : [])],
    /** The custom tools, once the MCP servers started, and the servers' status. */
    async tools(folders: AgentFolders) {
      const mcp = await mcpStarting;
      const tools = [
        ...triggerTools(o.call),
        sandbox.bashTool(),
        subagentTool(
          o.call,
          folders,
          (await listAgentDefinitions(folders)).map((a) =>
            `${a.name}: ${a.description.slice(0, 200)}`
          ),
        ),
        questions.askUserTool(),
        ...mcp.tools,
      ];
      return { tools, mcpStatus: mcp.status };
    },
  };
}
