import { Hono } from "hono";
import type {
  AvailableTriggersResponse,
  BroadcastRequest,
  BroadcastResponse,
  ListenerListResponse,
  ListenerPatchRequest,
  ListenerRequest,
  ListenerResponse,
  OkResponse,
  RemoveListenerResponse,
  RunnerTriggersResponse,
  SendTriggerRequest,
  SendTriggerResponse,
  SubscribeRequest,
  SubscriptionListResponse,
  SubscriptionPatchRequest,
  SubscriptionResponse,
  TriggerHistoryResponse,
  UnsubscribeResponse,
} from "../../shared/api.ts";
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
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";

// The request schemas (in ./trigger_schemas.ts) each accept exactly their type in shared/api.ts.
requestSchema<SendTriggerRequest>()(TriggerBody);
requestSchema<SubscribeRequest>()(SubscriptionBody);
requestSchema<SubscriptionPatchRequest>()(SubscriptionPatch);
requestSchema<ListenerRequest>()(ListenerBody);
requestSchema<ListenerPatchRequest>()(ListenerPatch);
requestSchema<BroadcastRequest>()(BroadcastBody);

const SESSION_NOT_FOUND = { 404: "`not_found`: no such session, or not the caller's" } as const;
const RUNNER_NOT_FOUND = { 404: "`not_found`: no such runner, or not the caller's" } as const;
/** A type missing from the runner's catalog, or params that do not fit its definition. */
const CATALOG_ERRORS = "`unknown_trigger_type`, `invalid_params`";
/** `{target}` of subscriptions and listeners. */
const TARGET = "`{target}` is the id, or (legacy) a trigger type: then every one of that type " +
  "(the answer shows the first).";

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

  const triggerDoc = routeDoc({
    tag: "Triggers",
    summary: "Deliver a trigger into a session and record it in its history",
    auth: "principal",
    body: TriggerBody,
    ok: "`{ok: true, triggerId}`",
    errors: {
      ...SESSION_NOT_FOUND,
      409: "`session_ended`",
      ...RUNNER_ERRORS,
    },
  });
  app.post("/:id/trigger", triggerDoc, async (c) => {
    const body = await readJson(c, TriggerBody);
    const res = await triggers.trigger(principal(c).userId, c.req.param("id"), body);
    return c.json({ ok: true, ...res } satisfies SendTriggerResponse);
  });

  const historyDoc = routeDoc({
    tag: "Triggers",
    summary: "A session's trigger history",
    auth: "principal",
    query: [{
      name: "limit",
      description: "At most this many entries (above 200 counts as 200)",
      schema: { type: "integer", minimum: 1, default: 50 },
    }],
    ok: "`{triggers: [...]}`, most recent first",
    errors: { 400: "`bad_request`: `limit` is not a positive integer", ...SESSION_NOT_FOUND },
  });
  app.get("/:id/triggers", historyDoc, async (c) => {
    const list = await triggers.history(
      principal(c).userId,
      c.req.param("id"),
      limitOf(c.req.query("limit")),
    );
    return c.json({ triggers: list } satisfies TriggerHistoryResponse);
  });

  const clearDoc = routeDoc({
    tag: "Triggers",
    summary: "Clear a session's trigger history",
    auth: "principal",
    ok: "`{ok: true}`",
    errors: SESSION_NOT_FOUND,
  });
  app.delete("/:id/triggers", clearDoc, async (c) => {
    await triggers.clearHistory(principal(c).userId, c.req.param("id"));
    return c.json({ ok: true } satisfies OkResponse);
  });

  const availableDoc = routeDoc({
    tag: "Triggers",
    summary: "The trigger catalog of a session's runner, with the payload schemas",
    auth: "principal",
    ok: "`{triggerDefs: [{type, label, description, params, schema}]}`",
    errors: SESSION_NOT_FOUND,
  });
  app.get("/:id/available-triggers", availableDoc, async (c) => {
    const defs = await triggers.available(principal(c).userId, c.req.param("id"));
    return c.json(
      {
        triggerDefs: defs.map((d) => ({
          type: d.type,
          label: d.label,
          description: d.description ?? "",
          params: d.params,
          schema: d.schema ?? null,
        })),
      } satisfies AvailableTriggersResponse,
    );
  });

  const subscriptionsDoc = routeDoc({
    tag: "Triggers",
    summary: "A session's trigger subscriptions",
    auth: "principal",
    ok: "`{subscriptions: [...]}`, oldest first",
    errors: SESSION_NOT_FOUND,
  });
  app.get("/:id/trigger-subscriptions", subscriptionsDoc, async (c) => {
    return c.json(
      {
        subscriptions: await triggers.subscriptions(principal(c).userId, c.req.param("id")),
      } satisfies SubscriptionListResponse,
    );
  });

  const subscribeDoc = routeDoc({
    tag: "Triggers",
    summary: "Subscribe a session to the broadcasts of a trigger type on its runner",
    auth: "principal",
    body: SubscriptionBody,
    ok: "`{ok: true, ...subscription}`",
    errors: { 400: CATALOG_ERRORS, ...SESSION_NOT_FOUND, 409: "`session_ended`" },
  });
  app.post("/:id/trigger-subscriptions", subscribeDoc, async (c) => {
    const body = await readJson(c, SubscriptionBody);
    const s = await triggers.subscribe(principal(c).userId, c.req.param("id"), body);
    return c.json({ ok: true, ...s } satisfies SubscriptionResponse);
  });

  // `{target}` is a subscriptionId (preferred, also as ?subscriptionId=) or a trigger type.
  const target = (
    c: { req: { param: (k: string) => string; query: (k: string) => string | undefined } },
  ) => c.req.query("subscriptionId") || c.req.param("target");

  const subscriptionTarget = [{
    name: "subscriptionId",
    description: "The subscription, instead of `{target}` (the path may then end without it)",
    schema: { type: "string" },
  }];
  const changeSubscriptionDoc = routeDoc({
    tag: "Triggers",
    summary: "Change a subscription's params, filters or filter mode",
    description: `A field present replaces the old value; \`null\` resets it. ${TARGET}`,
    auth: "principal",
    body: SubscriptionPatch,
    query: subscriptionTarget,
    ok: "`{ok: true, ...subscription}`",
    errors: {
      400: `\`bad_request\`: no target; ${CATALOG_ERRORS}`,
      404: "`not_found`: no such session or subscription",
    },
  });
  app.put("/:id/trigger-subscriptions/:target?", changeSubscriptionDoc, async (c) => {
    const body = await readJson(c, SubscriptionPatch);
    const t = target(c);
    if (!t) throw invalid("Name the subscription (id or trigger type)");
    const s = await triggers.updateSubscription(principal(c).userId, c.req.param("id"), t, body);
    return c.json({ ok: true, ...s } satisfies SubscriptionResponse);
  });

  const unsubscribeDoc = routeDoc({
    tag: "Triggers",
    summary: "Remove a subscription",
    description: TARGET,
    auth: "principal",
    query: subscriptionTarget,
    ok: "`{ok: true, ...subscription, removed}`: the first one removed, and how many were",
    errors: {
      400: "`bad_request`: no target",
      404: "`not_found`: no such session or subscription",
    },
  });
  app.delete("/:id/trigger-subscriptions/:target?", unsubscribeDoc, async (c) => {
    const t = target(c);
    if (!t) throw invalid("Name the subscription (id or trigger type)");
    const s = await triggers.unsubscribe(principal(c).userId, c.req.param("id"), t);
    return c.json({ ok: true, ...s } satisfies UnsubscribeResponse);
  });

  return app;
}

/** `/api/runners/{id}/...`: the runner's triggers, listeners and broadcasts. */
export function runnerTriggerRoutes(triggers: TriggerListeners): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  const catalogDoc = routeDoc({
    tag: "Triggers",
    summary: "A runner's trigger catalog (without payload schemas) and its listeners",
    auth: "principal",
    ok: "`{triggerDefs: [{type, label, description, params}], listeners: [...]}`",
    errors: RUNNER_NOT_FOUND,
  });
  app.get("/:runnerId/triggers", catalogDoc, async (c) => {
    const res = await triggers.runnerTriggers(principal(c).userId, c.req.param("runnerId"));
    return c.json(res satisfies RunnerTriggersResponse);
  });

  const listenersDoc = routeDoc({
    tag: "Triggers",
    summary: "A runner's listeners",
    auth: "principal",
    ok: "`{listeners: [...]}`, oldest first",
    errors: RUNNER_NOT_FOUND,
  });
  app.get("/:runnerId/trigger-listeners", listenersDoc, async (c) => {
    return c.json(
      {
        listeners: await triggers.listeners(principal(c).userId, c.req.param("runnerId")),
      } satisfies ListenerListResponse,
    );
  });

  const addListenerDoc = routeDoc({
    tag: "Triggers",
    summary: "Add a listener: a new session on the runner for each matching broadcast",
    auth: "principal",
    body: ListenerBody,
    ok: "`{ok: true, ...listener}`",
    errors: { 400: CATALOG_ERRORS, ...RUNNER_NOT_FOUND },
  });
  app.post("/:runnerId/trigger-listeners", addListenerDoc, async (c) => {
    const body = await readJson(c, ListenerBody);
    const l = await triggers.addListener(principal(c).userId, c.req.param("runnerId"), body);
    return c.json({ ok: true, ...l } satisfies ListenerResponse);
  });

  const changeListenerDoc = routeDoc({
    tag: "Triggers",
    summary: "Change a listener",
    description: `A field present replaces the old value; \`null\` resets it. ${TARGET}`,
    auth: "principal",
    body: ListenerPatch,
    ok: "`{ok: true, ...listener}`",
    errors: { 400: CATALOG_ERRORS, 404: "`not_found`: no such runner or listener" },
  });
  app.put("/:runnerId/trigger-listeners/:target", changeListenerDoc, async (c) => {
    const body = await readJson(c, ListenerPatch);
    const l = await triggers.updateListener(
      principal(c).userId,
      c.req.param("runnerId"),
      c.req.param("target"),
      body,
    );
    return c.json({ ok: true, ...l } satisfies ListenerResponse);
  });

  const removeListenerDoc = routeDoc({
    tag: "Triggers",
    summary: "Remove a listener",
    description: TARGET,
    auth: "principal",
    ok: "`{ok: true, listenerId, triggerType, removed}`",
    errors: { 404: "`not_found`: no such runner or listener" },
  });
  app.delete("/:runnerId/trigger-listeners/:target", removeListenerDoc, async (c) => {
    const r = await triggers.removeListener(
      principal(c).userId,
      c.req.param("runnerId"),
      c.req.param("target"),
    );
    return c.json({ ok: true, ...r } satisfies RemoveListenerResponse);
  });

  // Services fire triggers with the runner's key: a browser cookie is not enough.
  const broadcastDoc = routeDoc({
    tag: "Triggers",
    summary: "Broadcast a trigger on a runner, as a service would",
    description: "Delivered to the caller's running sessions subscribed to it whose params and " +
      "filters match, and a session spawned for each matching listener (not awaited).",
    auth: "key",
    body: BroadcastBody,
    ok: "`{ok: true, triggerId, delivered, spawned}`",
    errors: {
      400: "`unknown_trigger_type`",
      403: "`key_required`: sent with a browser cookie",
      ...RUNNER_NOT_FOUND,
      503: "`runner_offline`: nothing is delivered or started",
    },
  });
  app.post("/:runnerId/trigger-broadcast", broadcastDoc, async (c) => {
    if (principal(c).via !== "key") {
      throw new HttpError(403, "key_required", "Broadcasts need an API key (x-api-key)");
    }
    const body = await readJson(c, BroadcastBody);
    const r = await triggers.broadcast(principal(c).userId, c.req.param("runnerId"), body);
    return c.json({ ok: true, ...r } satisfies BroadcastResponse);
  });

  return app;
}
