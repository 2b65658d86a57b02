/**
 * Questions and approvals on the relay: answers passed to the runner whose
 * worker holds the agent's tool call, collab mode (a session's switch that
 * lets answers come from a notification), the approval policies (kept by the
 * runner, reached through it), and what an `agent_needs_input` notification
 * carries. docs/questions.md tells the whole story.
 *
 * @module
 */
import {
  type AnswerVia,
  type ApprovalPolicy,
  type AskedQuestion,
  type RunnerApprovalsResponse,
  type SessionApprovalsResponse,
} from "../shared/questions_api.ts";
import type { PushAction } from "../shared/push_api.ts";
import type { SessionEventBody } from "../shared/protocol.ts";
import { conflict, RelayError } from "./errors.ts";
import type { RunnerRegistry } from "./runner_registry.ts";
import type { AsyncStore, SessionRecord } from "./store/mod.ts";

/** How long the relay waits for a runner to pass an answer on (ms). */
const TIMEOUT_MS = 10_000;
/** How far back in a session's log a question is looked for (events). */
const LOOKBACK = 2000;
/** Most bytes of events read at once while looking. */
const PAGE_BYTES = 4 * 1024 * 1024;

/** The user_settings key of a session's collab switch. */
export function collabKey(sessionId: string): string {
  return `collab:${sessionId}`;
}

/** Whether a session of `userId` is in collab mode (answers from notifications allowed). */
export async function isCollab(
  store: Pick<AsyncStore, "settings">,
  userId: string,
  sessionId: string,
): Promise<boolean> {
  return await store.settings.get<boolean>(userId, collabKey(sessionId), false) === true;
}

/** What the log says of a question: still waiting, over, or not there. */
export type QuestionState = "pending" | "closed" | "unknown";

/** A question's state and kind as far as the log was read. */
export interface QuestionScan {
  state: QuestionState;
  kind: "question" | "approval" | null;
}

/**
 * The state of question `toolCallId` from a session's stored events, read
 * from the end back LOOKBACK events (a waiting question holds the agent, so
 * little follows it). A worker that started again, slept or ended since
 * holds no tool call any more.
 */
export function questionState(
  events: Iterable<{ json: string }>,
  toolCallId: string,
  /** What the events before these said (a log read in pages). */
  before: QuestionScan = { state: "unknown", kind: null },
): QuestionScan {
  let { state, kind } = before;
  const needle = JSON.stringify(toolCallId);
  for (const ev of events) {
    const j = ev.json;
    const restart = j.includes('"type":"session_start"') || j.includes('"type":"session_end"') ||
      j.includes('"type":"session_sleep"');
    if (restart) {
      if (state === "pending") state = "closed";
      continue;
    }
    if (!j.includes(needle) || !j.includes('"type":"question')) continue;
    let e: SessionEventBody | undefined;
    try {
      e = (JSON.parse(j) as { e?: SessionEventBody }).e;
    } catch {
      continue;
    }
    if (e?.toolCallId !== toolCallId) continue;
    if (e.type === "question") {
      state = "pending";
      kind = e.kind === "approval" ? "approval" : "question";
    } else if (e.type === "question_answered" || e.type === "question_cancelled") {
      state = "closed";
    }
  }
  return { state, kind };
}

/** Options of {@linkcode Questions}. */
export interface QuestionsOptions {
  store: Pick<AsyncStore, "settings" | "events" | "sessions">;
  runners: Pick<RunnerRegistry, "assertOwned" | "connectedRunner" | "isConnected" | "connected">;
  /** A session of `userId` (404 for foreign and unknown ids alike). */
  owned: (userId: string, sessionId: string) => Promise<SessionRecord>;
}

/** Answers, collab mode and approval policies. */
export class Questions {
  readonly #o: QuestionsOptions;

  constructor(o: QuestionsOptions) {
    this.#o = o;
  }

  async collab(userId: string, sessionId: string): Promise<boolean> {
    await this.#o.owned(userId, sessionId);
    return await isCollab(this.#o.store, userId, sessionId);
  }

  async setCollab(userId: string, sessionId: string, enabled: boolean): Promise<boolean> {
    await this.#o.owned(userId, sessionId);
    await this.#o.store.settings.set(userId, collabKey(sessionId), enabled);
    return enabled;
  }

  /** The kind of a question that waits in the session, or a 409 when none does under that id. */
  async pendingKind(s: SessionRecord, toolCallId: string): Promise<"question" | "approval"> {
    const { events } = this.#o.store;
    const last = await events.maxSeq(s.sessionId);
    // Read in pages, each at most PAGE_BYTES: memory stays bounded whatever the events weigh.
    let scan: QuestionScan = { state: "unknown", kind: null };
    let after = Math.max(0, last - LOOKBACK);
    while (after < last) {
      const page = await events.after(s.sessionId, after, 500, PAGE_BYTES);
      if (page.length === 0) break;
      scan = questionState(page, toolCallId, scan);
      after = page[page.length - 1]!.seq;
    }
    const { state, kind } = scan;
    if (state !== "pending" || kind === null) throw notPending();
    return kind;
  }

  /**
   * Passes an answer to the session's runner. `via: "push"` needs collab
   * mode (403); an approval needs a browser session (`cookie`), so that an
   * API key an agent could hold never approves its own calls.
   */
  async answer(
    userId: string,
    sessionId: string,
    a: { toolCallId: string; text: string; via: AnswerVia; cookie: boolean },
  ): Promise<void> {
    const s = await this.#o.owned(userId, sessionId);
    if (a.via === "push" && !await isCollab(this.#o.store, userId, sessionId)) {
      throw new RelayError(
        "forbidden",
        "not_collab",
        "Answers from notifications need collab mode on this session",
      );
    }
    const kind = await this.pendingKind(s, a.toolCallId);
    if (kind === "approval" && !a.cookie) {
      throw new RelayError("forbidden", "cookie_required", "Approvals need a browser session");
    }
    // Held here or by another relay node.
    const link = this.#o.runners.isConnected(s.runnerId)
      ? this.#o.runners.connected(s.runnerId)
      : null;
    if (!link) {
      throw new RelayError(
        "rejected",
        "runner_not_connected",
        "The session's runner is not connected",
      );
    }
    try {
      await link.request(
        "answer",
        { sessionId, toolCallId: a.toolCallId, text: a.text, via: a.via },
        TIMEOUT_MS,
      );
    } catch (err) {
      if (err instanceof RelayError) {
        if (err.code === "not_pending" || err.code === "session_ended") throw notPending();
        if (err.kind === "offline" || err.code === "runner_unreachable") {
          throw new RelayError(
            "rejected",
            "runner_not_connected",
            "The session's runner is not connected",
          );
        }
      }
      throw err;
    }
  }

  /** A runner's approval policy (`set`: replace it). */
  async runnerPolicy(
    userId: string,
    runnerId: string,
    set?: ApprovalPolicy,
  ): Promise<RunnerApprovalsResponse> {
    const link = await this.#o.runners.connectedRunner(userId, runnerId);
    return await link.request(
      "approvals",
      set ? { set: true, policy: set } : {},
      TIMEOUT_MS,
    ) as RunnerApprovalsResponse;
  }

  /** A session's approval policy (`set`: its own, or null to follow the runner's). */
  async sessionPolicy(
    userId: string,
    sessionId: string,
    set?: { policy: ApprovalPolicy | null },
  ): Promise<SessionApprovalsResponse> {
    const s = await this.#o.owned(userId, sessionId);
    const link = await this.#o.runners.connectedRunner(userId, s.runnerId);
    return await link.request(
      "approvals",
      set ? { sessionId, set: true, policy: set.policy } : { sessionId },
      TIMEOUT_MS,
    ) as SessionApprovalsResponse;
  }
}

function notPending(): RelayError {
  return conflict(
    "not_pending",
    "No question is waiting with this toolCallId, or it was already answered",
  );
}

/** The longest option title a notification button carries. */
const MAX_ACTION_TITLE = 40;
/** The longest option a button answers with (the worker cuts labels at 200). */
const MAX_ACTION_ANSWER = 200;

/**
 * What an `agent_needs_input` notification says and offers for a `question`
 * event: its text, and in collab mode the buttons (rule 3: two options of a
 * single multiple-choice question, or Approve and Deny) and an inline reply.
 */
export function needsInput(
  e: SessionEventBody,
  collab: boolean,
): { detail: string; toolCallId: string; actions: PushAction[] } | null {
  // What an answer could not name (the answer routes take 1 to 200 characters) has no notification.
  if (typeof e.toolCallId !== "string" || e.toolCallId.length > 200) return null;
  let detail: string;
  const actions: PushAction[] = [];
  if (e.kind === "approval") {
    detail = `approve ${String(e.toolName ?? "a tool")}: ${String(e.summary ?? "")}`;
    actions.push(
      { action: "approve", title: "Approve", answer: "approve" },
      { action: "deny", title: "Deny", answer: "deny" },
    );
  } else {
    const qs = Array.isArray(e.questions) ? e.questions as AskedQuestion[] : [];
    const first = qs[0];
    detail = String(first?.question ?? "a question") +
      (qs.length > 1 ? ` (+${qs.length - 1} more)` : "");
    if (qs.length === 1 && first && Array.isArray(first.options) && !first.multiSelect) {
      for (const [i, o] of first.options.slice(0, 2).entries()) {
        const label = String(o?.label ?? "");
        // The payload must stay under the push services' ~4 KB: a longer label is not a button.
        if (!label || label.length > MAX_ACTION_ANSWER) continue;
        actions.push({
          action: `option${i}`,
          title: label.length > MAX_ACTION_TITLE
            ? label.slice(0, MAX_ACTION_TITLE - 1) + "…"
            : label,
          answer: label,
        });
      }
    }
    actions.push({ action: "reply", title: "Reply", type: "text", placeholder: "Your answer" });
  }
  return { detail, toolCallId: e.toolCallId, actions: collab ? actions : [] };
}
