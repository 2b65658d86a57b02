/**
 * An agent's world for tests of what its tools may do: an in-process relay,
 * the mock model and a real runner process with a HOME of its own, and the
 * readings of a session's events that those tests share.
 *
 * @module
 */
import { join } from "node:path";
import assert from "node:assert/strict";
import type { SessionEvent } from "../../shared/protocol.ts";
import { applyEvents, emptyConversation } from "../../shared/conversation.ts";
import { json, signUp, type User, Viewer } from "./client.ts";
import { startTestRelay, type TestRelay } from "./in_process.ts";
import { MockLlm } from "./mock_llm.ts";
import { type RunnerProcess, startRunner, tempDir } from "./procs.ts";

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

/**
 * A relay, and a runner whose HOME has `~/.ssh/id_rsa` and whose
 * `~/.baton/config.json` is `config`; HOME and the project are removed after.
 */
export async function withAgentWorld(
  config: Record<string, unknown>,
  fn: (w: AgentWorld) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  await using relay = await startTestRelay();
  const llm = MockLlm.start();
  const home = await tempDir("baton-agent-home-");
  const project = await tempDir("baton-agent-proj-");
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
    await Deno.remove(home, { recursive: true }).catch(() => {});
    await Deno.remove(project, { recursive: true }).catch(() => {});
  }
}

/** Spawns a session in `cwd` (the project), on `model` if given, and watches it. */
export async function spawnIn(
  w: AgentWorld,
  prompt = "Go",
  cwd = w.project,
  model?: { provider: string; id: string },
) {
  const [runner] = await (await w.user.api("/api/runners")).json();
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: runner.id, prompt, cwd, ...(model ? { model } : {}) }),
  );
  const { sessionId } = await res.json();
  assert.ok(sessionId, "spawn failed");
  const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
  viewer.subscribe(sessionId);
  return { sessionId: sessionId as string, runnerId: runner.id as string, viewer };
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
