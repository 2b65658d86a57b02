import { Hono } from "hono";
import { notFound } from "../errors.ts";
import { HttpError, principal, readBody, readJson, type RelayEnv } from "../_http.ts";
import { MAX_WEBHOOK_BODY, WebhookCreate, type Webhooks, WebhookUpdate } from "../webhooks.ts";

/** `/api/webhooks` CRUD (the caller's own webhooks only). */
export function webhookRoutes(webhooks: Webhooks): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const { store } = webhooks;

  app.post("/", async (c) => {
    const body = await readJson(c, WebhookCreate);
    return c.json({ webhook: await webhooks.create(principal(c).userId, body) }, 201);
  });

  app.get("/", async (c) => {
    const list = store.webhooks.listForUser(principal(c).userId);
    return c.json({ webhooks: await Promise.all(list.map((w) => webhooks.view(w, false))) });
  });

  app.get("/:id", async (c) => {
    const w = store.webhooks.getOwned(principal(c).userId, c.req.param("id"));
    if (!w) throw notFound("Webhook");
    return c.json({ webhook: await webhooks.view(w, true) });
  });

  app.put("/:id", async (c) => {
    const body = await readJson(c, WebhookUpdate);
    return c.json({ webhook: await webhooks.update(principal(c).userId, c.req.param("id"), body) });
  });

  app.delete("/:id", (c) => {
    if (!store.webhooks.delete(principal(c).userId, c.req.param("id"))) throw notFound("Webhook");
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
