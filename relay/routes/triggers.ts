import { Hono } from "hono";
import { invalid } from "../errors.ts";
import { HttpError, principal, readJson, type RelayEnv } from "../_http.ts";
import type { TriggerListeners } from "../trigger_listeners.ts";
import type { Triggers } from "../triggers.ts";
import {
  BroadcastBody,
  ListenerBody,
  ListenerPatch,
  SubscriptionBody,
  SubscriptionPatch,
  TriggerBody,
} from "./trigger_schemas.ts";

/** History `limit`: default 50, at most 200. */
function limitOf(raw: string | undefined): number {
  if (raw === undefined || raw === "") return 50;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) {
    throw invalid("limit must be a positive integer");
  }
  return Math.min(n, 200);
}

/** `/api/sessions/{id}/...`: triggers, history, available triggers, subscriptions. */
export function sessionTriggerRoutes(triggers: Triggers): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.post("/:id/trigger", async (c) => {
    const body = await readJson(c, TriggerBody);
    const res = await triggers.trigger(principal(c).userId, c.req.param("id"), body);
    return c.json({ ok: true, ...res });
  });

  app.get("/:id/triggers", (c) => {
    const list = triggers.history(
      principal(c).userId,
      c.req.param("id"),
      limitOf(c.req.query("limit")),
    );
    return c.json({ triggers: list });
  });

  app.delete("/:id/triggers", (c) => {
    triggers.clearHistory(principal(c).userId, c.req.param("id"));
    return c.json({ ok: true });
  });

  app.get("/:id/available-triggers", (c) => {
    const defs = triggers.available(principal(c).userId, c.req.param("id"));
    return c.json({
      triggerDefs: defs.map((d) => ({
        type: d.type,
        label: d.label,
        description: d.description ?? "",
        params: d.params,
        schema: d.schema ?? null,
      })),
    });
  });

  app.get("/:id/trigger-subscriptions", (c) => {
    return c.json({
      subscriptions: triggers.subscriptions(principal(c).userId, c.req.param("id")),
    });
  });

  app.post("/:id/trigger-subscriptions", async (c) => {
    const body = await readJson(c, SubscriptionBody);
    const s = triggers.subscribe(principal(c).userId, c.req.param("id"), body);
    return c.json({ ok: true, ...s });
  });

  // `{target}` is a subscriptionId (preferred, also as ?subscriptionId=) or a trigger type.
  const target = (
    c: { req: { param: (k: string) => string; query: (k: string) => string | undefined } },
  ) => c.req.query("subscriptionId") || c.req.param("target");

  app.put("/:id/trigger-subscriptions/:target?", async (c) => {
    const body = await readJson(c, SubscriptionPatch);
    const t = target(c);
    if (!t) throw invalid("Name the subscription (id or trigger type)");
    const s = triggers.updateSubscription(principal(c).userId, c.req.param("id"), t, body);
    return c.json({ ok: true, ...s });
  });

  app.delete("/:id/trigger-subscriptions/:target?", (c) => {
    const t = target(c);
    if (!t) throw invalid("Name the subscription (id or trigger type)");
    const s = triggers.unsubscribe(principal(c).userId, c.req.param("id"), t);
    return c.json({ ok: true, ...s });
  });

  return app;
}

/** `/api/runners/{id}/...`: the runner's triggers, listeners and broadcasts. */
export function runnerTriggerRoutes(triggers: TriggerListeners): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.get("/:runnerId/triggers", (c) => {
    return c.json(triggers.runnerTriggers(principal(c).userId, c.req.param("runnerId")));
  });

  app.get("/:runnerId/trigger-listeners", (c) => {
    return c.json({
      listeners: triggers.listeners(principal(c).userId, c.req.param("runnerId")),
    });
  });

  app.post("/:runnerId/trigger-listeners", async (c) => {
    const body = await readJson(c, ListenerBody);
    const l = triggers.addListener(principal(c).userId, c.req.param("runnerId"), body);
    return c.json({ ok: true, ...l });
  });

  app.put("/:runnerId/trigger-listeners/:target", async (c) => {
    const body = await readJson(c, ListenerPatch);
    const l = triggers.updateListener(
      principal(c).userId,
      c.req.param("runnerId"),
      c.req.param("target"),
      body,
    );
    return c.json({ ok: true, ...l });
  });

  app.delete("/:runnerId/trigger-listeners/:target", (c) => {
    const r = triggers.removeListener(
      principal(c).userId,
      c.req.param("runnerId"),
      c.req.param("target"),
    );
    return c.json({ ok: true, ...r });
  });

  // Services fire triggers with the runner's key: a browser cookie is not enough.
  app.post("/:runnerId/trigger-broadcast", async (c) => {
    if (principal(c).via !== "key") {
      throw new HttpError(403, "key_required", "Broadcasts need an API key (x-api-key)");
    }
    const body = await readJson(c, BroadcastBody);
    const r = await triggers.broadcast(principal(c).userId, c.req.param("runnerId"), body);
    return c.json({ ok: true, ...r });
  });

  return app;
}
