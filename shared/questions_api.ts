/**
 * Questions and approvals: an agent waiting for a person. The wire types of
 * their session events (`question`, `question_answered`,
 * `question_cancelled`), of the routes that answer them and of the approval
 * policy, and the pure fold of a session's events into what still waits.
 * docs/questions.md tells the whole story.
 *
 * @module
 */
import type { SessionEventBody } from "./protocol.ts";

/** The agent's tool that asks (the spec's AskUserQuestion). */
export const ASK_USER_TOOL = "ask_user";
/** Questions one `ask_user` call may ask at most. */
export const MAX_QUESTIONS = 4;
/** Options one question may offer at most (free text is always possible). */
export const MAX_OPTIONS = 4;
/** Longest answer, in characters. */
export const MAX_ANSWER_TEXT = 10_000;
/** Longest question text carried in an event (characters). */
export const MAX_QUESTION_TEXT = 2_000;
/** Longest summary of a tool call awaiting approval (characters). */
export const MAX_SUMMARY = 2_000;

/** One choice of a question. */
export interface QuestionOption {
  label: string;
  description?: string;
}

/** One question of an `ask_user` call. */
export interface AskedQuestion {
  question: string;
  /** A short title (a chip), e.g. "Database". */
  header?: string;
  /** Up to MAX_OPTIONS; none means free text only. */
  options: QuestionOption[];
  /** Several options may be picked. */
  multiSelect?: boolean;
}

/** What waits: a question of the agent, or a tool call that needs approval. */
export type QuestionKind = "question" | "approval";

/** Session event: the agent waits for a person (its tool call `toolCallId` is held). */
export interface QuestionEvent {
  type: "question";
  toolCallId: string;
  kind: QuestionKind;
  /** kind `question`. */
  questions?: AskedQuestion[];
  /** kind `approval`: the tool and what it would do (a bash command, the arguments). */
  toolName?: string;
  summary?: string;
}

/** Where an answer came from. */
export type AnswerVia = "session" | "push";

/** Session event: the question was answered (its tool call goes on). */
export interface QuestionAnsweredEvent {
  type: "question_answered";
  toolCallId: string;
  kind: QuestionKind;
  answer: string;
  /** kind `approval`. */
  approved?: boolean;
  via: AnswerVia;
}

/** Session event: the wait ended without an answer (the agent was stopped). */
export interface QuestionCancelledEvent {
  type: "question_cancelled";
  toolCallId: string;
  reason: string;
}

/** A question that still waits, as a viewer shows it. */
export interface PendingQuestion {
  toolCallId: string;
  kind: QuestionKind;
  questions: AskedQuestion[];
  toolName: string | null;
  summary: string | null;
}

/**
 * The pending questions after event `e` (the same array when it changes
 * nothing). A worker that starts, sleeps or ends holds no tool call, so
 * those events clear them, as does the end of the agent's turn.
 */
export function reduceQuestions(list: PendingQuestion[], e: SessionEventBody): PendingQuestion[] {
  switch (e.type) {
    case "question": {
      const q = toPending(e);
      if (!q) return list;
      return [...list.filter((p) => p.toolCallId !== q.toolCallId), q];
    }
    case "question_answered":
    case "question_cancelled":
    case "tool_execution_end": {
      const id = String(e.toolCallId ?? "");
      return list.some((p) => p.toolCallId === id) ? list.filter((p) => p.toolCallId !== id) : list;
    }
    case "agent_end":
    case "session_start":
    case "session_sleep":
    case "session_end":
      return list.length === 0 ? list : [];
    default:
      return list;
  }
}

function toPending(e: SessionEventBody): PendingQuestion | null {
  if (typeof e.toolCallId !== "string" || e.toolCallId === "") return null;
  const kind: QuestionKind = e.kind === "approval" ? "approval" : "question";
  const questions = Array.isArray(e.questions)
    ? (e.questions as unknown[]).map(asQuestion).filter((q) => q !== null).slice(0, MAX_QUESTIONS)
    : [];
  return {
    toolCallId: e.toolCallId,
    kind,
    questions,
    toolName: typeof e.toolName === "string" ? e.toolName : null,
    summary: typeof e.summary === "string" ? e.summary : null,
  };
}

function asQuestion(v: unknown): AskedQuestion | null {
  const q = v as Partial<AskedQuestion> | null;
  if (typeof q?.question !== "string") return null;
  const options = Array.isArray(q.options)
    ? q.options.filter((o) => typeof o?.label === "string").slice(0, MAX_OPTIONS).map((o) => ({
      label: String(o.label),
      ...(typeof o.description === "string" ? { description: o.description } : {}),
    }))
    : [];
  return {
    question: q.question,
    ...(typeof q.header === "string" ? { header: q.header } : {}),
    options,
    ...(q.multiSelect === true ? { multiSelect: true } : {}),
  };
}

/** How an answer's text decides an approval. */
export interface ApprovalDecision {
  approved: boolean;
  /** Why it was denied, in the person's words (told to the agent). */
  reason?: string;
}

const YES = /^(approve|approved|allow|yes|y|ok)$/i;
const NO = /^(deny|denied|reject|no|n)$/i;

/**
 * An approval's answer: `approve` (or yes, allow, ok) approves; `deny` (or
 * no, reject) denies; `deny: <reason>` denies with a reason; any other text
 * denies, with that text as the reason (a reply typed on a lock screen is
 * read as an objection, never as a yes).
 */
export function approvalDecision(text: string): ApprovalDecision {
  const t = text.trim();
  if (YES.test(t)) return { approved: true };
  if (NO.test(t)) return { approved: false };
  const m = t.match(/^(?:deny|denied|reject|no)\s*[:,-]\s*([\s\S]+)$/i);
  return { approved: false, reason: (m ? m[1]! : t).trim() };
}

/** An approval policy: `auto` runs every tool call; `ask` holds the chosen ones for a person. */
export interface ApprovalPolicy {
  mode: "auto" | "ask";
  /** Tool names that need approval under `ask` (`*`: every tool). */
  tools: string[];
  /** Glob patterns (`*`, `?`) of bash commands that need approval under `ask`. */
  commands: string[];
}

/** The policy of a runner with none configured. */
export const DEFAULT_APPROVAL_POLICY: ApprovalPolicy = { mode: "auto", tools: [], commands: [] };

/** Tool names and command patterns a policy may list at most. */
export const MAX_POLICY_ENTRIES = 100;

/** `POST /api/push/answer`. */
export interface PushAnswerRequest {
  sessionId: string;
  toolCallId: string;
  text: string;
  /**
   * The answering browser's push endpoint: the question's notification is
   * withdrawn on the person's other devices, not on this one.
   */
  endpoint?: string;
}

/** `POST /api/sessions/{sessionId}/answer`. */
export interface SessionAnswerRequest {
  toolCallId: string;
  text: string;
}

/** The answer of both answer routes. */
export interface AnswerResponse {
  ok: true;
}

/** `PUT /api/sessions/{sessionId}/collab`. */
export interface CollabRequest {
  enabled: boolean;
}

/** `GET` and `PUT /api/sessions/{sessionId}/collab`. */
export interface CollabResponse {
  collab: boolean;
}

/** `GET` and `PUT /api/runners/{runnerId}/approvals` (the PUT's body is the policy itself). */
export interface RunnerApprovalsResponse {
  policy: ApprovalPolicy;
}

/** A policy as a request gives it (`PUT .../approvals`): the lists default to empty. */
export interface ApprovalPolicyRequest {
  mode: "auto" | "ask";
  tools?: string[];
  commands?: string[];
}

/** `PUT /api/sessions/{sessionId}/approvals`: a policy of its own, or null to follow the runner's. */
export interface SessionApprovalsRequest {
  policy: ApprovalPolicyRequest | null;
}

/** `GET` and `PUT /api/sessions/{sessionId}/approvals`. */
export interface SessionApprovalsResponse {
  /** The session's own policy, or null when it follows its runner's. */
  policy: ApprovalPolicy | null;
  runner: ApprovalPolicy;
  /** What applies to the session's next tool calls. */
  effective: ApprovalPolicy;
}
