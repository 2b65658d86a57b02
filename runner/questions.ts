/**
 * Questions and approvals in the worker: the agent's `ask_user` tool, the
 * gate that holds a tool call the approval policy names until a person
 * decides, and the answers that come back through the daemon. Each wait is
 * a `question` event in the session's stream (so every viewer and a reload
 * see it) and ends with `question_answered` or `question_cancelled`.
 *
 * @module
 */
import { defineTool, type ExtensionFactory } from "@mariozechner/pi-coding-agent";
import { Type } from "@mariozechner/pi-ai";
import type { SessionEventBody } from "../shared/protocol.ts";
import {
  type AnswerVia,
  approvalDecision,
  type ApprovalPolicy,
  ASK_USER_TOOL,
  type AskedQuestion,
  MAX_OPTIONS,
  MAX_QUESTION_TEXT,
  MAX_QUESTIONS,
  type QuestionKind,
} from "../shared/questions_api.ts";
import { callSummary, needsApproval } from "./approvals/policy.ts";

/** The answer's refusal when nothing waits under that id (the relay answers 409). */
export class NotPendingError extends Error {
  readonly code = "not_pending";
  constructor() {
    super("No question is waiting with this toolCallId (already answered, or never asked)");
    this.name = "NotPendingError";
  }
}

interface Waiting {
  kind: QuestionKind;
  settle: (answer: string, via: AnswerVia) => void;
}

/** Options of {@linkcode QuestionDesk}. */
export interface QuestionDeskOptions {
  /** Sends a session event. */
  emit: (e: SessionEventBody) => void;
  /** The approval policy in force (it may change while the session runs). */
  policy: ApprovalPolicy;
}

const cut = (s: string, n: number) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

/** One session's waits for a person. */
export class QuestionDesk {
  readonly #emit: (e: SessionEventBody) => void;
  readonly #waiting = new Map<string, Waiting>();
  #policy: ApprovalPolicy;

  constructor(o: QuestionDeskOptions) {
    this.#emit = o.emit;
    this.#policy = o.policy;
  }

  /** Replaces the policy; calls already waiting keep waiting. */
  setPolicy(p: ApprovalPolicy): void {
    this.#policy = p;
  }

  /** Ids of the calls waiting now. */
  get waiting(): string[] {
    return [...this.#waiting.keys()];
  }

  /** Answers a waiting call; a second answer (or an unknown id) throws {@linkcode NotPendingError}. */
  answer(toolCallId: string, text: string, via: AnswerVia): void {
    const w = this.#waiting.get(toolCallId);
    if (!w) throw new NotPendingError();
    this.#waiting.delete(toolCallId);
    w.settle(text, via);
  }

  /**
   * Emits the question and waits for its answer; a stop (the signal) ends
   * the wait with `question_cancelled` and rejects.
   */
  #wait(
    question: SessionEventBody & { toolCallId: string; kind: QuestionKind },
    signal: AbortSignal | undefined,
  ): Promise<{ answer: string; via: AnswerVia }> {
    const { toolCallId, kind } = question;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new Error("The agent was stopped"));
      const onAbort = () => {
        if (!this.#waiting.delete(toolCallId)) return;
        this.#emit({ type: "question_cancelled", toolCallId, reason: "The agent was stopped" });
        reject(new Error("The user stopped the agent before answering"));
      };
      this.#waiting.set(toolCallId, {
        kind,
        settle: (answer, via) => {
          signal?.removeEventListener("abort", onAbort);
          resolve({ answer, via });
        },
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#emit(question);
    });
  }

  /** The `ask_user` tool (the spec's AskUserQuestion). */
  askUserTool() {
    const Option = Type.Object({
      label: Type.String({ description: "The choice, a few words" }),
      description: Type.Optional(Type.String({ description: "What it means, one sentence" })),
    });
    const Question = Type.Object({
      question: Type.String({ description: "The question, complete and ending with '?'" }),
      header: Type.Optional(Type.String({ description: "A very short title, e.g. 'Database'" })),
      options: Type.Optional(
        Type.Array(Option, {
          maxItems: MAX_OPTIONS,
          description: `Up to ${MAX_OPTIONS} choices; the user may also answer in their own words`,
        }),
      ),
      multiSelect: Type.Optional(Type.Boolean({ description: "Several choices may be picked" })),
    });
    return defineTool({
      name: ASK_USER_TOOL,
      label: "Ask the user",
      description: "Ask the user one or more questions and wait for the answer: when a " +
        "decision is theirs (a choice between approaches, a missing requirement, a " +
        "confirmation before something irreversible). Each question may offer up to " +
        `${MAX_OPTIONS} options; the user may always answer in free text. The answer ` +
        "comes back as this tool's result. The user may be away: ask only what you need.",
      parameters: Type.Object({
        questions: Type.Array(Question, { minItems: 1, maxItems: MAX_QUESTIONS }),
      }),
      execute: async (toolCallId, params, signal) => {
        const questions = clean(params.questions as AskedQuestion[]);
        if (questions.length === 0) throw new Error("Ask at least one question");
        const { answer, via } = await this.#wait(
          { type: "question", toolCallId, kind: "question", questions },
          signal,
        );
        this.#emit({ type: "question_answered", toolCallId, kind: "question", answer, via });
        return {
          content: [{ type: "text" as const, text: `The user answered:\n${answer}` }],
          details: { answer },
        };
      },
    });
  }

  /** A pi extension: a tool call the policy names waits for Approve or Deny. */
  gate(): ExtensionFactory {
    return (pi) => {
      pi.on("tool_call", async (event, ctx) => {
        if (!needsApproval(this.#policy, event.toolName, event.input)) return undefined;
        let decided: { answer: string; via: AnswerVia };
        try {
          decided = await this.#wait({
            type: "question",
            toolCallId: event.toolCallId,
            kind: "approval",
            toolName: event.toolName,
            summary: callSummary(event.toolName, event.input),
          }, ctx.signal);
        } catch {
          return { block: true, reason: "The user stopped the agent before approving this call" };
        }
        const d = approvalDecision(decided.answer);
        this.#emit({
          type: "question_answered",
          toolCallId: event.toolCallId,
          kind: "approval",
          answer: decided.answer,
          approved: d.approved,
          via: decided.via,
        });
        if (d.approved) return undefined;
        return {
          block: true,
          reason: `The user denied this ${event.toolName} call` +
            (d.reason ? `: ${d.reason}` : ". Do not retry it; ask or take another way"),
        };
      });
    };
  }
}

/** The questions as the event carries them: capped, options at most MAX_OPTIONS. */
function clean(qs: AskedQuestion[]): AskedQuestion[] {
  return (Array.isArray(qs) ? qs : []).slice(0, MAX_QUESTIONS).filter((q) =>
    typeof q?.question === "string" && q.question.trim() !== ""
  ).map((q) => ({
    question: cut(q.question.trim(), MAX_QUESTION_TEXT),
    ...(typeof q.header === "string" && q.header.trim() ? { header: cut(q.header, 40) } : {}),
    options: (Array.isArray(q.options) ? q.options : []).filter((o) =>
      typeof o?.label === "string" && o.label.trim() !== ""
    ).slice(0, MAX_OPTIONS).map((o) => ({
      label: cut(o.label.trim(), 200),
      ...(typeof o.description === "string" && o.description.trim()
        ? { description: cut(o.description, 1000) }
        : {}),
    })),
    ...(q.multiSelect === true ? { multiSelect: true } : {}),
  }));
}
