/**
 * A runner's triggers as its owner manages them: the catalog, listeners
 * (sessions spawned when a trigger fires) and broadcasts from the runner's
 * services to subscribed sessions and listeners.
 *
 * @module
 */
import type { ListenerPatchRequest, ListenerRequest } from "../shared/api.ts";
import type { DeliveredTrigger } from "../shared/protocol.ts";
import { type FilterMode, filtersMatch, invalidParams, paramsMatch } from "../shared/triggers.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import { invalid, notFound } from "./errors.ts";
import type { RunnerPresence } from "./runner_registry.ts";
import type { AsyncStore, ListenerRecord, SessionRecord } from "./store/mod.ts";
import { named, type TriggerInput, type Triggers } from "./triggers.ts";

/** A trigger fanned out to a runner's subscribers and listeners. */
export type BroadcastInput = Omit<TriggerInput, "expectsResponse">;

/** A new listener: what a session it spawns starts with (the checked request body). */
export type ListenerInput = ListenerRequest;

/** Changes to listeners (`null` resets a field). */
export type ListenerChange = ListenerPatchRequest;

/** Options of {@linkcode TriggerListeners}. */
export interface TriggerListenersOptions {
  store: AsyncStore;
  /** The runners' catalogs, deliveries into sessions (recorded) and spawns with a trigger. */
  triggers: Pick<Triggers, "catalog" | "definition" | "deliver" | "spawnWithTrigger">;
  runners: RunnerPresence;
  log?: (line: string) => void;
  clock?: Clock;
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

/** Listeners and broadcasts of the runners of each user. */
export class TriggerListeners {
  readonly #opts: TriggerListenersOptions;
  readonly #store: AsyncStore;
  readonly #triggers: TriggerListenersOptions["triggers"];
  readonly #clock: Clock;

  constructor(options: TriggerListenersOptions) {
    this.#opts = options;
    this.#store = options.store;
    this.#triggers = options.triggers;
    this.#clock = options.clock ?? systemClock;
  }

  async #runner(userId: string, runnerId: string): Promise<void> {
    if (!await this.#store.runners.getOwned(userId, runnerId)) throw notFound("Runner");
  }

  /**
   * A runner's catalog and listeners. The payload schemas are left out: this
   * view serves the listener form, which needs only the params; a session's
   * `available-triggers` carries them for the agent.
   */
  async runnerTriggers(userId: string, runnerId: string) {
    await this.#runner(userId, runnerId);
    return {
      triggerDefs: (await this.#triggers.catalog(runnerId)).map((d) => ({
        type: d.type,
        label: d.label,
        description: d.description ?? "",
        params: d.params,
      })),
      listeners: (await this.#store.triggers.listenersOf(runnerId)).map(listenerView),
    };
  }

  async listeners(userId: string, runnerId: string) {
    await this.#runner(userId, runnerId);
    return (await this.#store.triggers.listenersOf(runnerId)).map(listenerView);
  }

  async addListener(userId: string, runnerId: string, body: ListenerInput) {
    await this.#runner(userId, runnerId);
    const def = await this.#triggers.definition(runnerId, body.triggerType);
    const params = body.params ?? {};
    const bad = invalidParams(def, params);
    if (bad) throw invalid(bad, "invalid_params");
    const now = isoNow(this.#clock);
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
    await this.#store.triggers.saveListener(rec);
    return listenerView(rec);
  }

  /** Listeners of a runner that `target` names. */
  async #listenerTargets(runnerId: string, target: string): Promise<ListenerRecord[]> {
    return named(await this.#store.triggers.listenersOf(runnerId), (r) => r.listenerId, target);
  }

  async updateListener(
    userId: string,
    runnerId: string,
    target: string,
    patch: ListenerChange,
  ) {
    await this.#runner(userId, runnerId);
    const list = await this.#listenerTargets(runnerId, target);
    if (list.length === 0) throw notFound("Listener");
    const now = isoNow(this.#clock);
    for (const l of list) {
      if (patch.triggerType !== undefined) l.triggerType = patch.triggerType;
      if (patch.prompt !== undefined) l.prompt = patch.prompt ?? "";
      if (patch.cwd !== undefined) l.cwd = patch.cwd?.trim() ? patch.cwd : null;
      if (patch.model !== undefined) l.model = patch.model ?? null;
      if (patch.params !== undefined) l.params = patch.params ?? {};
      const bad = invalidParams(await this.#triggers.definition(runnerId, l.triggerType), l.params);
      if (bad) throw invalid(bad, "invalid_params");
      l.updatedAt = now;
    }
    await this.#store.triggers.saveListeners(list);
    return listenerView(list[0]!);
  }

  async removeListener(userId: string, runnerId: string, target: string) {
    await this.#runner(userId, runnerId);
    const list = await this.#listenerTargets(runnerId, target);
    if (list.length === 0) throw notFound("Listener");
    const ids = list.map((l) => l.listenerId);
    const removed = await this.#store.triggers.deleteListeners(runnerId, ids);
    return { listenerId: list[0]!.listenerId, triggerType: list[0]!.triggerType, removed };
  }

  /**
   * Fans a trigger out to every running session on the runner subscribed to
   * its type whose params and filters match, and spawns a session for every
   * matching listener.
   */
  async broadcast(userId: string, runnerId: string, body: BroadcastInput) {
    await this.#runner(userId, runnerId);
    await this.#triggers.definition(runnerId, body.type);
    this.#opts.runners.connected(runnerId);
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
    for (const sub of await this.#store.triggers.subscriptionsFor(runnerId, body.type)) {
      if (sub.userId !== userId || sessions.has(sub.sessionId)) continue;
      if (!paramsMatch(body.payload, sub.params)) continue;
      if (!filtersMatch(body.payload, sub.filters, sub.filterMode as FilterMode)) continue;
      const s = await this.#store.sessions.get(sub.sessionId);
      if (s && s.status === "running") sessions.set(s.sessionId, s);
    }
    const delivered = await Promise.all(
      [...sessions.values()].map((s) => this.#triggers.deliver(s, trigger).then(() => 1, () => 0)),
    );
    const listeners = (await this.#store.triggers.listenersOf(runnerId, body.type))
      .filter((l) => l.userId === userId && paramsMatch(body.payload, l.params));
    const spawned = await Promise.all(
      listeners.map((l) =>
        this.#triggers.spawnWithTrigger(userId, runnerId, l, trigger).then(() => 1, (err) => {
          this.#opts.log?.(`listener ${l.listenerId} could not spawn: ${err}`);
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
}
