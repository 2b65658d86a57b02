/**
 * Triggers on the relay: the runner catalogs, per-session triggers and
 * history, and subscriptions (listeners and broadcasts are in
 * `trigger_listeners.ts`). Params are checked here against the catalog;
 * filters are evaluated at delivery, before anything reaches an agent.
 *
 * @module
 */
import type {
  SendTriggerRequest,
  SubscribeRequest,
  SubscriptionPatchRequest,
  TriggerParams,
} from "../shared/api.ts";
import type { DeliveredTrigger, ModelRef } from "../shared/protocol.ts";
import {
  invalidParams,
  invalidTriggerDef,
  normalizeTriggerDef,
  type TriggerDef,
} from "../shared/triggers.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import { invalid, notFound } from "./errors.ts";
import type { SessionControl } from "./session_service.ts";
import { assertNotEnded } from "./session_state.ts";
import type { AsyncStore, HistoryEntry, SessionRecord, SubscriptionRecord } from "./store/mod.ts";

/** History entries of a session expire after this long without a new one. */
export const HISTORY_IDLE_MS = 24 * 60 * 60_000;
/** How often idle histories are dropped (ms). */
const EXPIRE_EVERY_MS = 60 * 60_000;
/** Most triggers a runner may declare. */
const MAX_DEFS = 500;

/** Params of a subscription or listener, as checked against the trigger's definition. */
export type { TriggerParams };

/** A trigger sent into one session: the checked body of `POST /api/sessions/{id}/trigger`. */
export type TriggerInput = SendTriggerRequest;

/** A new subscription of a session to a trigger type (the checked request body). */
export type SubscriptionInput = SubscribeRequest;

/** Changes to subscriptions (`null` resets a field). */
export type SubscriptionChange = SubscriptionPatchRequest;

/** An agent's answer to a trigger it received. */
export interface TriggerResponse {
  triggerId: string;
  action?: string;
  text?: string;
}

/** Options of {@linkcode Triggers}. */
export interface TriggersOptions {
  store: AsyncStore;
  /** Delivers triggers into sessions and spawns sessions that start with one. */
  sessions: Pick<SessionControl, "deliverTrigger" | "spawn">;
  clock?: Clock;
}

/**
 * The records a route's `target` names: the one with that id (preferred) or,
 * legacy, every one of that trigger type.
 */
export function named<T extends { triggerType: string }>(
  all: T[],
  id: (r: T) => string,
  target: string,
): T[] {
  const byId = all.filter((r) => id(r) === target);
  return byId.length > 0 ? byId : all.filter((r) => r.triggerType === target);
}

/** A subscription as the API shows it. */
function subscriptionView(s: SubscriptionRecord) {
  return {
    subscriptionId: s.subscriptionId,
    triggerType: s.triggerType,
    runnerId: s.runnerId,
    params: s.params,
    filters: s.filters,
    filterMode: s.filterMode,
    createdAt: s.createdAt,
  };
}

/** Session triggers, histories and subscriptions, for the HTTP routes and the agents' tools alike. */
export class Triggers {
  readonly store: AsyncStore;
  readonly #opts: TriggersOptions;
  readonly #clock: Clock;
  #timer: number | null = null;

  constructor(options: TriggersOptions) {
    this.#opts = options;
    this.store = options.store;
    this.#clock = options.clock ?? systemClock;
  }

  /** Starts dropping idle histories every hour. */
  start(): void {
    // A sweep that failed (the store out of reach) is done by the next one.
    this.#timer ??= this.#clock.setInterval(
      () => void this.expire().catch(() => {}),
      EXPIRE_EVERY_MS,
    );
  }

  close(): void {
    if (this.#timer !== null) this.#clock.clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Drops idle histories (and old webhook delivery ids). */
  async expire(now = this.#clock.now()): Promise<void> {
    await this.store.triggers.expireHistory(new Date(now - HISTORY_IDLE_MS).toISOString());
    await this.store.webhooks.pruneDeliveries(now - HISTORY_IDLE_MS);
  }

  // Catalog ------------------------------------------------------------------

  /** Stores what a runner announced; invalid definitions are dropped (and named). */
  async announce(runnerId: string, defs: unknown): Promise<string[]> {
    const problems: string[] = [];
    const valid: TriggerDef[] = [];
    const seen = new Set<string>();
    for (const d of Array.isArray(defs) ? defs.slice(0, MAX_DEFS) : []) {
      const bad = invalidTriggerDef(d);
      if (bad) {
        problems.push(bad);
        continue;
      }
      const def = normalizeTriggerDef(d as TriggerDef);
      if (seen.has(def.type)) continue;
      seen.add(def.type);
      valid.push(def);
    }
    await this.store.runners.setTriggerDefs(runnerId, valid);
    return problems;
  }

  catalog(runnerId: string): Promise<TriggerDef[]> {
    return this.store.runners.triggerDefs(runnerId);
  }

  /** The runner's definition of a trigger type; 400 `unknown_trigger_type` without one. */
  async definition(runnerId: string, type: string): Promise<TriggerDef> {
    const def = (await this.catalog(runnerId)).find((d) => d.type === type);
    if (!def) {
      throw invalid(
        `Trigger type is not available on this runner: '${type}'`,
        "unknown_trigger_type",
      );
    }
    return def;
  }

  async #session(userId: string, sessionId: string): Promise<SessionRecord> {
    const s = await this.store.sessions.getOwned(userId, sessionId);
    if (!s) throw notFound("Session");
    return s;
  }

  // Session triggers and history --------------------------------------------

  /** Delivers a trigger into a session and records it in the session's history. */
  async trigger(
    userId: string,
    sessionId: string,
    body: TriggerInput,
  ): Promise<{ triggerId: string }> {
    const s = await this.#session(userId, sessionId);
    const trigger: DeliveredTrigger = {
      triggerId: crypto.randomUUID(),
      type: body.type,
      source: body.source ?? "api",
      ...(body.summary ? { summary: body.summary } : {}),
      payload: body.payload,
      deliverAs: body.deliverAs ?? "steer",
      expectsResponse: body.expectsResponse ?? false,
    };
    await this.deliver(s, trigger);
    return { triggerId: trigger.triggerId };
  }

  /**
   * Records `trigger` in the session's history, then delivers it; a failed
   * delivery takes the entry back out. Recorded first because the agent may
   * answer it (respond_to_trigger) before the runner's acknowledgement is back.
   */
  async deliver(s: SessionRecord, trigger: DeliveredTrigger): Promise<void> {
    assertNotEnded(s); // before writing: an entry in a full history pushes the oldest out
    await this.#record(s.sessionId, trigger);
    try {
      await this.#opts.sessions.deliverTrigger(s, trigger);
    } catch (err) {
      await this.store.triggers.removeInbound(s.sessionId, trigger.triggerId);
      throw err;
    }
  }

  /** Appends an inbound entry. */
  async #record(sessionId: string, t: DeliveredTrigger): Promise<void> {
    await this.#expireIfIdle(sessionId);
    await this.store.triggers.addHistory(sessionId, {
      triggerId: t.triggerId,
      type: t.type,
      source: t.source,
      ...(t.summary ? { summary: t.summary } : {}),
      payload: t.payload,
      deliverAs: t.deliverAs,
      ts: isoNow(this.#clock),
      direction: "inbound",
      expectsResponse: t.expectsResponse,
    });
  }

  async #expireIfIdle(sessionId: string): Promise<void> {
    const last = await this.store.triggers.lastActivity(sessionId);
    if (last && Date.parse(last) < this.#clock.now() - HISTORY_IDLE_MS) {
      await this.store.triggers.clearHistory(sessionId);
    }
  }

  async history(userId: string, sessionId: string, limit: number): Promise<HistoryEntry[]> {
    await this.#session(userId, sessionId);
    await this.#expireIfIdle(sessionId);
    return await this.store.triggers.history(sessionId, limit);
  }

  async clearHistory(userId: string, sessionId: string): Promise<void> {
    await this.#session(userId, sessionId);
    await this.store.triggers.clearHistory(sessionId);
  }

  /** An agent's answer to a trigger: on the inbound entry, and as an outbound entry. */
  async respond(s: SessionRecord, body: TriggerResponse): Promise<void> {
    const ts = isoNow(this.#clock);
    const response = {
      ...(body.action !== undefined ? { action: body.action } : {}),
      ...(body.text !== undefined ? { text: body.text } : {}),
      ts,
    };
    const original = (await this.store.triggers.history(s.sessionId, 200))
      .find((e) => e.triggerId === body.triggerId && e.direction === "inbound");
    if (!original) throw notFound("Trigger");
    await this.store.triggers.respond(s.sessionId, body.triggerId, response, {
      triggerId: crypto.randomUUID(),
      type: original.type,
      source: "session",
      summary: `Response to ${original.summary ?? original.type}`,
      payload: { inReplyTo: body.triggerId, ...response },
      deliverAs: original.deliverAs,
      ts,
      direction: "outbound",
      expectsResponse: false,
    });
  }

  async available(userId: string, sessionId: string): Promise<TriggerDef[]> {
    return await this.catalog((await this.#session(userId, sessionId)).runnerId);
  }

  // Subscriptions ----------------------------------------------------------

  async subscriptions(userId: string, sessionId: string) {
    await this.#session(userId, sessionId);
    return (await this.store.triggers.subscriptionsOf(sessionId)).map(subscriptionView);
  }

  async subscribe(userId: string, sessionId: string, body: SubscriptionInput) {
    const s = await this.#session(userId, sessionId);
    assertNotEnded(s);
    const def = await this.definition(s.runnerId, body.triggerType);
    const params = body.params ?? {};
    const bad = invalidParams(def, params);
    if (bad) throw invalid(bad, "invalid_params");
    const rec: SubscriptionRecord = {
      subscriptionId: crypto.randomUUID(),
      sessionId,
      userId,
      runnerId: s.runnerId,
      triggerType: body.triggerType,
      params,
      filters: body.filters ?? [],
      filterMode: body.filterMode ?? "and",
      createdAt: isoNow(this.#clock),
    };
    await this.store.triggers.saveSubscription(rec);
    return subscriptionView(rec);
  }

  /** Subscriptions of a session that `target` names. */
  async #targets(sessionId: string, target: string): Promise<SubscriptionRecord[]> {
    const all = await this.store.triggers.subscriptionsOf(sessionId);
    return named(all, (r) => r.subscriptionId, target);
  }

  async updateSubscription(
    userId: string,
    sessionId: string,
    target: string,
    patch: SubscriptionChange,
  ) {
    const s = await this.#session(userId, sessionId);
    const subs = await this.#targets(sessionId, target);
    if (subs.length === 0) throw notFound("Subscription");
    for (const sub of subs) {
      if (patch.params !== undefined) {
        const params = patch.params ?? {};
        const bad = invalidParams(await this.definition(s.runnerId, sub.triggerType), params);
        if (bad) throw invalid(bad, "invalid_params");
        sub.params = params;
      }
      if (patch.filters !== undefined) sub.filters = patch.filters ?? [];
      if (patch.filterMode !== undefined) sub.filterMode = patch.filterMode ?? "and";
    }
    await this.store.triggers.saveSubscriptions(subs);
    return subscriptionView(subs[0]!);
  }

  async unsubscribe(userId: string, sessionId: string, target: string) {
    await this.#session(userId, sessionId);
    const subs = await this.#targets(sessionId, target);
    if (subs.length === 0) throw notFound("Subscription");
    const removed = await this.store.triggers.deleteSubscriptions(
      sessionId,
      subs.map((s) => s.subscriptionId),
    );
    return { ...subscriptionView(subs[0]!), removed };
  }

  /** Spawns a session that starts with `trigger`, recorded in its history (taken out if the spawn fails). */
  async spawnWithTrigger(
    userId: string,
    runnerId: string,
    how: { prompt?: string | null; cwd?: string | null; model?: ModelRef | null },
    trigger: DeliveredTrigger,
  ): Promise<string> {
    // Recorded before the runner starts the agent, which may answer the trigger at once.
    let created: string | null = null;
    try {
      const { sessionId } = await this.#opts.sessions.spawn(userId, {
        runnerId,
        prompt: "",
        cwd: how.cwd ?? null,
        model: how.model ?? null,
        trigger,
        ...(how.prompt ? { instruction: how.prompt } : {}),
        beforeStart: async (id) => {
          created = id;
          await this.#record(id, trigger);
        },
      });
      return sessionId;
    } catch (err) {
      if (created) await this.store.triggers.removeInbound(created, trigger.triggerId);
      throw err;
    }
  }
}
