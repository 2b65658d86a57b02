/**
 * The relay's requests about one session: spawn it, give it input or a
 * trigger, delete it. Each is checked here and carried out by the session's
 * worker (session_workers.ts).
 *
 * @module
 */
import {
  INPUT_KINDS,
  type InputKind,
  type InputRequest,
  type SessionEventBody,
  type SpawnRequest,
  type SpawnResult,
  type TriggerRequest,
} from "../shared/protocol.ts";
import type { RunnerConfig } from "./config.ts";
import { RequestError } from "./control_link.ts";
import type { SessionEntry, SessionRegistry } from "./registry.ts";
import { checkCwd, defaultCwd, PathRejectedError } from "./roots.ts";
import type { SandboxService } from "./sandbox/service.ts";
import { assertModelKnown } from "./models.ts";
import { withAttachments } from "./workspace/attachments.ts";
import type { DaemonSession } from "./daemon_session.ts";
import type { SessionWorkers } from "./session_workers.ts";

const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Options of {@linkcode SessionRequests}. */
export interface SessionRequestsOptions {
  config: RunnerConfig;
  /** Resolved workspace roots, or null to accept any folder. */
  roots: string[] | null;
  registry: SessionRegistry;
  workers: SessionWorkers;
  /** Answers `/sandbox ...` inputs. */
  sandbox: Pick<SandboxService, "slash">;
  /** Queues an event of the session for the relay. */
  enqueue: (s: DaemonSession, e: SessionEventBody) => void;
  log: (line: string) => void;
}

/** Spawn, input, trigger and delete, as the relay asks them. */
export class SessionRequests {
  readonly #opts: SessionRequestsOptions;

  constructor(options: SessionRequestsOptions) {
    this.#opts = options;
  }

  async spawn(req: SpawnRequest): Promise<SpawnResult> {
    const { workers, config, roots } = this.#opts;
    if (workers.stopping) throw new RequestError("runner_stopping", "Runner is shutting down");
    if (typeof req?.sessionId !== "string" || !SESSION_ID.test(req.sessionId)) {
      throw new RequestError("bad_request", "Invalid sessionId");
    }
    if (workers.sessions.has(req.sessionId)) {
      throw new RequestError("bad_request", "Session already exists");
    }
    const { home } = config;
    const wanted = typeof req.cwd === "string" && req.cwd.trim()
      ? req.cwd
      : defaultCwd(roots, home);
    let cwd: string;
    try {
      cwd = await checkCwd(wanted, roots, { home });
    } catch (err) {
      if (err instanceof PathRejectedError) throw new RequestError(err.code, err.message);
      throw err;
    }
    const model = req.model ?? null;
    if (model) await assertModelKnown(config.batonDir, model);
    const prompt = typeof req.prompt === "string" ? req.prompt : "";
    const first = await withAttachments(req, prompt, cwd, config);
    const entry: SessionEntry = {
      sessionId: req.sessionId,
      cwd,
      model,
      piSessionFile: null,
      pid: null,
      createdAt: new Date().toISOString(),
      // A first prompt or trigger starts a turn right away.
      busy: first.text.trim() !== "" || first.images.length > 0 || !!req.trigger,
      ...(typeof req.agent === "string" ? { agent: req.agent } : {}),
    };
    const s = workers.add(entry, 1);
    await this.#opts.registry.save(entry);
    workers.start(s, {
      prompt: first.text,
      ...(first.images.length ? { images: first.images } : {}),
      resumeFile: null,
      resumed: false,
      ...(req.trigger ? { trigger: req.trigger } : {}),
      ...(typeof req.instruction === "string" ? { instruction: req.instruction } : {}),
    });
    return { cwd };
  }

  async input(req: InputRequest): Promise<void> {
    const { workers } = this.#opts;
    const kind = req?.kind as InputKind;
    if (!INPUT_KINDS.includes(kind)) {
      return Promise.reject(new RequestError("bad_request", "Unknown input kind"));
    }
    const text = typeof req.text === "string" ? req.text : "";
    const s = workers.sessions.get(req?.sessionId);
    // `/sandbox ...` is answered here, where the runner's violations are.
    if (s && !s.ended && text.startsWith("/sandbox") && kind !== "dequeue") {
      return this.#opts.sandbox.slash(text, s.entry.cwd).then((e) => {
        if (!e) return workers.ask(req?.sessionId, (id) => ({ t: "input", id, kind, text }));
        this.#opts.enqueue(s, e);
      });
    }
    if (s?.asleep && !s.ended) {
      // Nothing runs and nothing is queued in a sleeping session: these need no worker.
      if (kind === "abort") return Promise.resolve();
      if (kind === "dequeue") {
        return Promise.reject(
          new RequestError("not_queued", "That message is no longer queued: the agent has read it"),
        );
      }
      if (kind === "end") {
        workers.endAsleep(s);
        return Promise.resolve();
      }
    }
    const cwd = workers.sessions.get(req?.sessionId)?.entry.cwd;
    const { text: withFiles, images } = await withAttachments(req, text, cwd, this.#opts.config);
    return await workers.ask(req?.sessionId, (id) => ({
      t: "input",
      id,
      kind,
      text: withFiles,
      ...(images.length ? { images } : {}),
    }));
  }

  trigger(req: TriggerRequest): Promise<void> {
    if (!req?.trigger || typeof req.trigger.triggerId !== "string") {
      return Promise.reject(new RequestError("bad_request", "Invalid trigger"));
    }
    return this.#opts.workers.ask(req.sessionId, (id) => ({
      t: "trigger",
      id,
      trigger: req.trigger,
      ...(typeof req.instruction === "string" ? { instruction: req.instruction } : {}),
    }));
  }

  /**
   * The relay deleted a session: stop its worker if it runs, forget it, and
   * delete its pi conversation file (pi's `.jsonl` only). The workspace is
   * left as it is.
   */
  async delete(req: { sessionId?: unknown }): Promise<{ deleted: boolean }> {
    const { workers, registry } = this.#opts;
    const id = req?.sessionId;
    if (typeof id !== "string" || !SESSION_ID.test(id)) {
      throw new RequestError("bad_request", "Invalid sessionId");
    }
    const s = workers.sessions.get(id);
    let file = await registry.conversationOf(id);
    if (s) {
      file = s.entry.piSessionFile ?? file;
      s.ended = true;
      s.queue = [];
      s.unacked = [];
      workers.clearSleep(s);
      const worker = s.worker;
      if (worker) {
        worker.kill("SIGTERM");
        // It may still be writing the conversation.
        await Promise.race([worker.exited, new Promise((r) => setTimeout(r, 5000))]);
      }
      workers.sessions.delete(id);
      await registry.remove(id);
    }
    let deleted = false;
    if (file && file.endsWith(".jsonl")) {
      try {
        await Deno.remove(file);
        deleted = true;
      } catch (err) {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
      }
    }
    await registry.removeConversation(id);
    this.#opts.log(
      `session ${id} was deleted on the relay${deleted ? "; its conversation too" : ""}`,
    );
    return { deleted };
  }
}
