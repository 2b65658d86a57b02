/**
 * One attempt per delivery id. GitHub (`X-GitHub-Delivery`) and Standard
 * Webhooks (`webhook-id`) name each delivery, and a sender that got no
 * answer in time sends it again: a delivery already handled is answered as
 * a duplicate with its first outcome, and one still starting its session is
 * waited for rather than started twice.
 *
 * On this node the wait is on the attempt itself. Across relay nodes (a
 * balancer sends the retry elsewhere) the attempt holds a lease on its
 * delivery id in the store, a row of the nonces table kept until the attempt
 * could have finished and given back when it has: a retry on another node
 * waits for the lease, then finds the delivery the first attempt recorded.
 * A lease left by a node that died expires, so any wait is bounded by one
 * attempt's time.
 *
 * @module
 */
import type { Clock } from "./_clock.ts";
import type { AsyncStore } from "./store/mod.ts";

/** How long GitHub and Standard Webhooks delivery ids (and GitHub bodies) are remembered. */
export const DELIVERY_TTL_MS = 24 * 60 * 60_000;
/**
 * Beyond the spawn's answer and the wait for the session to start, how long
 * a delivery's attempt may still be in flight (the store's writes).
 */
export const IN_FLIGHT_SLACK_MS = 5_000;

/** The outcome of a fire: the HTTP status and body to answer. */
export interface FireResult {
  status: 200;
  body: Record<string, unknown>;
}

/** Options of {@linkcode DeliveryAttempts}. */
export interface DeliveryAttemptsOptions {
  store: Pick<AsyncStore, "webhooks">;
  clock: Clock;
  /** How long an attempt may take at most: its lease lasts that long. */
  holdMs: number;
}

/** The deliveries being attempted, here and (by lease) on other nodes. */
export class DeliveryAttempts {
  readonly #o: DeliveryAttemptsOptions;
  /** Deliveries (by webhook and delivery id) whose session is still starting here. */
  readonly #inflight = new Map<string, Promise<FireResult>>();

  constructor(options: DeliveryAttemptsOptions) {
    this.#o = options;
  }

  /**
   * Runs `attempt` for delivery `deliveryId` of webhook `webhookId` received
   * at `now`, unless that delivery was handled (its first outcome, as a
   * duplicate) or is being handled (waits for it). A successful attempt that
   * started a session is recorded, so later copies find it.
   */
  async once(
    webhookId: string,
    deliveryId: string,
    now: number,
    attempt: () => Promise<FireResult>,
  ): Promise<FireResult> {
    const { webhooks } = this.#o.store;
    const key = `${webhookId}:${deliveryId}`;
    while (true) {
      const earlier = await this.#recorded(webhookId, deliveryId, now);
      // A redelivery (retry) of something already handled: answer success, do nothing.
      if (earlier) return duplicate(earlier);
      // A retry while the first attempt is still starting its session waits for
      // that attempt instead of starting a second session.
      const running = this.#inflight.get(key);
      if (!running) break;
      const first = await running.catch(() => null);
      if (first?.body.sessionId) {
        const { triggerId, sessionId } = first.body;
        return duplicate({ triggerId, sessionId });
      }
      if (first) return first;
      // The first attempt failed: this one tries again, unless another retry
      // that waited with it already has (look again after the await).
    }
    const lease = `attempt:${deliveryId}`;
    const held = await this.#lease(webhookId, deliveryId, lease);
    if (typeof held !== "number") return duplicate(held);
    const run = attempt().then(async (r) => {
      if (r.body.sessionId) {
        await webhooks.recordDelivery(
          webhookId,
          deliveryId,
          String(r.body.triggerId),
          String(r.body.sessionId),
          now,
        );
      }
      return r;
    });
    this.#inflight.set(key, run);
    try {
      return await run;
    } finally {
      if (this.#inflight.get(key) === run) this.#inflight.delete(key);
      // Only this attempt's claim: one that lapsed and another node took stays its.
      await webhooks.releaseNonce(webhookId, lease, held).catch(() => {});
    }
  }

  /** The outcome recorded for `deliveryId` within the DELIVERY_TTL_MS before `now`, if any. */
  #recorded(webhookId: string, deliveryId: string, now: number) {
    return this.#o.store.webhooks.delivery(webhookId, deliveryId, now - DELIVERY_TTL_MS);
  }

  /**
   * Takes the lease on attempting `deliveryId`, or waits while another node
   * holds it: the lease's end (which names this holder's claim) once this
   * request holds it, or the delivery the other attempt recorded.
   */
  async #lease(
    webhookId: string,
    deliveryId: string,
    lease: string,
  ): Promise<number | { triggerId: unknown; sessionId: unknown }> {
    const { webhooks } = this.#o.store;
    const clock = this.#o.clock;
    let until: number;
    for (let pause = 25;; pause = Math.min(pause * 2, 400)) {
      const now = clock.now();
      // A few random ms make this claim's end its own (two holders never share it).
      until = now + this.#o.holdMs + Math.floor(Math.random() * 1000);
      if (await webhooks.claimNonce(webhookId, lease, until, now)) break;
      await new Promise<void>((r) => clock.setTimeout(r, pause));
      const earlier = await this.#recorded(webhookId, deliveryId, clock.now());
      if (earlier) return earlier;
    }
    // The attempt that held it may have finished just before this one took it.
    const done = await this.#recorded(webhookId, deliveryId, clock.now());
    if (!done) return until;
    await webhooks.releaseNonce(webhookId, lease, until);
    return done;
  }
}

function duplicate(first: { triggerId: unknown; sessionId: unknown }): FireResult {
  return {
    status: 200,
    body: { ok: true, duplicate: true, triggerId: first.triggerId, sessionId: first.sessionId },
  };
}
