import { Hono } from "hono";
import type {
  CreateWebhookRequest,
  OkResponse,
  UpdateWebhookRequest,
  WebhookListResponse,
  WebhookResponse,
} from "../../shared/api.ts";
import { notFound } from "../errors.ts";
import { HttpError, principal, readBody, readJson, type RelayEnv } from "../_http.ts";
import { MAX_WEBHOOK_BODY, WebhookCreate, type Webhooks, WebhookUpdate } from "../webhooks.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";

// The request schemas (in ../webhooks.ts) each accept exactly their type in shared/api.ts.
requestSchema<CreateWebhookRequest>()(WebhookCreate);
requestSchema<UpdateWebhookRequest>()(WebhookUpdate);

const NOT_FOUND = { 404: "`not_found`: no such webhook, or not the caller's" } as const;

/** `/api/webhooks` CRUD (the caller's own webhooks only). */
export function webhookRoutes(webhooks: Webhooks): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const { store } = webhooks;

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
    const list = store.webhooks.listForUser(principal(c).userId);
    const all = await Promise.all(list.map((w) => webhooks.view(w, false)));
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
    const w = store.webhooks.getOwned(principal(c).userId, c.req.param("id"));
    if (!w) throw notFound("Webhook");
    return c.json({ webhook: await webhooks.view(w, true) } satisfies WebhookResponse);
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
  app.delete("/:id", deleteDoc, (c) => {
    if (!store.webhooks.delete(principal(c).userId, c.req.param("id"))) throw notFound("Webhook");
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
      "enabled, the signature (and its timestamp, ±5 minutes), the nonce, a redelivery, the " +
      "body, the event filter and filters, then the session is spawned. See docs/api.md.",
    auth: "signature",
    requestBody: {
      required: true,
      description: "Any JSON object, at most 1 MiB; it becomes the trigger's payload",
      content: { "application/json": { schema: { type: "object" } } },
    },
    ok: "`{ok: true, triggerId, sessionId}`; with `duplicate: true` for a redelivery; " +
      "`{ok: true, filtered: true}` when the filters did not match (nothing started)",
    errors: {
      400: "`bad_content_type` (not application/json), `bad_json` (not a JSON object)",
      401: "`bad_signature`: missing, wrong or out of date",
      404: "`not_found`: no such webhook, or it is disabled",
      409: "`nonce_reused`",
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
