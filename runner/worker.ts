/**
 * The worker: one process per session, running pi's AgentSession. It speaks
 * newline-delimited JSON with the daemon on stdin/stdout; everything else it
 * (or pi) prints goes to stderr.
 *
 * `#start` orders a session's start-up in one place; what the agent is
 * given (the sandbox, hooks and MCP servers started while pi loads, the
 * gates and tools in the order pi must see them) is built in session_tools.ts.
 *
 * @module
 */
import type { ImageInput } from "../shared/attachments_api.ts";
import { makePathPrivate } from "../shared/private_files.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import {
  type AgentSession,
  AuthStorage,
  createAgentSession,
  DefaultResourceLoader,
  ModelRegistry,
  SessionManager,
} from "@mariozechner/pi-coding-agent";
import { capEvent, slimPiEvent } from "../shared/events.ts";
import type {
  DaemonToWorker,
  DeliveredTrigger,
  SessionEventBody,
  WorkerInput,
  WorkerStart,
  WorkerTrigger,
} from "../shared/protocol.ts";
import { readLines } from "./_lines.ts";
import { send, stage } from "./_worker_wire.ts";
import type { ChildReaper } from "./child_reaper.ts";
import { triggerMessage } from "./trigger_tools.ts";
import { LateTools, prewarmSpare } from "./worker_startup.ts";
import { sessionTools, startSessionServices } from "./session_tools.ts";
import { findAgentDefinition, listAgentDefinitions, pickModel } from "./subagents.ts";
import { SESSION_MARKER_ENV } from "./workspace/ports.ts";
import { NotPendingError, QuestionDesk } from "./questions.ts";
import { effectivePolicy } from "./approvals/service.ts";
import { projectScope } from "./project_code.ts";

/** A worker without a session this long after `ready` is a spare (see prewarmSpare). */
const SPARE_IDLE_MS = 200;

/** How often a running tool's partial output is forwarded at most. */
const TOOL_UPDATE_INTERVAL_MS = 100;

/** `baton _worker`. */
export async function workerMain(_argv: string[]): Promise<number> {
  // stdout carries the protocol: anything else that prints goes to stderr.
  const toErr = (...args: unknown[]) => console.error(...args);
  console.log = toErr;
  console.info = toErr;
  console.debug = toErr;
  process.stdout.write = ((chunk: string | Uint8Array) => {
    process.stderr.write(chunk);
    return true;
  }) as typeof process.stdout.write;
  // Ctrl-C in a terminal reaches the whole process group; the daemon decides
  // when a worker stops (it sends SIGTERM), so SIGINT is ignored here.
  if (Deno.build.os !== "windows") Deno.addSignalListener("SIGINT", () => {});

  const worker = new Worker();
  send({ t: "ready" });
  // A spare waits for its session: what it can do for any session, it does meanwhile (a
  // worker started for a session has its `start` already waiting on stdin).
  const spareTimer = setTimeout(prewarmSpare, SPARE_IDLE_MS);
  for await (const line of readLines(Deno.stdin.readable)) {
    let msg: DaemonToWorker;
    try {
      msg = JSON.parse(line);
    } catch {
      console.error(`worker: ignoring a line that is not JSON`);
      continue;
    }
    if (msg.t === "start") {
      clearTimeout(spareTimer);
      worker.start(msg).catch((err) => {
        send({ t: "fatal", message: `Session failed to start: ${errorText(err)}` });
        Deno.exit(3);
      });
    } else if (msg.t === "input") worker.input(msg);
    else if (msg.t === "trigger") worker.trigger(msg);
    else if (msg.t === "result") worker.result(msg);
    else if (msg.t === "answer") worker.answer(msg);
    else if (msg.t === "approvals") worker.questions?.setPolicy(msg.policy);
  }
  // stdin closed: the daemon is gone. Stop; a restarted daemon resumes the session.
  worker.dispose();
  return 0;
}

class Worker {
  #session: AgentSession | null = null;
  #reaper: ChildReaper | null = null;
  /** Set when the runner has no usable model: prompts get this message instead. */
  #noModel: string | null = null;
  #calls = new Map<number, { resolve: (d: unknown) => void; reject: (e: Error) => void }>();
  /** The session's questions and approvals (set once it starts). */
  questions: QuestionDesk | null = null;
  #nextCall = 1;

  /** Asks the relay (through the daemon) on behalf of this session. */
  call = (op: string, data: Record<string, unknown>): Promise<unknown> => {
    const id = this.#nextCall++;
    return new Promise((resolve, reject) => {
      this.#calls.set(id, { resolve, reject });
      send({ t: "call", id, op, data });
    });
  };

  result(msg: Extract<DaemonToWorker, { t: "result" }>): void {
    const p = this.#calls.get(msg.id);
    if (!p) return;
    this.#calls.delete(msg.id);
    if (msg.ok) p.resolve(msg.data);
    else p.reject(new Error(msg.error.message));
  }
  #starting: Promise<void> | null = null;

  /** A person's answer to a question or approval this session waits on. */
  async answer(msg: Extract<DaemonToWorker, { t: "answer" }>): Promise<void> {
    await this.#starting?.catch(() => {});
    try {
      if (!this.questions) throw new NotPendingError();
      this.questions.answer(msg.toolCallId, msg.text, msg.via);
      send({ t: "res", id: msg.id, ok: true });
    } catch (err) {
      const code = err instanceof NotPendingError ? err.code : "answer_failed";
      send({ t: "res", id: msg.id, ok: false, error: { code, message: errorText(err) } });
    }
  }
  #pendingUpdates = new Map<string, SessionEventBody>();
  #updateTimer: ReturnType<typeof setTimeout> | null = null;

  emit(e: SessionEventBody): void {
    if (e.type === "tool_execution_update" && typeof e.toolCallId === "string") {
      // A newer partial output supersedes the last one: forward at most every 100 ms.
      this.#pendingUpdates.set(e.toolCallId, e);
      this.#updateTimer ??= setTimeout(() => this.#flushUpdates(), TOOL_UPDATE_INTERVAL_MS);
      return;
    }
    this.#flushUpdates();
    send({ t: "event", e: capEvent(e) });
  }

  #flushUpdates(): void {
    if (this.#updateTimer) clearTimeout(this.#updateTimer);
    this.#updateTimer = null;
    for (const u of this.#pendingUpdates.values()) send({ t: "event", e: capEvent(u) });
    this.#pendingUpdates.clear();
  }

  start(msg: WorkerStart): Promise<void> {
    this.#starting ??= this.#start(msg);
    return this.#starting;
  }

  async #start(msg: WorkerStart): Promise<void> {
    const agentDir = Deno.env.get("PI_CODING_AGENT_DIR") ??
      join(Deno.env.get("HOME") ?? ".", ".baton");
    const skip = {
      mcp: Deno.env.get("BATON_NO_MCP") === "1",
      plugins: Deno.env.get("BATON_NO_PLUGINS") === "1",
      hooks: Deno.env.get("BATON_NO_HOOKS") === "1",
    };
    Deno.chdir(msg.cwd);
    // Inherited by the agent's tools: a server they start and detach stays this session's
    // for live previews (runner/workspace/ports.ts).
    Deno.env.set(SESSION_MARKER_ENV, msg.sessionId);
    const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE") ?? msg.cwd;
    stage("reading the sandbox policy");
    const services = await startSessionServices({
      msg,
      agentDir,
      home,
      skip,
      emit: (e) => this.emit(e),
      onReaper: (reaper) => this.#reaper = reaper,
    });
    const folders = { cwd: msg.cwd, agentDir };
    stage("reading approvals, agent definitions and settings");
    const [approvals, role, agents] = await Promise.all([
      effectivePolicy(agentDir, msg.sessionId),
      // A subagent's role: its definition's prompt, tools and model (runner/subagents.ts).
      msg.agent ? findAgentDefinition(msg.agent, folders) : null,
      listAgentDefinitions(folders),
    ]);
    this.questions = new QuestionDesk({ emit: (e) => this.emit(e), policy: approvals });
    const authStorage = AuthStorage.create(join(agentDir, "auth.json"));
    const modelRegistry = ModelRegistry.create(authStorage, join(agentDir, "models.json"));
    if (msg.agent && !role) throw new Error(`Unknown agent definition: '${msg.agent}'`);
    const roleModel = pickModel(role?.model, modelRegistry.getAvailable());
    const model = roleModel ??
      (msg.model ? modelRegistry.find(msg.model.provider, msg.model.id) : undefined);
    const haveFile = msg.resumeFile !== null && existsSync(msg.resumeFile);
    const sessionManager = haveFile
      ? SessionManager.open(msg.resumeFile!)
      : SessionManager.create(msg.cwd);
    const { settingsManager, guard } = await projectScope(agentDir, msg.cwd);
    const lateTools = new LateTools();
    const { extensionFactories, customTools } = sessionTools({
      services,
      questions: this.questions,
      lateTools,
      call: this.call,
      folders,
      agents,
      autoResizeImages: settingsManager.getImageAutoResize(),
    });
    const resourceLoader = new DefaultResourceLoader({
      cwd: msg.cwd,
      agentDir,
      settingsManager,
      noExtensions: skip.plugins,
      extensionFactories,
      ...(role?.systemPrompt ? { appendSystemPrompt: [role.systemPrompt] } : {}),
    });
    const projectNotice = guard(resourceLoader);
    stage("loading extensions, skills and pi packages");
    await resourceLoader.reload();
    stage("starting the agent session (extensions' session_start)");
    const { session, modelFallbackMessage } = await createAgentSession({
      cwd: msg.cwd,
      agentDir,
      authStorage,
      modelRegistry,
      sessionManager,
      settingsManager,
      resourceLoader,
      customTools,
      ...(role?.tools ? { tools: role.tools } : {}),
      ...(model ? { model } : {}),
    });
    this.#session = session;
    stage("starting the sandbox");
    const { state: sandboxState } = await services.sandboxing;
    stage("loading hooks");
    const hooks = await services.hooksLoading;
    const usable = modelRegistry.getAvailable().length > 0;
    const active = session.model && usable
      ? { provider: session.model.provider, id: session.model.id }
      : null;
    send({ t: "started", piSessionFile: session.sessionFile ?? null, model: active });
    const notices = [sandboxState.notice, modelFallbackMessage, projectNotice()].filter(Boolean);
    this.emit({
      type: "session_start",
      cwd: msg.cwd,
      model: active,
      resumed: msg.resumed,
      tools: session.agent.state.tools.map((t) => t.name),
      skip,
      ...(msg.woke ? { woke: true } : {}),
      // What the agent still has of the conversation: a viewer marks what it
      // showed after the last remembered prompt as forgotten (pi saves a
      // conversation only once its first answer ends).
      ...(msg.resumed ? { memory: memoryOf(session.messages) } : {}),
      sandbox: { mode: sandboxState.mode, active: sandboxState.active },
      ...(notices.length ? { notice: notices.join("\n") } : {}),
    });
    session.subscribe((ev) => {
      this.emit(slimPiEvent(ev as { type: string }));
      // pi writes its session file with node:fs, which under Deno ignores the
      // umask (0666) and its folders 0755: owner-only once a turn saved it.
      if (ev.type === "agent_end" && session.sessionFile) {
        makePathPrivate(agentDir, session.sessionFile).catch(() => {});
      }
    });
    if (session.sessionFile) await makePathPrivate(agentDir, session.sessionFile);
    // The first turn (and every input, which waits for this start) sees the MCP tools.
    const [mcp] = await Promise.all([
      services.mcpStarting,
      hooks?.count ? hooks.sessionStart(msg.resumed ? "resume" : "startup") : null,
    ]);
    lateTools.add(mcp.tools);
    if (mcp.status.length) {
      this.emit({
        type: "mcp:ready",
        mcp: mcp.status,
        tools: session.agent.state.tools.map((t) => t.name),
      });
    }
    if (!usable) {
      // pi would answer every prompt with advice for its own terminal (/login).
      this.#noModel = `No model is configured on this runner: set a provider's API key (for ` +
        `example ANTHROPIC_API_KEY) or add a provider in ${join(agentDir, "models.json")}`;
    }
    // Without a model, the trigger (or prompt) is still shown, followed by the error.
    if (msg.trigger) this.#deliver(msg.trigger, msg.instruction);
    else if (msg.prompt.trim() || msg.images?.length || this.#noModel) {
      this.#prompt(msg.prompt, msg.images);
    }
  }

  /** Hands a trigger to the agent: steer or follow-up while it works, a prompt when idle. */
  async #deliver(t: DeliveredTrigger, instruction?: string): Promise<void> {
    const text = triggerMessage(t, instruction);
    this.emit({ type: "trigger_delivered", trigger: t, ...(instruction ? { instruction } : {}) });
    const s = this.#session!;
    if (!s.isStreaming) this.#prompt(text);
    else if (t.deliverAs === "steer") await s.steer(text);
    else await s.followUp(text);
  }

  async trigger(msg: WorkerTrigger): Promise<void> {
    try {
      await this.#starting;
      if (!this.#session) throw new Error("Session is still starting");
      await this.#deliver(msg.trigger, msg.instruction);
      send({ t: "res", id: msg.id, ok: true });
    } catch (err) {
      send({
        t: "res",
        id: msg.id,
        ok: false,
        error: { code: "trigger_failed", message: errorText(err) },
      });
    }
  }

  #prompt(text: string, images?: ImageInput[]): void {
    if (this.#noModel) {
      this.emit({ type: "session_error", message: this.#noModel });
      return;
    }
    this.#session!.prompt(text, images?.length ? { images } : undefined).catch((err) => {
      this.emit({ type: "session_error", message: errorText(err) });
    });
  }

  async input(msg: WorkerInput): Promise<void> {
    const reply = (error?: { code: string; message: string }) =>
      send(error ? { t: "res", id: msg.id, ok: false, error } : { t: "res", id: msg.id, ok: true });
    try {
      await this.#starting;
      const s = this.#session;
      if (!s) return reply({ code: "not_ready", message: "Session is still starting" });
      switch (msg.kind) {
        case "prompt":
          if (s.isStreaming) {
            return reply({
              code: "busy",
              message: "The agent is working: send it as steer or followUp, or abort first",
            });
          }
          this.#prompt(msg.text, msg.images);
          return reply();
        case "steer":
        case "followUp":
          if (!s.isStreaming) this.#prompt(msg.text, msg.images);
          else if (msg.kind === "steer") await s.steer(msg.text, msg.images);
          else await s.followUp(msg.text, msg.images);
          return reply();
        case "abort":
          // Queued steers and follow-ups would otherwise ride along with the
          // next prompt: Stop takes them back too.
          s.clearQueue();
          await s.abort();
          return reply();
        case "dequeue":
          if (!dequeue(s, msg.text)) {
            return reply({
              code: "not_queued",
              message: "That message is no longer queued: the agent has read it",
            });
          }
          return reply();
        case "end":
          this.#flushUpdates();
          // A text says why (the relay ends a subagent once it answered).
          this.emit({
            type: "session_end",
            reason: "ended",
            message: msg.text.trim().slice(0, 200) || "Ended by user",
          });
          reply();
          this.dispose();
          Deno.exit(0);
      }
    } catch (err) {
      reply({ code: "input_failed", message: errorText(err) });
    }
  }

  dispose(): void {
    this.#flushUpdates();
    this.#reaper?.killAll();
    try {
      this.#session?.dispose();
    } catch {
      // Nothing to save: pi writes its session file as it goes.
    }
  }
}

/**
 * Takes one queued steer or follow-up back (the first one with this text).
 * pi can only clear its queues, so the others are queued again, in order.
 */
function dequeue(s: AgentSession, text: string): boolean {
  const steering = [...s.getSteeringMessages()];
  const followUp = [...s.getFollowUpMessages()];
  const from = steering.includes(text) ? steering : followUp.includes(text) ? followUp : null;
  if (!from) return false;
  from.splice(from.indexOf(text), 1);
  s.clearQueue();
  // Each queues synchronously before its first await, so the order holds.
  for (const t of steering) s.steer(t).catch(() => {});
  for (const t of followUp) s.followUp(t).catch(() => {});
  return true;
}

/** The most of the last prompt `session_start` carries (a prompt may be 200,000 characters). */
const MEMORY_HEAD = 1000;

/**
 * How much of a conversation the agent holds: its message count and its
 * last prompt, as the first MEMORY_HEAD characters and the whole length.
 */
export function memoryOf(
  messages: readonly { role: string; content?: unknown }[],
): { messages: number; lastPrompt: string | null; lastPromptLength: number } {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== "user") continue;
    const text = typeof m.content === "string"
      ? m.content
      : Array.isArray(m.content)
      ? m.content.filter((c) => c?.type === "text").map((c) => String(c.text ?? "")).join("\n")
      : "";
    return {
      messages: messages.length,
      lastPrompt: text.slice(0, MEMORY_HEAD),
      lastPromptLength: text.length,
    };
  }
  return { messages: messages.length, lastPrompt: null, lastPromptLength: 0 };
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
