import { Hono, type MiddlewareHandler } from "hono";
import { z } from "zod";
import {
  MAX_PUSH_SUBSCRIPTIONS_PER_USER,
  type PushChildNotificationsRequest,
  type PushEventsRequest,
  type PushOkResponse,
  type PushSubscribeRequest,
  type PushSubscribeResponse,
  type PushSubscriptionsResponse,
  type PushUnsubscribeRequest,
  type VapidPublicKeyResponse,
} from "../../shared/push_api.ts";
import { HttpError, principal, readJson, type RelayEnv } from "../_http.ts";
import { conflict, invalid, notFound } from "../errors.ts";
import { parseEnabledEvents } from "../push_kinds.ts";
import { endpointProblem, MAX_ENDPOINT_LENGTH } from "../push_endpoint.ts";
import type { AsyncStore, PushSubscriptionRecord } from "../store/mod.ts";
import { requestSchema, routeDoc } from "./_openapi.ts";

const Endpoint = z.string().min(1).max(MAX_ENDPOINT_LENGTH);
const EnabledEvents = z.string().max(200);
/** base64url of exactly `n` bytes (padding allowed, as some browsers send it). */
const key = (n: number, what: string) =>
  z.string().max(200).refine(
    (s) => base64UrlBytes(s) === n,
    `expected base64url of ${n} bytes (${what})`,
  );

const Subscribe = requestSchema<PushSubscribeRequest>()(z.object({
  endpoint: Endpoint,
  keys: z.object({
    p256dh: key(65, "an uncompressed P-256 public key"),
    auth: key(16, "the auth secret"),
  }),
  enabledEvents: EnabledEvents.optional(),
}));
const Unsubscribe = requestSchema<PushUnsubscribeRequest>()(z.object({ endpoint: Endpoint }));
const Events = requestSchema<PushEventsRequest>()(z.object({
  endpoint: Endpoint,
  enabledEvents: EnabledEvents,
}));
const Children = requestSchema<PushChildNotificationsRequest>()(z.object({
  endpoint: Endpoint,
  suppress: z.boolean(),
}));

function base64UrlBytes(s: string): number {
  const t = s.replace(/=+$/, "");
  if (!/^[A-Za-z0-9_-]*$/.test(t) || t.length % 4 === 1) return -1;
  return Math.floor(t.length * 3 / 4);
}

function enabledEvents(text: string | undefined): string {
  const parsed = parseEnabledEvents(text ?? "*");
  if (parsed instanceof Error) throw invalid(parsed.message, "invalid_body");
  return parsed;
}

/** Push routes are a browser's own: the session cookie, not an API key (spec: Push notifications). */
const cookieOnly: MiddlewareHandler<RelayEnv> = async (c, next) => {
  if (principal(c).via !== "cookie") {
    throw new HttpError(
      403,
      "cookie_required",
      "Push subscriptions need a browser session, not an API key",
    );
  }
  await next();
};

/** `GET /api/push/vapid-public-key`: public (a page asks before its user subscribes). */
export function pushKeyRoute(publicKey: string): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const doc = routeDoc({
    tag: "Push",
    summary: "The relay's VAPID public key (the browser's applicationServerKey)",
    auth: "none",
    ok: "`{publicKey}`: base64url of an uncompressed P-256 point (65 bytes)",
  });
  app.get("/vapid-public-key", doc, (c) => c.json({ publicKey } satisfies VapidPublicKeyResponse));
  return app;
}

/** `/api/push`: the caller's push subscriptions. */
export function pushRoutes(
  store: AsyncStore,
  allowedOrigins: ReadonlySet<string>,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  app.use("*", cookieOnly);
  const NOT_FOUND = "`not_found`: the caller has no subscription with this endpoint";
  /** The caller's subscription of `endpoint` (another account's answers as a missing one). */
  const own = async (userId: string, endpoint: string): Promise<PushSubscriptionRecord> => {
    const s = await store.push.byEndpoint(endpoint);
    if (!s || s.userId !== userId) throw notFound("Push subscription");
    return s;
  };

  const subscribeDoc = routeDoc({
    tag: "Push",
    summary: "Subscribe this browser (its PushSubscription) to notifications",
    description: "The same endpoint subscribed again updates its keys (and `enabledEvents`, " +
      "when given). The endpoint must be https and not name a private or loopback address.",
    auth: "cookie",
    body: Subscribe,
    ok: "`{ok: true, id}`",
    errors: {
      400:
        "`invalid_endpoint` (not https, a private address, ...), `invalid_body` (an unknown kind)",
      409: "`endpoint_taken`: another account holds this endpoint with other keys; " +
        `\`too_many_subscriptions\`: ${MAX_PUSH_SUBSCRIPTIONS_PER_USER} already`,
    },
  });
  app.post("/subscribe", subscribeDoc, async (c) => {
    const body = await readJson(c, Subscribe);
    const { userId } = principal(c);
    const problem = endpointProblem(body.endpoint, allowedOrigins);
    if (problem) throw invalid(`Invalid push endpoint: ${problem}`, "invalid_endpoint");
    const events = body.enabledEvents === undefined ? undefined : enabledEvents(body.enabledEvents);
    // The browser that holds the endpoint signed in to another account: it moves.
    // Someone who only learned the endpoint cannot take it (they lack its keys).
    const saved = await store.push.subscribe({
      id: crypto.randomUUID(),
      userId,
      endpoint: body.endpoint,
      p256dh: body.keys.p256dh,
      auth: body.keys.auth,
      ...(events !== undefined ? { enabledEvents: events } : {}),
      createdAt: new Date().toISOString(),
    }, MAX_PUSH_SUBSCRIPTIONS_PER_USER);
    if (!saved.ok && saved.reason === "taken") {
      throw conflict("endpoint_taken", "This push endpoint belongs to another subscription");
    }
    if (!saved.ok) {
      throw conflict(
        "too_many_subscriptions",
        `At most ${MAX_PUSH_SUBSCRIPTIONS_PER_USER} push subscriptions per account; remove one first`,
      );
    }
    return c.json({ ok: true, id: saved.id } satisfies PushSubscribeResponse);
  });

  const unsubscribeDoc = routeDoc({
    tag: "Push",
    summary: "Unsubscribe an endpoint of the caller",
    description: "Answers `{ok: true}` also when the caller has no such subscription " +
      "(already removed, or another account's, which is left alone).",
    auth: "cookie",
    body: Unsubscribe,
    ok: "`{ok: true}`",
  });
  app.post("/unsubscribe", unsubscribeDoc, async (c) => {
    const { endpoint } = await readJson(c, Unsubscribe);
    await store.push.deleteOf(principal(c).userId, endpoint);
    return c.json({ ok: true } satisfies PushOkResponse);
  });

  const listDoc = routeDoc({
    tag: "Push",
    summary: "The caller's push subscriptions (oldest first; their keys stay on the relay)",
    auth: "cookie",
    ok: "`{subscriptions: [{id, endpoint, createdAt, enabledEvents, suppressChildNotifications}]}`",
  });
  app.get("/subscriptions", listDoc, async (c) => {
    const subscriptions = (await store.push.listOf(principal(c).userId)).map((s) => ({
      id: s.id,
      endpoint: s.endpoint,
      createdAt: s.createdAt,
      enabledEvents: s.enabledEvents,
      suppressChildNotifications: s.suppressChildNotifications,
    }));
    return c.json({ subscriptions } satisfies PushSubscriptionsResponse);
  });

  const eventsDoc = routeDoc({
    tag: "Push",
    summary: "Choose the kinds a subscription receives",
    description: "`enabledEvents`: comma-separated kinds (`agent_finished`, " +
      "`agent_needs_input`, `agent_error`) or `*` for all.",
    auth: "cookie",
    body: Events,
    ok: "`{ok: true}`",
    errors: { 404: NOT_FOUND },
  });
  app.put("/events", eventsDoc, async (c) => {
    const body = await readJson(c, Events);
    const events = enabledEvents(body.enabledEvents);
    const s = await own(principal(c).userId, body.endpoint);
    await store.push.save({ ...s, enabledEvents: events });
    return c.json({ ok: true } satisfies PushOkResponse);
  });

  const childDoc = routeDoc({
    tag: "Push",
    summary: "Skip (or not) notifications of linked child sessions; the parent's still come",
    auth: "cookie",
    body: Children,
    ok: "`{ok: true}`",
    errors: { 404: NOT_FOUND },
  });
  app.put("/child-notifications", childDoc, async (c) => {
    const body = await readJson(c, Children);
    const s = await own(principal(c).userId, body.endpoint);
    await store.push.save({ ...s, suppressChildNotifications: body.suppress });
    return c.json({ ok: true } satisfies PushOkResponse);
  });

  return app;
}
