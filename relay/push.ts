/**
 * Push notifications: which committed session events notify whom, and a
 * bounded queue of deliveries in front of the push services.
 *
 * - `agent_end` → `agent_finished`, or `agent_error` when the turn ended on
 *   a model error; `session_error` and a failed `session_end` → `agent_error`.
 * - Only events as they are committed notify: a viewer catching up, a relay
 *   restart or a runner re-sending what the relay has never reach here, and
 *   an event older than STALE_MS (by its runner's clock) is not news.
 * - Nothing is sent while some viewer of the user has the session on screen
 *   (its `visibility` message, see fanout.ts).
 * - Per subscription: `enabledEvents` (rule 1), `suppressChildNotifications`
 *   (rule 2); a 404 or 410 from the push service deletes it (rule 4).
 * - A question's notification (`agent_needs_input`) is withdrawn once it is
 *   answered in a session view or the agent is stopped: a quiet message of
 *   the same kind, tag and Topic replaces it, whatever is on screen. One
 *   answered from the notification itself is not: the device that answered
 *   has closed it, and another would only add a notification there.
 * - One notification per session waits at a time (a newer one
 *   replaces it, as the `Topic` header does at the push service), at most
 *   MAX_QUEUED in all, CONCURRENCY in flight, each with the sender's time
 *   limit: a slow or dead push service costs bounded memory.
 * - The store is asked in the order the events came (one step at a time),
 *   so a newer notification still replaces an older one of its session.
 *
 * @module
 */
import type { PushKind, PushPayload } from "../shared/push_api.ts";
import type { SessionEventBody } from "../shared/protocol.ts";
import { type Clock, systemClock } from "./_clock.ts";
import type { Committed } from "./event_pipeline.ts";
import type { PushDelivery, PushTarget, SendOutcome } from "./push_sender.ts";
import type { AsyncStore, PushSubscriptionRecord } from "./store/mod.ts";
import { needsInput } from "./questions.ts";
import { DELIVERY, kindEnabled, type Notification, payloadOf, topicOf } from "./push_kinds.ts";

/** Deliveries waiting at most (about 1 KB each). */
export const MAX_QUEUED = 1000;
/** Deliveries in flight at most. */
export const CONCURRENCY = 4;
/** An event older than this when committed (a runner back after a long time) notifies nobody. */
export const STALE_MS = 30 * 60_000;
/** Options of {@linkcode PushNotifier}. */
export interface PushNotifierOptions {
  store: Pick<AsyncStore, "push" | "sessions">;
  /** Sends one message (PushSender.send). */
  send: (target: PushTarget, payload: string, delivery: PushDelivery) => Promise<SendOutcome>;
  /** Whether a viewer has the session open and on screen. */
  onScreen: (sessionId: string) => boolean;
  /** Whether a session is in collab mode: its `agent_needs_input` carries buttons (rule 3). */
  collab?: (userId: string, sessionId: string) => boolean | Promise<boolean>;
  /** The parent of a linked child session, or null (rule 2). */
  parentOf?: (sessionId: string) => string | null | Promise<string | null>;
  log?: (line: string) => void;
  clock?: Clock;
  maxQueued?: number;
}

/** A notification waiting: small, so that a queue full of them is (see notify). */
interface Pending extends Notification {
  userId: string;
  /** A withdrawal not sent to this endpoint (the device that answered). */
  except?: string;
  /** Once its delivery started: the payload and the subscriptions still to send it to. */
  started?: { payload: string; delivery: PushDelivery; targets: PushSubscriptionRecord[] };
}

interface Job {
  sub: PushSubscriptionRecord;
  payload: string;
  delivery: PushDelivery;
}

/** Turns committed events into push messages and delivers them through a bounded queue. */
export class PushNotifier {
  readonly #opts: PushNotifierOptions;
  readonly #clock: Clock;
  readonly #max: number;
  /**
   * Waiting notifications, one per session (a newer one replaces it);
   * insertion order is the queue's. Each becomes one delivery per
   * subscription only when its turn comes, so what waits holds no payload
   * and no subscription records (a queue of those, replaced thousands of
   * times a second, left ~40 MB of garbage in the old generation).
   */
  readonly #queue = new Map<string, Pending>();
  #inFlight = 0;
  #dropped = 0;
  /** Sessions whose current turn ended on a model error (message_end), until its agent_end. */
  readonly #turnError = new Map<string, string>();
  /** The question each session's last notification asked (its toolCallId), until withdrawn. */
  readonly #asked = new Map<string, string>();
  #closed = false;
  /** Resolves when the queue is empty and nothing is in flight (tests). */
  #idle: (() => void)[] = [];
  /** The events being looked at, one after another (each may ask the store). */
  #steps: Promise<void> = Promise.resolve();
  /** Steps queued on `#steps` and not yet done. */
  #stepsLeft = 0;
  /** Whether the head of the queue is being prepared (its subscriptions read). */
  #starting = false;

  constructor(options: PushNotifierOptions) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
    this.#max = options.maxQueued ?? MAX_QUEUED;
  }

  /** Deliveries waiting and in flight. */
  get pending(): { queued: number; inFlight: number; dropped: number } {
    return { queued: this.#queue.size, inFlight: this.#inFlight, dropped: this.#dropped };
  }

  /** Looks at a commit's events for what notifies (cheap for every other event). */
  committed(c: Committed): void {
    if (this.#closed) return;
    for (const ev of c.events) {
      const j = ev.json;
      // A substring first: most events are deltas and need no parsing.
      if (
        !j.includes('"type":"agent_end"') && !j.includes('"type":"session_error"') &&
        !j.includes('"type":"session_end"') && !j.includes('"stopReason":"error"') &&
        !j.includes('"type":"question') // question, question_answered, question_cancelled
      ) continue;
      let parsed: { ts?: number; e?: SessionEventBody };
      try {
        parsed = JSON.parse(j);
      } catch {
        continue;
      }
      const e = parsed.e;
      if (!e) continue;
      const stale = typeof parsed.ts === "number" && this.#clock.now() - parsed.ts > STALE_MS;
      this.#step(() => this.#event(c.userId, c.sessionId, e, stale));
    }
  }

  /** Runs `step` after every step before it, so notifications keep the order of their events. */
  #step(step: () => Promise<void>): void {
    this.#stepsLeft++;
    this.#steps = this.#steps.then(step).catch((err) => {
      this.#opts.log?.(`push: preparing a notification failed: ${err}`);
    }).then(() => {
      this.#stepsLeft--;
      this.#settle();
    });
  }

  async #event(userId: string, sessionId: string, e: SessionEventBody, stale: boolean) {
    switch (e.type) {
      case "message_end": {
        const m = e.message as { role?: string; stopReason?: string; errorMessage?: string };
        if (m?.role === "assistant" && m.stopReason === "error") {
          if (this.#turnError.size >= 10_000) this.#turnError.clear();
          this.#turnError.set(
            sessionId,
            String(m.errorMessage ?? "The model answered with an error"),
          );
        }
        return;
      }
      case "agent_end": {
        const error = this.#turnError.get(sessionId);
        this.#turnError.delete(sessionId);
        if (stale) return;
        if (error !== undefined) await this.#notify(userId, sessionId, "agent_error", error);
        else await this.#notify(userId, sessionId, "agent_finished");
        return;
      }
      case "question": {
        if (stale) return;
        const collab = (await this.#opts.collab?.(userId, sessionId)) ?? false;
        const n = needsInput(e, collab);
        if (!n) return;
        const input = { toolCallId: n.toolCallId, actions: n.actions };
        if (await this.#notify(userId, sessionId, "agent_needs_input", n.detail, input)) {
          if (this.#asked.size >= 10_000) this.#asked.clear();
          this.#asked.set(sessionId, n.toolCallId);
        }
        return;
      }
      case "question_answered":
      case "question_cancelled": {
        const id = String(e.toolCallId ?? "");
        if (this.#asked.get(sessionId) !== id) return;
        this.#asked.delete(sessionId);
        if (stale || e.type === "question_answered" && e.via === "push") return;
        await this.#withdraw(userId, sessionId, id, e.type === "question_answered");
        return;
      }
      case "session_error":
        if (!stale) {
          await this.#notify(userId, sessionId, "agent_error", String(e.message ?? "Error"));
        }
        return;
      case "session_end": {
        this.#turnError.delete(sessionId);
        const failed = e.reason === "crashed" || e.reason === "error" || e.reason === "lost";
        if (failed && !stale) {
          this.notify(userId, sessionId, "agent_error", String(e.message ?? e.reason));
        }
        return;
      }
    }
  }

  /**
   * Queues a notification of `kind` about a session of `userId` for their
   * subscriptions that want it, unless the session is on screen now.
   */
  notify(
    userId: string,
    sessionId: string,
    kind: PushKind,
    detail = "",
    input?: Pending["input"],
  ): void {
    const ts = this.#clock.now();
    this.#step(async () => {
      await this.#notify(userId, sessionId, kind, detail, input, ts);
    });
  }

  /**
   * A question answered from the notification of the device with push endpoint `endpoint`:
   * withdrawn on the person's other devices. Called by the node that took the answer.
   */
  answeredFrom(userId: string, sessionId: string, toolCallId: string, endpoint: string): void {
    this.#step(() => this.#withdraw(userId, sessionId, toolCallId, true, endpoint));
  }

  /** Queues a notification unless its session is on screen; whether it was queued. */
  async #notify(
    userId: string,
    sessionId: string,
    kind: PushKind,
    detail = "",
    input?: Pending["input"],
    ts = this.#clock.now(),
  ): Promise<boolean> {
    if (this.#closed) return false;
    if (this.#opts.onScreen(sessionId)) return false;
    if (await this.#opts.store.push.countOf(userId) === 0 || this.#closed) return false;
    const job: Pending = { userId, sessionId, kind, detail, ts };
    if (input) job.input = input;
    // Any other notification replaces the question's (one tag per session).
    else this.#asked.delete(sessionId);
    this.#enqueue(sessionId, job);
    this.#pump();
    return true;
  }

  /**
   * Withdraws the question `toolCallId`'s notification: still waiting here,
   * it is dropped; already sent, a quiet replacement follows it (sent even
   * while the session is on screen: that is where it was answered).
   */
  async #withdraw(user: string, session: string, id: string, answered: boolean, except?: string) {
    if (this.#closed) return;
    const waiting = this.#queue.get(session);
    if (waiting && !waiting.started) {
      // The question still waits here: it is dropped. Anything else waiting is newer (the next
      // question, when the answer came by another request) and replaces it by its tag anyway.
      if (waiting.input?.toolCallId === id && !waiting.resolved) {
        this.#queue.delete(session);
        this.#settle();
      }
      return;
    }
    if (await this.#opts.store.push.countOf(user) === 0 || this.#closed) return;
    this.#enqueue(session, {
      userId: user,
      sessionId: session,
      kind: "agent_needs_input",
      detail: "",
      ts: this.#clock.now(),
      input: { toolCallId: id, actions: [] },
      resolved: answered ? "answered" : "cancelled",
      ...(except !== undefined ? { except } : {}),
    });
    this.#pump();
  }

  /** Starts a notification's delivery: its payload and the subscriptions that want it (rules 1, 2). */
  async #start(p: Pending): Promise<NonNullable<Pending["started"]>> {
    const isChild = ((await this.#opts.parentOf?.(p.sessionId)) ?? null) !== null;
    const targets = (await this.#opts.store.push.listOf(p.userId)).filter((s) =>
      kindEnabled(s.enabledEvents, p.kind) && !(isChild && s.suppressChildNotifications) &&
      s.endpoint !== p.except
    );
    return {
      payload: JSON.stringify(await this.#payload(p)),
      delivery: { ...DELIVERY[p.kind], topic: topicOf(p.sessionId) },
      targets,
    };
  }

  async #payload(p: Pending): Promise<PushPayload> {
    return payloadOf(p, (await this.#opts.store.sessions.get(p.sessionId))?.title ?? null);
  }

  #enqueue(key: string, job: Pending): void {
    // A newer message about the session replaces the waiting one (and moves to the back).
    this.#queue.delete(key);
    if (this.#queue.size >= this.#max) {
      const oldest = this.#queue.keys().next().value as string;
      this.#queue.delete(oldest);
      if (this.#dropped++ % 100 === 0) {
        this.#opts.log?.(`push: queue full (${this.#max}), dropped the oldest notification`);
      }
    }
    this.#queue.set(key, job);
  }

  #pump(): void {
    while (!this.#closed && this.#inFlight < CONCURRENCY && this.#queue.size > 0) {
      const [key, p] = this.#queue.entries().next().value as [string, Pending];
      if (!p.started) {
        // One notification prepared at a time; a newer one of its session
        // may replace it meanwhile (then what was read goes unused).
        if (this.#starting) return;
        this.#starting = true;
        this.#start(p).then((started) => {
          p.started = started;
        }, (err) => {
          if (this.#queue.get(key) === p) this.#queue.delete(key);
          this.#opts.log?.(`push: reading the subscriptions failed: ${err}`);
        }).finally(() => {
          this.#starting = false;
          this.#pump();
          this.#settle();
        });
        return;
      }
      const sub = p.started.targets.shift();
      if (p.started.targets.length === 0) this.#queue.delete(key);
      if (!sub) continue;
      const job: Job = { sub, payload: p.started.payload, delivery: p.started.delivery };
      this.#inFlight++;
      this.#deliver(job).finally(() => {
        this.#inFlight--;
        this.#pump();
        this.#settle();
      });
    }
  }

  /** Whether nothing waits, is being prepared or is in flight. */
  #quiet(): boolean {
    return this.#stepsLeft === 0 && !this.#starting && this.#inFlight === 0 &&
      (this.#queue.size === 0 || this.#closed);
  }

  /** Resolves the `idle()` waits once nothing is left to do. */
  #settle(): void {
    if (this.#quiet()) { for (const r of this.#idle.splice(0)) r(); }
  }

  async #deliver({ sub, payload, delivery }: Job): Promise<void> {
    let out: SendOutcome;
    try {
      out = await this.#opts.send(sub, payload, delivery);
    } catch (err) {
      out = { ok: false, gone: false, status: null, reason: String(err) };
    }
    // After close the database may be gone too: a late answer changes nothing.
    if (out.ok || this.#closed) return;
    if (out.gone) {
      // Rule 4: the browser unsubscribed or the subscription expired.
      try {
        const now = await this.#opts.store.push.byEndpoint(sub.endpoint);
        if (now?.id === sub.id) await this.#opts.store.push.delete(sub.id);
      } catch (err) {
        this.#opts.log?.(`push: removing a gone subscription failed: ${err}`);
        return;
      }
      this.#opts.log?.(
        `push: removed a subscription the push service no longer has (${out.status})`,
      );
      return;
    }
    this.#opts.log?.(`push: delivery to ${new URL(sub.endpoint).host} failed: ${out.reason}`);
  }

  /** Resolves once nothing waits or is in flight. */
  idle(): Promise<void> {
    if (this.#quiet()) return Promise.resolve();
    return new Promise((r) => this.#idle.push(r));
  }

  /** Drops what waits; deliveries in flight end at their time limit. */
  close(): void {
    this.#closed = true;
    this.#queue.clear();
  }
}
