/**
 * Questions and approvals seen from the daemon: the relay's `answer`
 * request passed to the session's worker, and the approval policies
 * (`approvals`): the runner's in `<home>/.baton/config.json` (`approvals`),
 * a session's own in `<home>/.baton/runner/approvals/<sessionId>.json`. The
 * sandbox keeps all of `~/.baton` from the agent's writes, and a worker holds
 * its policy in memory: what an agent writes there reaches no running session.
 *
 * @module
 */
import { join } from "node:path";
import type { DaemonToWorker } from "../../shared/protocol.ts";
import {
  type AnswerVia,
  type ApprovalPolicy,
  MAX_ANSWER_TEXT,
  type RunnerApprovalsResponse,
  type SessionApprovalsResponse,
} from "../../shared/questions_api.ts";
import { readUserConfig, updateUserConfig } from "../config.ts";
import { RequestError } from "../control_link.ts";
import { ApprovalPolicyError, parsePolicy } from "./policy.ts";

const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;
const TOOL_CALL_ID = /^[\x21-\x7e]{1,200}$/;

/** The runner's policy (`approvals` in config.json); an invalid one holds every call. */
export async function runnerPolicy(batonDir: string): Promise<ApprovalPolicy> {
  const file = await readUserConfig(batonDir);
  try {
    return parsePolicy(file.approvals);
  } catch (err) {
    if (!(err instanceof ApprovalPolicyError)) throw err;
    // A policy someone meant to be strict must not fail open.
    return { mode: "ask", tools: ["*"], commands: [] };
  }
}

function sessionFile(batonDir: string, sessionId: string): string {
  return join(batonDir, "runner", "approvals", `${sessionId}.json`);
}

/** A session's own policy, or null when it follows the runner's. */
export async function sessionPolicy(
  batonDir: string,
  sessionId: string,
): Promise<ApprovalPolicy | null> {
  try {
    const text = await Deno.readTextFile(sessionFile(batonDir, sessionId));
    return parsePolicy(JSON.parse(text));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    if (err instanceof ApprovalPolicyError || err instanceof SyntaxError) {
      return { mode: "ask", tools: ["*"], commands: [] };
    }
    throw err;
  }
}

/** What applies to a session: its own policy, else its runner's. */
export async function effectivePolicy(
  batonDir: string,
  sessionId: string,
): Promise<ApprovalPolicy> {
  return (await sessionPolicy(batonDir, sessionId)) ?? await runnerPolicy(batonDir);
}

/** What the service needs from the daemon. */
export interface QuestionServiceOptions {
  batonDir: string;
  /** Whether the daemon holds the session, and whether its worker runs. */
  session: (sessionId: string) => { ended: boolean; awake: boolean } | null;
  /** The ids of the sessions the daemon holds. */
  sessions: () => Iterable<string>;
  /** Sends a message the session's worker answers with `res` (SessionWorkers.ask). */
  ask: (sessionId: string, message: (id: number) => DaemonToWorker) => Promise<void>;
  /** Sends a message to the session's worker, if it runs. */
  tell: (sessionId: string, message: DaemonToWorker) => void;
}

/** The daemon's `answer` and `approvals` requests. */
export class QuestionService {
  readonly #o: QuestionServiceOptions;

  constructor(o: QuestionServiceOptions) {
    this.#o = o;
  }

  request(op: string, data: unknown): Promise<unknown> {
    const d = (data ?? {}) as Record<string, unknown>;
    if (op === "answer") return this.#answer(d);
    return this.#approvals(d);
  }

  async #answer(d: Record<string, unknown>): Promise<{ ok: true }> {
    const { sessionId, toolCallId, text } = d;
    if (typeof sessionId !== "string" || !SESSION_ID.test(sessionId)) {
      throw new RequestError("bad_request", "Invalid sessionId");
    }
    if (typeof toolCallId !== "string" || !TOOL_CALL_ID.test(toolCallId)) {
      throw new RequestError("bad_request", "Invalid toolCallId");
    }
    if (typeof text !== "string" || text.length > MAX_ANSWER_TEXT) {
      throw new RequestError("bad_request", "Invalid text");
    }
    const via: AnswerVia = d.via === "push" ? "push" : "session";
    const s = this.#o.session(sessionId);
    if (!s) throw new RequestError("not_found", "Session is not on this runner");
    // A worker that is not running holds no tool call: nothing to wake it for.
    if (s.ended || !s.awake) {
      throw new RequestError("not_pending", "No question is waiting in this session");
    }
    await this.#o.ask(sessionId, (id) => ({ t: "answer", id, toolCallId, text, via }));
    return { ok: true };
  }

  async #approvals(
    d: Record<string, unknown>,
  ): Promise<RunnerApprovalsResponse | SessionApprovalsResponse> {
    const { batonDir } = this.#o;
    const sessionId = d.sessionId;
    const set = d.set === true;
    let policy: ApprovalPolicy | null = null;
    if (set && d.policy !== null) {
      try {
        policy = parsePolicy(d.policy, "policy");
      } catch (err) {
        if (err instanceof ApprovalPolicyError) throw new RequestError("bad_request", err.message);
        throw err;
      }
    }
    if (sessionId === undefined) {
      if (set) {
        await updateUserConfig(batonDir, { approvals: policy });
        // Running sessions that follow the runner's policy follow the change.
        const now = await runnerPolicy(batonDir);
        for (const id of this.#o.sessions()) {
          if (await sessionPolicy(batonDir, id) === null) {
            this.#o.tell(id, { t: "approvals", policy: now });
          }
        }
      }
      return { policy: await runnerPolicy(batonDir) };
    }
    if (typeof sessionId !== "string" || !SESSION_ID.test(sessionId)) {
      throw new RequestError("bad_request", "Invalid sessionId");
    }
    const s = this.#o.session(sessionId);
    if (!s || s.ended) throw new RequestError("not_found", "Session is not on this runner");
    if (set) {
      const path = sessionFile(batonDir, sessionId);
      if (policy === null) {
        await Deno.remove(path).catch((err) => {
          if (!(err instanceof Deno.errors.NotFound)) throw err;
        });
      } else {
        await Deno.mkdir(join(batonDir, "runner", "approvals"), { recursive: true, mode: 0o700 });
        const tmp = `${path}.${crypto.randomUUID()}.tmp`;
        await Deno.writeTextFile(tmp, JSON.stringify(policy) + "\n", { mode: 0o600 });
        await Deno.rename(tmp, path);
      }
      this.#o.tell(sessionId, {
        t: "approvals",
        policy: await effectivePolicy(batonDir, sessionId),
      });
    }
    const own = await sessionPolicy(batonDir, sessionId);
    const runner = await runnerPolicy(batonDir);
    return { policy: own, runner, effective: own ?? runner };
  }

  /** Forgets a deleted session's policy. */
  async forget(sessionId: string): Promise<void> {
    if (!SESSION_ID.test(sessionId)) return;
    await Deno.remove(sessionFile(this.#o.batonDir, sessionId)).catch(() => {});
  }
}
