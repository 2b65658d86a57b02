/**
 * Answering an agent, collab mode and approval policies:
 *
 * - `POST /api/push/answer` (a notification's button or inline reply; the
 *   service worker sends the browser's cookie) and
 *   `POST /api/sessions/{id}/answer` (the session's page);
 * - `GET`/`PUT /api/sessions/{id}/collab`;
 * - `GET`/`PUT /api/sessions/{id}/approvals` and
 *   `GET`/`PUT /api/runners/{runnerId}/approvals`.
 *
 * Changing collab mode or a policy, and approving a tool call, need the
 * browser session: an API key (which an agent might find) cannot loosen
 * what holds the agent. The domain is relay/questions.ts.
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { z } from "zod";
import {
  type AnswerResponse,
  type ApprovalPolicyRequest,
  type CollabRequest,
  type CollabResponse,
  MAX_ANSWER_TEXT,
  MAX_POLICY_ENTRIES,
  type PushAnswerRequest,
  type RunnerApprovalsResponse,
  type SessionAnswerRequest,
  type SessionApprovalsRequest,
  type SessionApprovalsResponse,
} from "../../shared/questions_api.ts";
import { HttpError, principal, readJson, type RelayEnv } from "../_http.ts";
import { rejected } from "../errors.ts";
import type { Questions } from "../questions.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";

const ToolCallId = z.string().regex(/^[\x21-\x7e]{1,200}$/, "printable ASCII, 1 to 200");
const Text = z.string().max(MAX_ANSWER_TEXT);
const SessionId = z.string().min(1).max(64);

const PushAnswer = requestSchema<PushAnswerRequest>()(
  z.object({
    sessionId: SessionId,
    toolCallId: ToolCallId,
    text: Text,
    // A push service's URL (relay/push_endpoint.ts checks those it sends to; this one is only
    // compared with the caller's own subscriptions).
    endpoint: z.string().max(2048).optional(),
  }).strict(),
);
const SessionAnswer = requestSchema<SessionAnswerRequest>()(
  z.object({ toolCallId: ToolCallId, text: Text }).strict(),
);
const Collab = requestSchema<CollabRequest>()(z.object({ enabled: z.boolean() }).strict());

const Policy = z.object({
  mode: z.enum(["auto", "ask"]),
  tools: z.array(z.string().min(1).max(200)).max(MAX_POLICY_ENTRIES).default([]),
  commands: z.array(z.string().min(1).max(500)).max(MAX_POLICY_ENTRIES).default([]),
}).strict();
const RunnerPolicyBody = requestSchema<ApprovalPolicyRequest>()(Policy);
const SessionPolicyBody = requestSchema<SessionApprovalsRequest>()(
  z.object({ policy: Policy.nullable() }).strict(),
);
const PolicyAnswer = Policy.extend({
  tools: z.array(z.string()).max(MAX_POLICY_ENTRIES),
  commands: z.array(z.string()).max(MAX_POLICY_ENTRIES),
});
const RunnerPolicyAnswer = z.object({ policy: PolicyAnswer }) satisfies z.ZodType<
  RunnerApprovalsResponse
>;
const SessionPolicyAnswer = z.object({
  policy: PolicyAnswer.nullable(),
  runner: PolicyAnswer,
  effective: PolicyAnswer,
}) satisfies z.ZodType<SessionApprovalsResponse>;

function checked<T>(schema: z.ZodType<T>, value: unknown): T {
  const res = schema.safeParse(value);
  if (!res.success) {
    throw rejected("bad_runner_answer", "Runner sent an invalid answer to 'approvals'");
  }
  return res.data;
}

function cookieOnly(c: Context<RelayEnv>, what: string): string {
  const p = principal(c);
  if (p.via !== "cookie") throw new HttpError(403, "cookie_required", `Sign in: ${what}`);
  return p.userId;
}

const ANSWER_ERRORS = {
  404: "`not_found`: no such session, or not the caller's",
  409: "`not_pending`: no question waits under this toolCallId, or it was already answered",
  502: "`runner_not_connected`: the session's runner is not connected; `runner_unreachable`",
  504: "`runner_timeout`",
} as const;

const OK: AnswerResponse = { ok: true };

/** `POST /api/push/answer`, mounted under `/api/push`. */
export function pushAnswerRoute(
  questions: Questions,
  /** Withdraws the question's notification on the person's other devices (null: no push). */
  push: { answeredFrom(u: string, s: string, t: string, endpoint: string): void } | null,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  app.post(
    "/answer",
    routeDoc({
      tag: "Push",
      summary: "Answer a waiting agent question or approval from a notification",
      description: "Sent by the service worker for a notification's button (its `answer`) or " +
        "inline reply. Needs collab mode on the session. For an approval, `text` is `approve` " +
        "or `deny` (any other text denies, with that text as the reason). With `endpoint` (the " +
        "answering browser's push endpoint), the question's notification is withdrawn on the " +
        "person's other devices.",
      auth: "cookie",
      body: PushAnswer,
      ok: "`{ok: true}`: the agent has the answer",
      errors: {
        ...ANSWER_ERRORS,
        403: "`not_collab`: the session is not in collab mode",
      },
    }),
    async (c) => {
      const body = await readJson(c, PushAnswer);
      const userId = cookieOnly(c, "answers from a notification need the browser session");
      await questions.answer(userId, body.sessionId, {
        toolCallId: body.toolCallId,
        text: body.text,
        via: "push",
        cookie: true,
      });
      if (body.endpoint !== undefined) {
        push?.answeredFrom(userId, body.sessionId, body.toolCallId, body.endpoint);
      }
      return c.json(OK);
    },
  );
  return app;
}

/** The session routes (answer, collab, approvals), mounted under `/api/sessions`. */
export function sessionQuestionRoutes(questions: Questions): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const sessionErrors = { 404: "`not_found`: no such session, or not the caller's" };

  app.post(
    "/:id/answer",
    routeDoc({
      tag: "Sessions",
      summary: "Answer a question (or approve or deny a tool call) the session's agent waits on",
      description: "For an approval, `text` is `approve` or `deny`, or `deny: <reason>` (any " +
        "other text denies with it as the reason); approvals need the browser session.",
      auth: "principal",
      body: SessionAnswer,
      ok: "`{ok: true}`: the agent has the answer",
      errors: {
        ...ANSWER_ERRORS,
        403: "`cookie_required`: an approval answered with an API key",
      },
    }),
    async (c) => {
      const body = await readJson(c, SessionAnswer);
      const p = principal(c);
      await questions.answer(p.userId, c.req.param("id"), {
        toolCallId: body.toolCallId,
        text: body.text,
        via: "session",
        cookie: p.via === "cookie",
      });
      return c.json(OK);
    },
  );

  app.get(
    "/:id/collab",
    routeDoc({
      tag: "Sessions",
      summary: "Whether the session is in collab mode (answers from notifications allowed)",
      auth: "principal",
      ok: "`{collab}`",
      errors: sessionErrors,
    }),
    async (c) => {
      const collab = await questions.collab(principal(c).userId, c.req.param("id"));
      return c.json({ collab } satisfies CollabResponse);
    },
  );

  app.put(
    "/:id/collab",
    routeDoc({
      tag: "Sessions",
      summary: "Turn collab mode on or off: notifications' buttons and replies may answer",
      auth: "cookie",
      body: Collab,
      ok: "`{collab}`",
      errors: sessionErrors,
    }),
    async (c) => {
      const body = await readJson(c, Collab);
      const userId = cookieOnly(c, "collab mode is changed from the browser");
      const collab = await questions.setCollab(userId, c.req.param("id"), body.enabled);
      return c.json({ collab } satisfies CollabResponse);
    },
  );

  app.get(
    "/:id/approvals",
    routeDoc({
      tag: "Sessions",
      summary: "The session's approval policy, its runner's, and the one in force",
      auth: "principal",
      ok: "`{policy (null: follows the runner's), runner, effective}`",
      errors: { ...sessionErrors, ...RUNNER_ERRORS },
    }),
    async (c) => {
      const res = await questions.sessionPolicy(principal(c).userId, c.req.param("id"));
      return c.json(checked(SessionPolicyAnswer, res));
    },
  );

  app.put(
    "/:id/approvals",
    routeDoc({
      tag: "Sessions",
      summary: "Give the session a policy of its own, or null to follow its runner's",
      description: "Applies to the session's next tool calls, also while it runs.",
      auth: "cookie",
      body: SessionPolicyBody,
      ok: "`{policy, runner, effective}`",
      errors: { ...sessionErrors, ...RUNNER_ERRORS },
    }),
    async (c) => {
      const body = await readJson(c, SessionPolicyBody);
      const userId = cookieOnly(c, "approval policies are changed from the browser");
      const res = await questions.sessionPolicy(userId, c.req.param("id"), {
        policy: body.policy,
      });
      return c.json(checked(SessionPolicyAnswer, res));
    },
  );
  return app;
}

/** `GET`/`PUT /api/runners/{runnerId}/approvals`, mounted under `/api/runners`. */
export function runnerApprovalRoutes(questions: Questions): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const errors = { 404: "`not_found`: no such runner, or not the caller's", ...RUNNER_ERRORS };
  app.get(
    "/:runnerId/approvals",
    routeDoc({
      tag: "Runners",
      summary: "The runner's approval policy (sessions without their own follow it)",
      auth: "principal",
      ok: "`{policy: {mode, tools, commands}}`",
      errors,
    }),
    async (c) => {
      const res = await questions.runnerPolicy(principal(c).userId, c.req.param("runnerId"));
      return c.json(checked(RunnerPolicyAnswer, res));
    },
  );
  app.put(
    "/:runnerId/approvals",
    routeDoc({
      tag: "Runners",
      summary: "Replace the runner's approval policy (kept in its config.json)",
      description: "`mode: auto` runs every tool call; `ask` holds the calls of the listed " +
        "`tools` (`*`: all) and the bash commands matching `commands` (globs) for Approve or " +
        "Deny; `ask` with both lists empty holds every call. Running sessions that follow the " +
        "runner's policy take it at once.",
      auth: "cookie",
      body: RunnerPolicyBody,
      ok: "`{policy}`",
      errors,
    }),
    async (c) => {
      const body = await readJson(c, RunnerPolicyBody);
      const userId = cookieOnly(c, "approval policies are changed from the browser");
      const res = await questions.runnerPolicy(userId, c.req.param("runnerId"), body);
      return c.json(checked(RunnerPolicyAnswer, res));
    },
  );
  return app;
}
