import { Hono } from "hono";
import { z } from "zod";
import { HttpError, principal, readBody, readJson, type RelayEnv } from "../_http.ts";
import { MAX_WEBHOOK_BODY, type Webhooks } from "../webhooks.ts";
import { FilterModeSchema, FiltersSchema, ModelSchema } from "./trigger_schemas.ts";

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

const WebhookCreate = z.object({
  name: Name,
  source: Source,
  runnerId: z.string().min(1).max(100).nullable().optional(),
  cwd: z.string().max(4096).nullable().optional(),
  prompt: z.string().max(200_000).nullable().optional(),
  model: ModelSchema.nullable().optional(),
  eventFilter: EventFilter.nullable().optional(),
  filters: FiltersSchema.nullable().optional(),
  filterMode: FilterModeSchema.nullable().optional(),
}).strict();

/** Any subset of the create fields (`null` clears one), plus `enabled`. */
const WebhookUpdate = WebhookCreate.partial().extend({
  enabled: z.boolean().optional(),
}).strict();

/** `/api/webhooks` CRUD (the caller's own webhooks only). */
export function webhookRoutes(webhooks: Webhooks): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.post("/", async (c) => {
    const body = await readJson(c, WebhookCreate);
    return c.json({ webhook: await webhooks.create(principal(c).userId, body) }, 201);
  });

  app.get("/", async (c) => {
    return c.json({ webhooks: await webhooks.list(principal(c).userId) });
  });

  app.get("/:id", async (c) => {
    return c.json({ webhook: await webhooks.get(principal(c).userId, c.req.param("id")) });
  });

  app.put("/:id", async (c) => {
    const body = await readJson(c, WebhookUpdate);
    return c.json({ webhook: await webhooks.update(principal(c).userId, c.req.param("id"), body) });
  });

  app.delete("/:id", (c) => {
    webhooks.remove(principal(c).userId, c.req.param("id"));
    return c.json({ ok: true });
  });

  return app;
}

/** `POST /api/webhooks/{id}/fire`: authenticated by its signature, not by a cookie or key. */
export function webhookFireRoute(webhooks: Webhooks): Hono {
  const app = new Hono();
  app.post("/:id/fire", async (c) => {
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
