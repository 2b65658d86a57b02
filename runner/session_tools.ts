/**
 * What a session's agent is given beside pi's own tools, built for the
 * worker's start-up (runner/worker.ts): the services that start while pi
 * loads (the OS sandbox, then the session's hooks and MCP servers under it)
 * and the gates and tools pi sees, in the order it must see them.
 *
 * @module
 */
import type { ExtensionFactory, ToolDefinition } from "@mariozechner/pi-coding-agent";
import type { SessionEventBody, WorkerStart } from "../shared/protocol.ts";
import { ChildReaper } from "./child_reaper.ts";
import { loadSessionHooks } from "./hooks/load.ts";
import { HOOK_EVENTS, type SessionHooks } from "./hooks/session_hooks.ts";
import { projectNetworkOf, startSessionMcp } from "./mcp/session.ts";
import { McpServers } from "./mcp/servers.ts";
import type { QuestionDesk } from "./questions.ts";
import { type SandboxState, SessionSandbox } from "./sandbox/session.ts";
import { folderPolicy, policySourceFrom, STRICT } from "./sandbox/folder_policy.ts";
import { sessionHiddenVariables } from "./sandbox/tool_env.ts";
import { type AgentDefinition, type AgentFolders, subagentTool } from "./subagents.ts";
import { type RelayCall, triggerTools } from "./trigger_tools.ts";
import { deferredExtension, type LateTools } from "./worker_startup.ts";

/** Options of {@linkcode startSessionServices}. */
export interface SessionServicesOptions {
  msg: WorkerStart;
  /** The runner's `.baton` folder (pi's agent folder). */
  agentDir: string;
  home: string;
  /** What BATON_NO_MCP and BATON_NO_HOOKS turn off. */
  skip: { mcp: boolean; hooks: boolean };
  emit: (e: SessionEventBody) => void;
  /** Given the reaper of the session's children as soon as the sandbox has started. */
  onReaper: (reaper: ChildReaper) => void;
}

/** The services of one session, starting. */
export interface SessionServices {
  sandbox: SessionSandbox;
  /** The OS sandbox once started (the longest step: checks, proxies, bridges). */
  sandboxing: Promise<{ state: SandboxState; reaper: ChildReaper }>;
  /** The session's hooks, loaded under the sandbox; null when turned off. */
  hooksLoading: Promise<SessionHooks> | null;
  /** The MCP servers, connected under the sandbox in the background. */
  mcpStarting: Promise<McpServers>;
}

/**
 * Starts what runs beside pi's loading: every tool call runs under the
 * sandbox (bash inside it, the others behind its gate), and hooks and MCP
 * servers run under it once it is up. No tool runs before the session has
 * started, so nothing waits here but the sandbox's policy.
 */
export async function startSessionServices(o: SessionServicesOptions): Promise<SessionServices> {
  const { msg, agentDir, home, emit } = o;
  const env = (k: string) => Deno.env.get(k);
  // Provider keys stay in the worker: its sandboxed processes go without (tool_env.ts).
  const [policy, hidden] = await Promise.all([
    folderPolicy(policySourceFrom(env, home, agentDir), msg.cwd, STRICT),
    sessionHiddenVariables(agentDir, env),
  ]);
  const sandbox = new SessionSandbox(
    policy,
    { cwd: msg.cwd, home, hidden, report: (v) => emit({ type: "sandbox:violation", ...v }) },
  );
  const sandboxing = sandbox.start().then((state) => {
    const reaper = new ChildReaper({ sandboxActive: state.active });
    o.onReaper(reaper);
    return { state, reaper };
  });
  const hooksLoading = o.skip.hooks
    ? null
    : sandboxing.then(({ state, reaper }) =>
      loadSessionHooks({
        batonDir: agentDir,
        cwd: msg.cwd,
        sessionId: msg.sessionId,
        sandbox: state,
        hidden,
        reaper,
        notify: (n) => emit({ type: "hook:notice", ...n }),
      })
    );
  // Their tools join before the first turn (the worker adds them as late tools).
  const mcpStarting = o.skip.mcp
    ? Promise.resolve(new McpServers())
    : sandboxing.then(({ state, reaper }) =>
      startSessionMcp({
        batonDir: agentDir,
        cwd: msg.cwd,
        sandbox: state,
        hidden,
        reaper,
        projectNetwork: projectNetworkOf(policy, state),
        notify: (n) => emit({ type: "mcp:notice", ...n }),
      })
    );
  for (const p of [hooksLoading, mcpStarting]) p?.catch(() => {}); // The worker awaits them.
  return { sandbox, sandboxing, hooksLoading, mcpStarting };
}

/** Options of {@linkcode sessionTools}. */
export interface SessionToolsOptions {
  services: SessionServices;
  questions: QuestionDesk;
  lateTools: LateTools;
  /** Asks the relay on the session's behalf. */
  call: RelayCall;
  folders: AgentFolders;
  /** The agent definitions a subagent may take the role of. */
  agents: Pick<AgentDefinition, "name" | "description">[];
  /** pi's `images.autoResize` setting, for the `read` tool. */
  autoResizeImages: boolean;
}

/**
 * The gates and tools pi sees. The extensions' order is the order pi runs
 * them on a tool call: the sandbox's gate first, then approvals, the hooks
 * (once loaded), and last the tools that join late (MCP).
 */
export function sessionTools(
  o: SessionToolsOptions,
): { extensionFactories: ExtensionFactory[]; customTools: ToolDefinition[] } {
  const { sandbox, hooksLoading } = o.services;
  return {
    extensionFactories: [
      sandbox.gate(),
      o.questions.gate(),
      ...(hooksLoading
        ? [deferredExtension(hooksLoading.then((h) => h.count ? h.extension() : null), HOOK_EVENTS)]
        : []),
      o.lateTools.extension(),
    ],
    customTools: [
      ...triggerTools(o.call),
      sandbox.bashTool(),
      ...sandbox.fileTools({ autoResizeImages: o.autoResizeImages }),
      subagentTool(
        o.call,
        o.folders,
        o.agents.map((a) => `${a.name}: ${a.description.slice(0, 200)}`),
      ),
      o.questions.askUserTool(),
    ],
  };
}
