import { Hono } from "hono";
import { z } from "zod";
import { MAX_INPUT_TEXT } from "../../shared/protocol.ts";
import type {
  CreateWebhookRequest,
  OkResponse,
  UpdateWebhookRequest,
  WebhookListResponse,
  WebhookResponse,
} from "../../shared/api.ts";
import { HttpError, principal, readBody, readJson, type RelayEnv } from "../_http.ts";
import { MAX_WEBHOOK_BODY, type Webhooks } from "../webhooks.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";
import { FilterModeSchema, FiltersSchema, ModelSchema, PathString } from "./trigger_schemas.ts";

const Name = z.string().trim().min(1).max(200);
/**
 * What breaks a label out of its line or disguises the text around it,
 * wherever `external:<source>` is shown (the agent's trigger message, the
 * web client): control characters, line and paragraph separators,
 * lone surrogates, and the bidirectional embeddings, overrides and isolates.
 */
const UNSAFE_IN_LABEL = /[\p{Cc}\p{Cs}\u2028\u2029\u202A-\u202E\u2066-\u2069]/u;
/** Where deliveries come from, as people name it: "GitHub Actions", "ci/main", "billing". */
const Source = z.string().trim().min(1).max(100).refine(
  (s) => !UNSAFE_IN_LABEL.test(s),
  "Control characters, line breaks and text direction marks are not allowed",
);
const EventFilter = z.array(z.string().min(1).max(200)).max(100);

const WebhookCreate = requestSchema<CreateWebhookRequest>()(
  z.object({
    name: Name,
    source: Source,
    runnerId: z.string().min(1).max(100).nullable().optional(),
    cwd: PathString.nullable().optional(),
    prompt: z.string().max(MAX_INPUT_TEXT).nullable().optional(),
    model: ModelSchema.nullable().optional(),
    eventFilter: EventFilter.nullable().optional(),
    filters: FiltersSchema.nullable().optional(),
    filterMode: FilterModeSchema.nullable().optional(),
    requireReplayProtection: z.boolean().optional(),
  }).strict(),
);

/** Any subset of the create fields (`null` clears one), plus `enabled`. */
const WebhookUpdate = requestSchema<UpdateWebhookRequest>()(
  WebhookCreate.partial().extend({
    enabled: z.boolean().optional(),
  }).strict(),
);

const NOT_FOUND = { 404: "`not_found`: no such webhook, or not the caller's" } as const;

/** `/api/webhooks` CRUD (the caller's own webhooks only). */
export function webhookRoutes(webhooks: Webhooks): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  const createDoc = routeDoc({
    tag: "Webhooks",
    summary: "Create a webhook (enabled)",
    auth: "principal",
    body: WebhookCreate,
    ok: { status: 201, description: "`{webhook: {...}}` with its secret" },
    errors: { 400: "`unknown_runner`: `runnerId` is not one of the caller's runners" },
  });
  app.post("/", createDoc, async (c) => {
    const body = await readJson(c, WebhookCreate);
    const webhook = await webhooks.create(principal(c).userId, body);
    return c.json({ webhook } satisfies WebhookResponse, 201);
  });

  const listDoc = routeDoc({
    tag: "Webhooks",
    summary: "List the caller's webhooks",
    auth: "principal",
    ok: "`{webhooks: [...]}`, newest first, without secrets",
  });
  app.get("/", listDoc, async (c) => {
    const all = await webhooks.list(principal(c).userId);
    return c.json({ webhooks: all } satisfies WebhookListResponse);
  });

  const getDoc = routeDoc({
    tag: "Webhooks",
    summary: "One webhook, with its secret",
    auth: "principal",
    ok: "`{webhook: {...}}` with its secret",
    errors: NOT_FOUND,
  });
  app.get("/:id", getDoc, async (c) => {
    const webhook = await webhooks.get(principal(c).userId, c.req.param("id"));
    return c.json({ webhook } satisfies WebhookResponse);
  });

  const updateDoc = routeDoc({
    tag: "Webhooks",
    summary: "Change a webhook",
    description: "A field present replaces the old value; `null` clears it.",
    auth: "principal",
    body: WebhookUpdate,
    ok: "`{webhook: {...}}` without its secret",
    errors: { 400: "`unknown_runner`", ...NOT_FOUND },
  });
  app.put("/:id", updateDoc, async (c) => {
    const body = await readJson(c, WebhookUpdate);
    const webhook = await webhooks.update(principal(c).userId, c.req.param("id"), body);
    return c.json({ webhook } satisfies WebhookResponse);
  });

  const deleteDoc = routeDoc({
    tag: "Webhooks",
    summary: "Delete a webhook",
    auth: "principal",
    ok: "`{ok: true}`",
    errors: NOT_FOUND,
  });
  app.delete("/:id", deleteDoc, async (c) => {
    await webhooks.remove(principal(c).userId, c.req.param("id"));
    return c.json({ ok: true } satisfies OkResponse);
  });

  return app;
}

/** `POST /api/webhooks/{id}/fire`: authenticated by its signature, not by a cookie or key. */
export function webhookFireRoute(webhooks: Webhooks): Hono {
  const app = new Hono();
  const fireDoc = routeDoc({
    tag: "Webhooks",
    summary: "Fire a webhook: start a session with the body as its trigger",
    description: "Checked in this order: Content-Type and size, the webhook exists and is " +
      "enabled, the signature (and its timestamp, ±5 minutes), the replay protection, the " +
      "webhook's rate limit, the nonce, a redelivery, the body, the event filter and filters, " +
      "then the session is spawned. See docs/api.md.",
    auth: "signature",
    requestBody: {
      required: true,
      description: "Any JSON object, at most 1 MiB; it becomes the trigger's payload",
      content: { "application/json": { schema: { type: "object" } } },
    },
    ok: "`{ok: true, triggerId, sessionId}`; with `duplicate: true` for a redelivery; " +
      "`{ok: true, filtered: true}` when the filters did not match (nothing started)",
    errors: {
      400: "`bad_content_type` (not application/json), `bad_json` (not a JSON object), " +
        "`too_deep` (nested over 64 levels)",
      401: "`bad_signature`: missing, wrong or out of date; `replay_protection_required`: a " +
        "legacy signature, or GitHub's without `X-GitHub-Delivery`, on a webhook with " +
        "`requireReplayProtection`",
      404: "`not_found`: no such webhook, or it is disabled",
      409:
        "`nonce_reused`; `replayed`: a GitHub body already delivered under another delivery id " +
        "(with `requireReplayProtection`)",
      429: "`rate_limited`: more fires of this webhook in the last minute than the relay's limit " +
        "(60 by default); see `Retry-After`. Nothing started",
      413: "`body_too_large`: over 1 MiB",
      500: "`no_runner`, `secret_unreadable` (the relay's secret file changed)",
      502: "`runner_rejected`: the runner did not start the session",
      503: RUNNER_ERRORS[503],
      504: "`session_timeout`: the session did not start in time",
    },
  });
  app.post("/:id/fire", fireDoc, async (c) => {
    const type = c.req.header("content-type") ?? "";
    if (!/^application\/json\b/i.test(type)) {
      throw new HttpError(400, "bad_content_type", "Content-Type must be application/json");
    }
    const raw = await readBody(c.req.raw, MAX_WEBHOOK_BODY);
    const res = await webhooks.fire(c.req.param("id"), c.req.raw.headers, raw);
    return c.json(res.body, res.status);
  });
  return app;
}
