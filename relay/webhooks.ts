/**
 * Webhooks: signed HTTP calls from other systems that start an agent. Each
 * webhook belongs to one user and names the runner, folder, model and prompt
 * of the sessions it spawns; the request body reaches the new session as a
 * trigger with source `external:<source>`.
 *
 * @module
 */
import type { CreateWebhookRequest, UpdateWebhookRequest } from "../shared/api.ts";
import type { DeliveredTrigger } from "../shared/protocol.ts";
import { JsonTooDeepError, parseJson } from "../shared/json.ts";
import { filtersMatch } from "../shared/triggers.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import {
  conflict,
  invalid,
  notFound,
  RateLimited,
  rejected,
  RelayError,
  timeout,
} from "./errors.ts";
import { type Limiter, type Limits, memoryLimits } from "./limits.ts";
import { replayKey } from "./webhook_replay.ts";
import {
  DELIVERY_TTL_MS,
  DeliveryAttempts,
  type FireResult,
  IN_FLIGHT_SLACK_MS,
} from "./webhook_deliveries.ts";
import type { RunnerPresence } from "./runner_registry.ts";
import type { SecretBox } from "./secret_box.ts";
import type { SessionControl } from "./session_service.ts";
import { SPAWN_ANSWER_MS } from "./runner_connection.ts";
import type { AsyncStore, WebhookRecord } from "./store/mod.ts";
import type { Triggers } from "./triggers.ts";
import { MAX_SKEW_MS, verifyWebhook } from "../shared/webhook_signing.ts";

/** Largest webhook body accepted. */
export const MAX_WEBHOOK_BODY = 1024 * 1024;
/** Signed fires a webhook takes per minute by default: far above a CI's fan-out, far below a flood. */
export const DEFAULT_WEBHOOK_FIRES_PER_MINUTE = 60;

/** A new webhook: the request body, checked by the route. */
export type WebhookInput = CreateWebhookRequest;

/** Any subset of the create fields (`null` clears one), plus `enabled`. */
export type WebhookChange = UpdateWebhookRequest;

/** Options of {@linkcode Webhooks}. */
export interface WebhooksOptions {
  store: AsyncStore;
  /** Starts sessions with a trigger and records it. */
  triggers: Pick<Triggers, "spawnWithTrigger">;
  /** Waits for a fired session to start, and ends one that did not in time. */
  sessions: Pick<SessionControl, "waitRunning" | "input" | "abandonSession">;
  runners: RunnerPresence;
  /** Seals and opens the webhooks' secrets. */
  box: SecretBox;
  /** Public address of the relay, for the webhooks' URLs. */
  baseUrl: string;
  /** How long a fire waits for its session to start. */
  connectTimeoutMs: number;
  /** Signed fires each webhook takes per minute (default 60); more get 429. */
  firesPerMinute?: number;
  /** Where fires are counted (default: this process's memory); see limits.ts. */
  limits?: Limits;
  clock?: Clock;
}

export type { FireResult };

/** Webhook CRUD and firing. */
export class Webhooks {
  /** When used nonces were last pruned from the database (epoch ms). */
  #noncesPrunedAt = 0;
  /** One attempt per delivery id, on this node and across nodes. */
  readonly #attempts: DeliveryAttempts;
  /**
   * Fires per webhook in the last minute: in memory on SQLite (a restart
   * forgets a minute at most), in the database that relay nodes share.
   */
  readonly #fires: Limiter;
  readonly #firesPerMinute: number;

  readonly store: AsyncStore;
  readonly #opts: WebhooksOptions;
  readonly #clock: Clock;

  constructor(options: WebhooksOptions) {
    this.#opts = options;
    this.store = options.store;
    this.#clock = options.clock ?? systemClock;
    this.#firesPerMinute = options.firesPerMinute ?? DEFAULT_WEBHOOK_FIRES_PER_MINUTE;
    this.#fires = (options.limits ?? memoryLimits()).limiter("webhook_fire", {
      limit: this.#firesPerMinute,
      windowMs: 60_000,
      now: () => this.#clock.now(),
    });
    this.#attempts = new DeliveryAttempts({
      store: options.store,
      clock: this.#clock,
      // The spawn's answer, then the wait for the session to start, then the writes.
      holdMs: SPAWN_ANSWER_MS + options.connectTimeoutMs + IN_FLIGHT_SLACK_MS,
    });
  }

  /** The API view of a webhook; the secret only when asked for. */
  async view(w: WebhookRecord, withSecret: boolean) {
    return {
      id: w.id,
      userId: w.userId,
      name: w.name,
      source: w.source,
      ...(withSecret ? { secret: await this.#secret(w) } : {}),
      runnerId: w.runnerId,
      cwd: w.cwd,
      prompt: w.prompt,
      model: w.model,
      eventFilter: w.eventFilter,
      filters: w.filters,
      filterMode: w.filterMode,
      enabled: w.enabled,
      requireReplayProtection: w.requireReplayProtection,
      url: `${this.#opts.baseUrl}/api/webhooks/${w.id}/fire`,
      createdAt: w.createdAt,
      updatedAt: w.updatedAt,
    };
  }

  async #checkRunner(userId: string, runnerId: string | null | undefined): Promise<void> {
    if (runnerId && !await this.store.runners.getOwned(userId, runnerId)) {
      throw invalid(`Unknown runner: '${runnerId}'`, "unknown_runner");
    }
  }

  /** The webhooks of `userId`, without their secrets. */
  async list(userId: string) {
    const list = await this.store.webhooks.listForUser(userId);
    return await Promise.all(list.map((w) => this.view(w, false)));
  }

  /** One webhook of `userId`, with its secret; unknown and foreign ids throw the same 404. */
  async get(userId: string, id: string) {
    const w = await this.store.webhooks.getOwned(userId, id);
    if (!w) throw notFound("Webhook");
    return await this.view(w, true);
  }

  async remove(userId: string, id: string): Promise<void> {
    if (!await this.store.webhooks.delete(userId, id)) throw notFound("Webhook");
  }

  async create(userId: string, body: WebhookInput) {
    await this.#checkRunner(userId, body.runnerId);
    const secret = Array.from(
      crypto.getRandomValues(new Uint8Array(32)),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    const now = isoNow(this.#clock);
    const w: WebhookRecord = {
      id: crypto.randomUUID(),
      userId,
      name: body.name,
      source: body.source,
      secretEnc: await this.#opts.box.seal(secret),
      runnerId: body.runnerId ?? null,
      cwd: body.cwd?.trim() ? body.cwd : null,
      prompt: body.prompt ?? null,
      model: body.model ?? null,
      eventFilter: body.eventFilter ?? [],
      filters: body.filters ?? [],
      filterMode: body.filterMode ?? "and",
      enabled: true,
      requireReplayProtection: body.requireReplayProtection ?? true,
      createdAt: now,
      updatedAt: now,
    };
    await this.store.webhooks.save(w);
    return await this.view(w, true);
  }

  async update(userId: string, id: string, body: WebhookChange) {
    const w = await this.store.webhooks.getOwned(userId, id);
    if (!w) throw notFound("Webhook");
    await this.#checkRunner(userId, body.runnerId);
    if (body.name !== undefined) w.name = body.name;
    if (body.source !== undefined) w.source = body.source;
    if (body.runnerId !== undefined) w.runnerId = body.runnerId;
    if (body.cwd !== undefined) w.cwd = body.cwd?.trim() ? body.cwd : null;
    if (body.prompt !== undefined) w.prompt = body.prompt;
    if (body.model !== undefined) w.model = body.model ?? null;
    if (body.eventFilter !== undefined) w.eventFilter = body.eventFilter ?? [];
    if (body.filters !== undefined) w.filters = body.filters ?? [];
    if (body.filterMode !== undefined) w.filterMode = body.filterMode ?? "and";
    if (body.enabled !== undefined) w.enabled = body.enabled;
    if (body.requireReplayProtection !== undefined) {
      w.requireReplayProtection = body.requireReplayProtection;
    }
    w.updatedAt = isoNow(this.#clock);
    await this.store.webhooks.save(w);
    return await this.view(w, false);
  }

  /**
   * Handles `POST /api/webhooks/{id}/fire` in the spec's order: signature,
   * then JSON, then the event filter, then a session is spawned on the
   * webhook's runner with the body as its trigger. Errors are RelayErrors
   * whose kinds give the spec's statuses.
   */
  async fire(id: string, headers: Headers, raw: Uint8Array): Promise<FireResult> {
    const w = await this.store.webhooks.get(id);
    // Missing, deleted and disabled answer alike.
    if (!w || !w.enabled) throw notFound("Webhook");
    const now = this.#clock.now();
    const v = await verifyWebhook(await this.#secret(w), headers, raw, now);
    if (!v.ok) throw new RelayError("unauthorized", "bad_signature", v.message);
    const bodyKey = replayKey(w, v, headers);
    const limited = await this.#fires.hit(w.id);
    if (!limited.ok) {
      throw new RateLimited(
        "rate_limited",
        `Too many deliveries to this webhook: at most ${this.#firesPerMinute} a minute`,
        limited.retryAfterSeconds,
      );
    }

    await this.#pruneNonces(now);
    if (v.nonce !== undefined) {
      if (await this.store.webhooks.nonceUsedUntil(w.id, v.nonce) > now) {
        throw conflict("nonce_reused", "This nonce was already used in the last 5 minutes");
      }
    }
    // A nonce stays used for as long as its timestamp is accepted: up to 5
    // minutes past the time it was signed, which may be ahead of ours.
    // A GitHub body stays used (under its signature) as long as delivery ids are remembered.
    const nonce = v.nonce !== undefined
      ? { nonce: v.nonce, until: Math.max(now, v.signedAt ?? now) + MAX_SKEW_MS, now, body: false }
      : bodyKey !== null
      ? { nonce: bodyKey, until: now + DELIVERY_TTL_MS, now, body: true }
      : null;
    if (!v.deliveryId) return await this.#deliver(w, headers, raw, nonce);
    return await this.#attempts.once(w.id, v.deliveryId, now, async () => {
      // Not a redelivery, yet the same signed body: a captured request sent
      // again with a delivery id of the sender's choosing (GitHub signs the body only).
      if (bodyKey !== null && await this.store.webhooks.nonceUsedUntil(w.id, bodyKey) > now) {
        throw conflict("replayed", "This body was already delivered under another delivery id");
      }
      return await this.#deliver(w, headers, raw, nonce);
    });
  }

  /** Everything after the signature: JSON, filters, then the session. */
  async #deliver(
    w: WebhookRecord,
    headers: Headers,
    raw: Uint8Array,
    /**
     * The enhanced nonce (or a GitHub body's key) to claim once the delivery
     * goes ahead, until when, and the time it was checked at.
     */
    nonce: { nonce: string; until: number; now: number; body: boolean } | null,
  ): Promise<FireResult> {
    let body: unknown;
    try {
      body = parseJson(new TextDecoder("utf-8", { fatal: true }).decode(raw));
    } catch (err) {
      if (err instanceof JsonTooDeepError) throw invalid(err.message, "too_deep");
      throw invalid("Body is not valid JSON", "bad_json");
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      throw invalid("Body must be a JSON object", "bad_json");
    }
    const payload = body as Record<string, unknown>;
    const type = typeof payload.type === "string"
      ? payload.type
      : headers.get("x-github-event") ?? "webhook";
    const action = typeof payload.action === "string" ? payload.action : null;
    if (
      w.eventFilter.length > 0 &&
      !w.eventFilter.some((f) => f === type || (action !== null && f === `${type}.${action}`))
    ) {
      return { status: 200, body: { ok: true, filtered: true } };
    }
    if (!filtersMatch(payload, w.filters, w.filterMode)) {
      return { status: 200, body: { ok: true, filtered: true } };
    }

    if (!w.runnerId || !await this.store.runners.getOwned(w.userId, w.runnerId)) {
      throw new RelayError(
        "misconfigured",
        "no_runner",
        "This webhook has no runner to start sessions on",
      );
    }
    this.#opts.runners.connected(w.runnerId, "The webhook's runner");
    // Claimed, not only marked: a copy of this request that passed the check
    // above while this one was reading the store is refused here.
    if (
      nonce && !await this.store.webhooks.claimNonce(w.id, nonce.nonce, nonce.until, nonce.now)
    ) {
      throw nonce.body
        ? conflict("replayed", "This body was already delivered under another delivery id")
        : conflict("nonce_reused", "This nonce was already used in the last 5 minutes");
    }
    const trigger: DeliveredTrigger = {
      triggerId: crypto.randomUUID(),
      type,
      source: `external:${w.source}`,
      summary: `${w.name}: ${action ? `${type} ${action}` : type}`,
      payload,
      deliverAs: "steer",
      expectsResponse: false,
    };
    let sessionId: string;
    try {
      sessionId = await this.#opts.triggers.spawnWithTrigger(w.userId, w.runnerId, w, trigger);
    } catch (err) {
      if (nonce) await this.store.webhooks.releaseNonce(w.id, nonce.nonce);
      // An offline runner stays a 503; whatever else went wrong, the runner did not start it.
      if (err instanceof RelayError && err.kind === "offline") throw err;
      const why = err instanceof Error ? err.message : String(err);
      throw rejected("runner_rejected", `The runner did not start the session: ${why}`);
    }
    const state = await this.#opts.sessions.waitRunning(sessionId, this.#opts.connectTimeoutMs);
    if (state !== "running") {
      if (nonce) await this.store.webhooks.releaseNonce(w.id, nonce.nonce);
      if (state === "timeout") {
        // The sender hears it failed: the session must not start later and
        // surprise it (or a retry). End it here and ask the runner to drop it.
        // (The runner is asked before the session is marked ended, which would refuse input.)
        this.#opts.sessions.input(w.userId, sessionId, "end", "").catch(() => {});
        this.#opts.sessions.abandonSession(sessionId, "The session did not start in time");
        throw timeout("session_timeout", "The session did not start in time");
      }
      throw rejected("runner_rejected", "The session ended before it started");
    }
    return { status: 200, body: { ok: true, triggerId: trigger.triggerId, sessionId } };
  }

  /** The webhook's secret, or a clear error when the relay's own secret changed. */
  async #secret(w: WebhookRecord): Promise<string> {
    try {
      return await this.#opts.box.open(w.secretEnc);
    } catch {
      throw new RelayError(
        "misconfigured",
        "secret_unreadable",
        "This webhook's secret cannot be read (the relay's secret file changed): create a new webhook",
      );
    }
  }

  /** Drops expired nonces, at most once a minute. */
  async #pruneNonces(now: number): Promise<void> {
    if (now - this.#noncesPrunedAt < 60_000) return;
    this.#noncesPrunedAt = now;
    await this.store.webhooks.pruneNonces(now);
  }
}
