/**
 * Triggers on the relay: the runner catalogs, per-session triggers and
 * history, subscriptions, runner listeners and broadcasts. Filters and params
 * are evaluated here, at delivery, before anything reaches an agent.
 *
 * @module
 */
import type { DeliveredTrigger, ModelRef } from "../shared/protocol.ts";
import {
  type FilterMode,
  filtersMatch,
  invalidParams,
  invalidTriggerDef,
  normalizeTriggerDef,
  paramsMatch,
  type TriggerDef,
  type TriggerFilter,
} from "../shared/triggers.ts";
import { invalid, notFound, offline, sessionEnded } from "./errors.ts";
import type { Hub } from "./hub.ts";
import type {
  HistoryEntry,
  ListenerRecord,
  SessionRecord,
  Store,
  SubscriptionRecord,
} from "./store/mod.ts";

/** History entries of a session expire after this long without a new one. */
export const HISTORY_IDLE_MS = 24 * 60 * 60_000;
/** Most triggers a runner may declare. */
const MAX_DEFS = 500;

/** Params of a subscription or listener, as checked against the trigger's definition. */
export type TriggerParams = Record<string, string | number | boolean>;

/** A trigger sent into one session (`POST /api/sessions/{id}/trigger`). */
export interface TriggerInput {
  type: string;
  payload: Record<string, unknown>;
  deliverAs?: "steer" | "followUp";
  expectsResponse?: boolean;
  source?: string;
  summary?: string;
}

/** A trigger fanned out to a runner's subscribers and listeners. */
export type BroadcastInput = Omit<TriggerInput, "expectsResponse">;

/** A new subscription of a session to a trigger type. */
export interface SubscriptionInput {
  triggerType: string;
  params?: TriggerParams;
  filters?: TriggerFilter[];
  filterMode?: FilterMode;
}

/** Changes to subscriptions (`null` resets a field). */
export interface SubscriptionChange {
  params?: TriggerParams | null;
  filters?: TriggerFilter[] | null;
  filterMode?: FilterMode | null;
}

/** A new listener: what a session it spawns starts with. */
export interface ListenerInput {
  triggerType: string;
  prompt?: string;
  cwd?: string | null;
  model?: ModelRef | null;
  params?: TriggerParams;
}

/** Changes to listeners (`null` resets a field). */
export interface ListenerChange {
  triggerType?: string;
  prompt?: string | null;
  cwd?: string | null;
  model?: ModelRef | null;
  params?: TriggerParams | null;
}

/** An agent's answer to a trigger it received. */
export interface TriggerResponse {
  triggerId: string;
  action?: string;
  text?: string;
}

/**
 * The records a route's `target` names: the one with that id (preferred) or,
 * legacy, every one of that trigger type.
 */
function named<T extends { triggerType: string }>(
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

/** A listener as the API shows it. */
function listenerView(l: ListenerRecord) {
  return {
    listenerId: l.listenerId,
    triggerType: l.triggerType,
    prompt: l.prompt,
    cwd: l.cwd,
    model: l.model,
    params: l.params,
    createdAt: l.createdAt,
    updatedAt: l.updatedAt,
  };
}

/** Everything about triggers, for the HTTP routes and the agents' tools alike. */
export class Triggers {
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(readonly hub: Hub, readonly store: Store) {
    this.#timer = setInterval(() => this.expire(), 60 * 60_000);
  }

  close(): void {
    clearInterval(this.#timer);
  }

  /** Drops idle histories (and old webhook delivery ids). */
  expire(now = Date.now()): void {
    this.store.triggers.expireHistory(new Date(now - HISTORY_IDLE_MS).toISOString());
    this.store.webhooks.pruneDeliveries(now - HISTORY_IDLE_MS);
  }

  // Catalog ------------------------------------------------------------------

  /** Stores what a runner announced; invalid definitions are dropped (and named). */
  announce(runnerId: string, defs: unknown): string[] {
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
    this.store.runners.setTriggerDefs(runnerId, valid);
    return problems;
  }

  catalog(runnerId: string): TriggerDef[] {
    return this.store.runners.triggerDefs(runnerId);
  }

  #def(runnerId: string, type: string): TriggerDef {
    const def = this.catalog(runnerId).find((d) => d.type === type);
    if (!def) {
      throw invalid(
        `Trigger type is not available on this runner: '${type}'`,
        "unknown_trigger_type",
      );
    }
    return def;
  }

  #session(userId: string, sessionId: string): SessionRecord {
    const s = this.store.sessions.getOwned(userId, sessionId);
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
    const s = this.#session(userId, sessionId);
    const trigger: DeliveredTrigger = {
      triggerId: crypto.randomUUID(),
      type: body.type,
      source: body.source ?? "api",
      ...(body.summary ? { summary: body.summary } : {}),
      payload: body.payload,
      deliverAs: body.deliverAs ?? "steer",
      expectsResponse: body.expectsResponse ?? false,
    };
    await this.hub.deliverTrigger(s, trigger);
    this.record(sessionId, trigger);
    return { triggerId: trigger.triggerId };
  }

  /** Appends an inbound entry (after a successful delivery). */
  record(sessionId: string, t: DeliveredTrigger): void {
    this.#expireIfIdle(sessionId);
    this.store.triggers.addHistory(sessionId, {
      triggerId: t.triggerId,
      type: t.type,
      source: t.source,
      ...(t.summary ? { summary: t.summary } : {}),
      payload: t.payload,
      deliverAs: t.deliverAs,
      ts: new Date().toISOString(),
      direction: "inbound",
      expectsResponse: t.expectsResponse,
    });
  }

  #expireIfIdle(sessionId: string): void {
    const last = this.store.triggers.lastActivity(sessionId);
    if (last && Date.parse(last) < Date.now() - HISTORY_IDLE_MS) {
      this.store.triggers.clearHistory(sessionId);
    }
  }

  history(userId: string, sessionId: string, limit: number): HistoryEntry[] {
    this.#session(userId, sessionId);
    this.#expireIfIdle(sessionId);
    return this.store.triggers.history(sessionId, limit);
  }

  clearHistory(userId: string, sessionId: string): void {
    this.#session(userId, sessionId);
    this.store.triggers.clearHistory(sessionId);
  }

  /** An agent's answer to a trigger: on the inbound entry, and as an outbound entry. */
  respond(s: SessionRecord, body: TriggerResponse): void {
    const ts = new Date().toISOString();
    const response = {
      ...(body.action !== undefined ? { action: body.action } : {}),
      ...(body.text !== undefined ? { text: body.text } : {}),
      ts,
    };
    const original = this.store.triggers.history(s.sessionId, 200)
      .find((e) => e.triggerId === body.triggerId && e.direction === "inbound");
    if (!original) throw notFound("Trigger");
    this.store.tx(() => {
      this.store.triggers.setResponse(s.sessionId, body.triggerId, response);
      this.store.triggers.addHistory(s.sessionId, {
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
    });
  }

  available(userId: string, sessionId: string): TriggerDef[] {
    return this.catalog(this.#session(userId, sessionId).runnerId);
  }

  // Subscriptions ----------------------------------------------------------

  subscriptions(userId: string, sessionId: string) {
    this.#session(userId, sessionId);
    return this.store.triggers.subscriptionsOf(sessionId).map(subscriptionView);
  }

  subscribe(userId: string, sessionId: string, body: SubscriptionInput) {
    const s = this.#session(userId, sessionId);
    if (s.status === "ended" || s.status === "error") throw sessionEnded();
    const def = this.#def(s.runnerId, body.triggerType);
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
      createdAt: new Date().toISOString(),
    };
    this.store.triggers.saveSubscription(rec);
    return subscriptionView(rec);
  }

  /** Subscriptions of a session that `target` names. */
  #targets(sessionId: string, target: string): SubscriptionRecord[] {
    return named(this.store.triggers.subscriptionsOf(sessionId), (r) => r.subscriptionId, target);
  }

  updateSubscription(
    userId: string,
    sessionId: string,
    target: string,
    patch: SubscriptionChange,
  ) {
    const s = this.#session(userId, sessionId);
    const subs = this.#targets(sessionId, target);
    if (subs.length === 0) throw notFound("Subscription");
    for (const sub of subs) {
      if (patch.params !== undefined) {
        const params = patch.params ?? {};
        const bad = invalidParams(this.#def(s.runnerId, sub.triggerType), params);
        if (bad) throw invalid(bad, "invalid_params");
        sub.params = params;
      }
      if (patch.filters !== undefined) sub.filters = patch.filters ?? [];
      if (patch.filterMode !== undefined) sub.filterMode = patch.filterMode ?? "and";
    }
    this.store.tx(() => subs.forEach((sub) => this.store.triggers.saveSubscription(sub)));
    return subscriptionView(subs[0]!);
  }

  unsubscribe(userId: string, sessionId: string, target: string) {
    this.#session(userId, sessionId);
    const subs = this.#targets(sessionId, target);
    if (subs.length === 0) throw notFound("Subscription");
    const removed = this.store.triggers.deleteSubscriptions(
      sessionId,
      subs.map((s) => s.subscriptionId),
    );
    return { ...subscriptionView(subs[0]!), removed };
  }

  // Listeners ----------------------------------------------------------------

  #runner(userId: string, runnerId: string): void {
    if (!this.store.runners.getOwned(userId, runnerId)) throw notFound("Runner");
  }

  /**
   * A runner's catalog and listeners. The payload schemas are left out: this
   * view serves the listener form, which needs only the params; a session's
   * `available-triggers` carries them for the agent.
   */
  runnerTriggers(userId: string, runnerId: string) {
    this.#runner(userId, runnerId);
    return {
      triggerDefs: this.catalog(runnerId).map((d) => ({
        type: d.type,
        label: d.label,
        description: d.description ?? "",
        params: d.params,
      })),
      listeners: this.store.triggers.listenersOf(runnerId).map(listenerView),
    };
  }

  listeners(userId: string, runnerId: string) {
    this.#runner(userId, runnerId);
    return this.store.triggers.listenersOf(runnerId).map(listenerView);
  }

  addListener(userId: string, runnerId: string, body: ListenerInput) {
    this.#runner(userId, runnerId);
    const def = this.#def(runnerId, body.triggerType);
    const params = body.params ?? {};
    const bad = invalidParams(def, params);
    if (bad) throw invalid(bad, "invalid_params");
    const now = new Date().toISOString();
    const rec: ListenerRecord = {
      listenerId: crypto.randomUUID(),
      userId,
      runnerId,
      triggerType: body.triggerType,
      prompt: body.prompt ?? "",
      cwd: body.cwd?.trim() ? body.cwd : null,
      model: body.model ?? null,
      params,
      createdAt: now,
      updatedAt: now,
    };
    this.store.triggers.saveListener(rec);
    return listenerView(rec);
  }

  /** Listeners of a runner that `target` names. */
  #listenerTargets(runnerId: string, target: string): ListenerRecord[] {
    return named(this.store.triggers.listenersOf(runnerId), (r) => r.listenerId, target);
  }

  updateListener(
    userId: string,
    runnerId: string,
    target: string,
    patch: ListenerChange,
  ) {
    this.#runner(userId, runnerId);
    const list = this.#listenerTargets(runnerId, target);
    if (list.length === 0) throw notFound("Listener");
    const now = new Date().toISOString();
    for (const l of list) {
      if (patch.triggerType !== undefined) l.triggerType = patch.triggerType;
      if (patch.prompt !== undefined) l.prompt = patch.prompt ?? "";
      if (patch.cwd !== undefined) l.cwd = patch.cwd?.trim() ? patch.cwd : null;
      if (patch.model !== undefined) l.model = patch.model ?? null;
      if (patch.params !== undefined) l.params = patch.params ?? {};
      const bad = invalidParams(this.#def(runnerId, l.triggerType), l.params);
      if (bad) throw invalid(bad, "invalid_params");
      l.updatedAt = now;
    }
    this.store.tx(() => list.forEach((l) => this.store.triggers.saveListener(l)));
    return listenerView(list[0]!);
  }

  removeListener(userId: string, runnerId: string, target: string) {
    this.#runner(userId, runnerId);
    const list = this.#listenerTargets(runnerId, target);
    if (list.length === 0) throw notFound("Listener");
    const removed = this.store.triggers.deleteListeners(runnerId, list.map((l) => l.listenerId));
    return { listenerId: list[0]!.listenerId, triggerType: list[0]!.triggerType, removed };
  }

  // Broadcast ----------------------------------------------------------------

  /**
   * Fans a trigger out to every running session on the runner subscribed to
   * its type whose params and filters match, and spawns a session for every
   * matching listener.
   */
  async broadcast(userId: string, runnerId: string, body: BroadcastInput) {
    this.#runner(userId, runnerId);
    this.#def(runnerId, body.type);
    if (!this.hub.link(runnerId)) throw offline();
    const triggerId = crypto.randomUUID();
    const trigger: DeliveredTrigger = {
      triggerId,
      type: body.type,
      source: body.source ?? body.type.split(":")[0]!,
      ...(body.summary ? { summary: body.summary } : {}),
      payload: body.payload,
      deliverAs: body.deliverAs ?? "followUp",
      expectsResponse: false,
    };
    const sessions = new Map<string, SessionRecord>();
    for (const sub of this.store.triggers.subscriptionsFor(runnerId, body.type)) {
      if (sub.userId !== userId || sessions.has(sub.sessionId)) continue;
      if (!paramsMatch(body.payload, sub.params)) continue;
      if (!filtersMatch(body.payload, sub.filters, sub.filterMode as FilterMode)) continue;
      const s = this.store.sessions.get(sub.sessionId);
      if (s && s.status === "running") sessions.set(s.sessionId, s);
    }
    const delivered = await Promise.all(
      [...sessions.values()].map((s) =>
        this.hub.deliverTrigger(s, trigger).then(() => {
          this.record(s.sessionId, trigger);
          return 1;
        }, () => 0)
      ),
    );
    const listeners = this.store.triggers.listenersOf(runnerId, body.type)
      .filter((l) => l.userId === userId && paramsMatch(body.payload, l.params));
    const spawned = await Promise.all(
      listeners.map((l) =>
        this.spawnWithTrigger(userId, runnerId, l, trigger).then(() => 1, (err) => {
          this.hub.log(`listener ${l.listenerId} could not spawn: ${err}`);
          return 0;
        })
      ),
    );
    return {
      triggerId,
      delivered: delivered.reduce<number>((a, b) => a + b, 0),
      spawned: spawned.reduce<number>((a, b) => a + b, 0),
    };
  }

  /** Spawns a session that starts with `trigger` and records it in its history. */
  async spawnWithTrigger(
    userId: string,
    runnerId: string,
    how: { prompt?: string | null; cwd?: string | null; model?: ModelRef | null },
    trigger: DeliveredTrigger,
  ): Promise<string> {
    const { sessionId } = await this.hub.spawn(userId, {
      runnerId,
      prompt: "",
      cwd: how.cwd ?? null,
      model: how.model ?? null,
      trigger,
      ...(how.prompt ? { instruction: how.prompt } : {}),
    });
    this.record(sessionId, trigger);
    return sessionId;
  }
}
