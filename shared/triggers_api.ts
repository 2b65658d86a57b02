/**
 * The relay's HTTP API for triggers, as types: sending one to a session,
 * its history, the definitions a session or runner offers, a session's
 * subscriptions, a runner's listeners and broadcasts. Part of the contract
 * of shared/api.ts, which re-exports it.
 *
 * @module
 */
import type { DeliveredTrigger, ModelRef } from "./protocol.ts";
import type { FilterMode, TriggerFilter, TriggerParam } from "./triggers.ts";

/** Params of a subscription or listener: names of the definition's params, scalar values. */
export type TriggerParams = Record<string, string | number | boolean>;

/** `POST /api/sessions/{id}/trigger`. */
export interface SendTriggerRequest {
  type: string;
  payload: Record<string, unknown>;
  deliverAs?: "steer" | "followUp";
  expectsResponse?: boolean;
  source?: string;
  summary?: string;
}

/** The answer of `POST /api/sessions/{id}/trigger`. */
export interface SendTriggerResponse {
  ok: true;
  triggerId: string;
}

/**
 * One entry of a session's trigger history: the trigger as delivered, whose
 * `source` here may also be `api` or `session` (the agent's answers).
 */
export interface TriggerHistoryEntry extends DeliveredTrigger {
  ts: string;
  direction: "inbound" | "outbound";
  /** On an inbound entry the agent answered. */
  response?: { action?: string; text?: string; ts: string };
}

/** `GET /api/sessions/{id}/triggers`, most recent first. */
export interface TriggerHistoryResponse {
  triggers: TriggerHistoryEntry[];
}

/** A trigger definition as a runner's catalog shows it to the listener form. */
export interface RunnerTriggerDef {
  type: string;
  label: string;
  /** `""` when the definition has none. */
  description: string;
  params: TriggerParam[];
}

/** A trigger definition as a session's `available-triggers` shows it, with its payload schema. */
export interface AvailableTrigger extends RunnerTriggerDef {
  /** JSON Schema of the payload, or null. */
  schema: Record<string, unknown> | null;
}

/** `GET /api/sessions/{id}/available-triggers`. */
export interface AvailableTriggersResponse {
  triggerDefs: AvailableTrigger[];
}

/** A session's subscription to the broadcasts of one trigger type. */
export interface TriggerSubscription {
  subscriptionId: string;
  triggerType: string;
  runnerId: string;
  params: Record<string, unknown>;
  filters: TriggerFilter[];
  filterMode: FilterMode;
  createdAt: string;
}

/** `GET /api/sessions/{id}/trigger-subscriptions`, oldest first. */
export interface SubscriptionListResponse {
  subscriptions: TriggerSubscription[];
}

/** `POST /api/sessions/{id}/trigger-subscriptions`. */
export interface SubscribeRequest {
  triggerType: string;
  params?: TriggerParams;
  filters?: TriggerFilter[];
  filterMode?: FilterMode;
}

/** `PUT /api/sessions/{id}/trigger-subscriptions/{target}`: `null` resets a field. */
export interface SubscriptionPatchRequest {
  params?: TriggerParams | null;
  filters?: TriggerFilter[] | null;
  filterMode?: FilterMode | null;
}

/** The answer of a subscribe or a subscription change. */
export interface SubscriptionResponse extends TriggerSubscription {
  ok: true;
}

/** The answer of `DELETE …/trigger-subscriptions/{target}`: the first one removed. */
export interface UnsubscribeResponse extends SubscriptionResponse {
  /** How many were removed (a trigger type as target names every one of it). */
  removed: number;
}

/** A runner listener: a new session for each matching broadcast. */
export interface TriggerListener {
  listenerId: string;
  triggerType: string;
  prompt: string;
  cwd: string | null;
  model: ModelRef | null;
  params: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

/** `GET /api/runners/{runnerId}/triggers`: the catalog (without schemas) and the listeners. */
export interface RunnerTriggersResponse {
  triggerDefs: RunnerTriggerDef[];
  listeners: TriggerListener[];
}

/** `GET /api/runners/{runnerId}/trigger-listeners`, oldest first. */
export interface ListenerListResponse {
  listeners: TriggerListener[];
}

/** `POST /api/runners/{runnerId}/trigger-listeners`. */
export interface ListenerRequest {
  triggerType: string;
  prompt?: string;
  cwd?: string | null;
  model?: ModelRef | null;
  params?: TriggerParams;
}

/** `PUT /api/runners/{runnerId}/trigger-listeners/{target}`: `null` resets a field. */
export interface ListenerPatchRequest {
  triggerType?: string;
  prompt?: string | null;
  cwd?: string | null;
  model?: ModelRef | null;
  params?: TriggerParams | null;
}

/** The answer of adding or changing a listener. */
export interface ListenerResponse extends TriggerListener {
  ok: true;
}

/** The answer of `DELETE …/trigger-listeners/{target}`. */
export interface RemoveListenerResponse {
  ok: true;
  listenerId: string;
  triggerType: string;
  removed: number;
}

/** `POST /api/runners/{runnerId}/trigger-broadcast` (an API key or runner token only). */
export type BroadcastRequest = Omit<SendTriggerRequest, "expectsResponse">;

/** The answer of a broadcast: how many sessions got it, how many listeners started one. */
export interface BroadcastResponse {
  ok: true;
  triggerId: string;
  delivered: number;
  spawned: number;
}
