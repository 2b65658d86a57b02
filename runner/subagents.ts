/**
 * The agent's `subagent` tool: hands a task to a child session on the same
 * runner (same folder, roots and sandbox), started and followed through the
 * relay (relay/subagents.ts) so the child is durable, listed and streamed
 * like any session. Three forms: one task; parallel tasks (at most
 * MAX_PARALLEL_TASKS, MAX_CONCURRENT_SUBAGENTS running at once); a chain
 * whose steps get the previous step's answer in place of `{previous}`.
 *
 * Also the agent definitions a subagent can run as: `<name>.md` in
 * `~/.baton/agents` or the nearest `.pi/agents` above the session's folder
 * (pi's format: frontmatter `description`, `tools`, `model`; the body is
 * added to the system prompt).
 *
 * @module
 */
import { dirname, join } from "node:path";
import { defineTool, parseFrontmatter } from "@mariozechner/pi-coding-agent";
import { Type } from "@mariozechner/pi-ai";
import { docNameProblem } from "../shared/skills_api.ts";
import { readBoundedText } from "./bounded_read.ts";
import {
  MAX_CHAIN_STEPS,
  MAX_CONCURRENT_SUBAGENTS,
  MAX_PARALLEL_TASKS,
  type SubagentDetails,
  type SubagentRun,
  type SubagentSpawnAnswer,
  type SubagentWaitAnswer,
} from "../shared/subagents_api.ts";
import type { RelayCall } from "./trigger_tools.ts";

/** An agent definition a subagent runs as. */
export interface AgentDefinition {
  name: string;
  description: string;
  /** Tool names the subagent gets (all of a session's tools when absent). */
  tools?: string[];
  /** `provider/id` or a model id; the parent's model when absent or unknown. */
  model?: string;
  /** Added to the subagent's system prompt. */
  systemPrompt: string;
  path: string;
}

/** Where agent definitions live for a session in `cwd`. */
export interface AgentFolders {
  cwd: string;
  /** pi's agent dir (`~/.baton`): its `agents/` folder is the user's. */
  agentDir: string;
}

/** The nearest `.pi/agents` folder at or above `cwd`. */
async function projectAgentsDir(cwd: string): Promise<string | null> {
  let dir = cwd;
  for (;;) {
    const candidate = join(dir, ".pi", "agents");
    try {
      if ((await Deno.stat(candidate)).isDirectory) return candidate;
    } catch {
      // Not here.
    }
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/** Largest definition read (the API's own cap on agent definitions). */
const MAX_DEFINITION_BYTES = 256 * 1024;

async function readDefinition(path: string, name: string): Promise<AgentDefinition | null> {
  let text: string;
  try {
    text = await readBoundedText(path, MAX_DEFINITION_BYTES);
  } catch {
    return null;
  }
  const { frontmatter, body } = parseFrontmatter<Record<string, unknown>>(text);
  const tools = typeof frontmatter.tools === "string"
    ? frontmatter.tools.split(",").map((t) => t.trim()).filter(Boolean)
    : Array.isArray(frontmatter.tools)
    ? frontmatter.tools.filter((t): t is string => typeof t === "string")
    : [];
  return {
    name,
    description: typeof frontmatter.description === "string" ? frontmatter.description : "",
    ...(tools.length ? { tools } : {}),
    ...(typeof frontmatter.model === "string" && frontmatter.model
      ? { model: frontmatter.model }
      : {}),
    systemPrompt: body.trim(),
    path,
  };
}

/**
 * The definition named `name`: the user's (`~/.baton/agents`) first, then
 * the project's, so a repository cannot redefine an agent its user wrote.
 */
export async function findAgentDefinition(
  name: string,
  folders: AgentFolders,
): Promise<AgentDefinition | null> {
  if (docNameProblem(name) !== null) return null;
  const user = await readDefinition(join(folders.agentDir, "agents", `${name}.md`), name);
  if (user) return user;
  const project = await projectAgentsDir(folders.cwd);
  return project ? await readDefinition(join(project, `${name}.md`), name) : null;
}

/** The names and descriptions of the definitions a session can use (at most 50). */
export async function listAgentDefinitions(
  folders: AgentFolders,
): Promise<{ name: string; description: string }[]> {
  const found = new Map<string, string>();
  const project = await projectAgentsDir(folders.cwd);
  for (const dir of [join(folders.agentDir, "agents"), project]) {
    if (!dir) continue;
    try {
      for await (const e of Deno.readDir(dir)) {
        const name = e.name.endsWith(".md") ? e.name.slice(0, -3) : "";
        if (!name || found.has(name) || docNameProblem(name) !== null) continue;
        const def = await readDefinition(join(dir, e.name), name);
        if (def) found.set(name, def.description);
        if (found.size >= 50) break;
      }
    } catch {
      // No such folder.
    }
  }
  return [...found].map(([name, description]) => ({ name, description }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** A model named by a definition, among the runner's models (`provider/id` or an id). */
export function pickModel<M extends { provider: string; id: string }>(
  wanted: string | undefined,
  available: readonly M[],
): M | undefined {
  if (!wanted) return undefined;
  const slash = wanted.indexOf("/");
  if (slash > 0) {
    const provider = wanted.slice(0, slash);
    const id = wanted.slice(slash + 1);
    const exact = available.find((m) => m.provider === provider && m.id === id);
    if (exact) return exact;
  }
  return available.find((m) => m.id === wanted);
}

/** A wait that failed this many times in a row (relay away) gives the task up. */
const MAX_WAIT_FAILURES = 10;

const Step = Type.Object({
  task: Type.String({ description: "What the subagent should do, self-contained" }),
  agent: Type.Optional(Type.String({ description: "Agent definition to run as (its role)" })),
});

function text(details: SubagentDetails, body: string) {
  return { content: [{ type: "text" as const, text: body }], details };
}

/** The `subagent` tool of a session's agent. */
export function subagentTool(call: RelayCall, folders: AgentFolders, roles: string[] = []) {
  const rolesLine = roles.length
    ? ` Agent definitions available as roles: ${roles.join("; ")}.`
    : "";
  return defineTool({
    name: "subagent",
    label: "Subagent",
    description:
      "Delegate work to subagents: child sessions with their own context, in this session's " +
      "folder and sandbox, each answering with its final text. Give exactly one of: `task` " +
      `(one subagent); \`tasks\` (up to ${MAX_PARALLEL_TASKS} in parallel, ` +
      `${MAX_CONCURRENT_SUBAGENTS} at a time); \`chain\` (steps in order, \`{previous}\` in a ` +
      "step's task is replaced by the previous step's answer). `agent` names an agent " +
      `definition to run as.${rolesLine}`,
    parameters: Type.Object({
      task: Type.Optional(Type.String({ description: "One task for one subagent" })),
      agent: Type.Optional(Type.String({ description: "Agent definition for `task`" })),
      tasks: Type.Optional(Type.Array(Step, { description: "Tasks run in parallel" })),
      chain: Type.Optional(Type.Array(Step, { description: "Steps run in order" })),
    }),
    execute: async (_id, p, signal, onUpdate) => {
      const forms = [p.task !== undefined, p.tasks !== undefined, p.chain !== undefined]
        .filter(Boolean).length;
      if (forms !== 1) throw new Error("Give exactly one of task, tasks or chain");
      const mode = p.tasks ? "parallel" : p.chain ? "chain" : "single";
      const steps = p.tasks ?? p.chain ??
        [{ task: p.task!, ...(p.agent ? { agent: p.agent } : {}) }];
      if (steps.length === 0) {
        throw new Error(`Give at least one ${mode === "chain" ? "step" : "task"}`);
      }
      if (mode === "parallel" && steps.length > MAX_PARALLEL_TASKS) {
        throw new Error(`At most ${MAX_PARALLEL_TASKS} parallel tasks (got ${steps.length})`);
      }
      if (mode === "chain" && steps.length > MAX_CHAIN_STEPS) {
        throw new Error(`At most ${MAX_CHAIN_STEPS} chain steps (got ${steps.length})`);
      }
      for (const s of steps) {
        if (s.agent && !(await findAgentDefinition(s.agent, folders))) {
          throw new Error(
            `Unknown agent definition: '${s.agent.slice(0, 64)}'` +
              (roles.length ? ` (available: ${roles.map((r) => r.split(":")[0]).join(", ")})` : ""),
          );
        }
      }
      const runs: SubagentRun[] = steps.map((s) => ({
        task: s.task,
        ...(s.agent ? { agent: s.agent } : {}),
        ok: false,
        text: "",
      }));
      const details: SubagentDetails = { mode, runs };
      const update = () => onUpdate?.(text(details, progressLine(details)));
      const run = (i: number, task: string) => runOne(call, runs[i]!, task, signal, update);

      if (mode === "chain") {
        let previous = "";
        for (let i = 0; i < runs.length; i++) {
          await run(i, runs[i]!.task.replaceAll("{previous}", previous));
          if (!runs[i]!.ok) {
            return text(details, `Chain stopped at step ${i + 1}: ${runs[i]!.text}`);
          }
          previous = runs[i]!.text;
        }
        return text(details, previous);
      }
      let next = 0;
      const lane = async () => {
        while (next < runs.length && !signal?.aborted) {
          const i = next++;
          await run(i, runs[i]!.task);
        }
      };
      await Promise.all(
        Array.from({ length: Math.min(MAX_CONCURRENT_SUBAGENTS, runs.length) }, lane),
      );
      if (mode === "single") {
        return text(details, runs[0]!.ok ? runs[0]!.text : `Subagent failed: ${runs[0]!.text}`);
      }
      return text(
        details,
        runs.map((r, i) =>
          `## Task ${i + 1}${r.agent ? ` (${r.agent})` : ""}: ${
            r.ok ? "done" : "failed"
          }\n\n${r.text}`
        ).join("\n\n"),
      );
    },
  });
}

/** One line per task for the partial result while they work. */
function progressLine(d: SubagentDetails): string {
  const done = d.runs.filter((r) => r.text).length;
  return `${done}/${d.runs.length} subagents done`;
}

/** Starts one child and waits for its answer, filling `run`; stops it if `signal` aborts. */
async function runOne(
  call: RelayCall,
  run: SubagentRun,
  task: string,
  signal: AbortSignal | undefined,
  update: () => void,
): Promise<void> {
  if (signal?.aborted) {
    run.text = "Stopped before it started";
    return;
  }
  try {
    const res = await call("subagents.spawn", {
      task,
      ...(run.agent ? { agent: run.agent } : {}),
    }) as SubagentSpawnAnswer;
    run.sessionId = res.sessionId;
  } catch (err) {
    run.text = `Could not start the subagent: ${errorText(err)}`;
    update();
    return;
  }
  update();
  const childId = run.sessionId;
  const stop = () => {
    call("subagents.stop", { childIds: [childId] }).catch(() => {});
  };
  signal?.addEventListener("abort", stop, { once: true });
  try {
    let failures = 0;
    while (!signal?.aborted) {
      let answer: SubagentWaitAnswer;
      try {
        const asked = call("subagents.wait", { childId }) as Promise<SubagentWaitAnswer>;
        const got = await untilAborted(asked, signal);
        if (!got) break;
        answer = got;
        failures = 0;
      } catch (err) {
        if (++failures >= MAX_WAIT_FAILURES) {
          run.text = `Lost track of the subagent: ${errorText(err)}`;
          break;
        }
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      if (answer.done) {
        run.ok = answer.ok;
        run.text = answer.text;
        break;
      }
    }
    if (signal?.aborted && !run.text) run.text = "Stopped with its parent";
  } finally {
    signal?.removeEventListener("abort", stop);
    update();
  }
}

/** `p`'s value, or null as soon as `signal` aborts. */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T | null> {
  if (!signal) return p;
  if (signal.aborted) return Promise.resolve(null);
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(null);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
