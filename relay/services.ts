/**
 * Routes `service_message` traffic (the git service) between viewers and
 * runners: a viewer's request goes to the runner of one of its own
 * sessions, and the reply and any progress come back to that viewer only;
 * a runner's unsolicited `status_changed` goes to the viewers of that
 * session. The relay never looks inside `data`.
 *
 * @module
 */
import {
  MAX_SERVICE_DATA_BYTES,
  MAX_SERVICE_IN_FLIGHT,
  MAX_SERVICE_REQUEST_ID,
  SERVICE_IDS,
  type ServiceReplyMessage,
} from "../shared/git_api.ts";
import { invalid, RelayError } from "./errors.ts";
import type { RunnerPresence } from "./runner_registry.ts";
import type { SessionRecord } from "./store/sessions.ts";
import { assertNotEnded } from "./session_state.ts";

/** A viewer as the router needs it. */
export interface ServiceViewer {
  readonly principal: { userId: string };
  readonly subs: ReadonlyMap<string, unknown>;
  send(msg: ServiceReplyMessage): void;
}

/** Options of {@linkcode ServiceRouter}. */
export interface ServiceRouterOptions<V extends ServiceViewer> {
  /** A session of `userId`; rejects with the same 404 for foreign and unknown ids. */
  owned: (userId: string, sessionId: string) => Promise<SessionRecord>;
  /**
   * A session in memory by id, whoever owns it (for a runner's unsolicited
   * messages: a session with subscribers is always in memory).
   */
  session: (sessionId: string) => { userId: string; runnerId: string } | undefined;
  runners: RunnerPresence;
  viewersOf: (userId: string) => Iterable<V>;
  log: (line: string) => void;
  /**
   * Hands what a runner held here sends on its own to the other relay nodes
   * (cluster.ts), whose viewers may be the ones watching or asking.
   */
  share?: (runner: { runnerId: string; userId: string }, msg: Record<string, unknown>) => void;
}

/** How long the relay waits for a runner's answer: push talks to a remote, the rest is local. */
const PUSH_WAIT_MS = 130_000;
const OP_WAIT_MS = 45_000;

interface InFlight<V> {
  viewer: V;
  requestId: string;
  sessionId: string;
  serviceId: string;
  runnerId: string;
}

/** Forwards service requests and routes their replies (one per relay). */
export class ServiceRouter<V extends ServiceViewer> {
  readonly #opts: ServiceRouterOptions<V>;
  readonly #inFlight = new Map<string, InFlight<V>>();
  readonly #count = new WeakMap<V, number>();
  #next = 1;
  /** Request ids unique across relay nodes: a runner's progress notice may come back through another. */
  readonly #prefix = `s${crypto.randomUUID().slice(0, 8)}-`;

  constructor(options: ServiceRouterOptions<V>) {
    this.#opts = options;
  }

  /**
   * A viewer's `service_message`: checked, forwarded, answered to that viewer
   * alone. Resolves once it is sent to the runner (or refused), not answered.
   */
  async fromViewer(v: V, msg: Record<string, unknown>): Promise<void> {
    const requestId = typeof msg.requestId === "string" ? msg.requestId : "";
    const serviceId = typeof msg.serviceId === "string" ? msg.serviceId.slice(0, 100) : "";
    const sessionId = typeof msg.sessionId === "string" ? msg.sessionId.slice(0, 100) : "";
    const fail = (err: unknown) => {
      const e = err instanceof RelayError ? err : null;
      if (!e) this.#opts.log(`service message failed: ${err}`);
      v.send({
        t: "service_message",
        serviceId,
        sessionId,
        ...(requestId ? { requestId } : {}),
        ok: false,
        code: e?.code ?? "internal",
        message: e?.message ?? "Internal error",
      });
    };
    try {
      if (!requestId || requestId.length > MAX_SERVICE_REQUEST_ID) {
        throw invalid(`requestId must be a string of 1 to ${MAX_SERVICE_REQUEST_ID} characters`);
      }
      if (!sessionId) throw invalid("sessionId is required");
      if (!(SERVICE_IDS as readonly string[]).includes(serviceId)) {
        throw invalid(
          `Unknown service: '${serviceId}' (known: ${SERVICE_IDS.join(", ")})`,
          "unknown_service",
        );
      }
      if (typeof msg.op !== "string" || msg.op === "" || msg.op.length > 100) {
        throw invalid("op must be a non-empty string");
      }
      const data = msg.data ?? {};
      if (typeof data !== "object" || data === null || Array.isArray(data)) {
        throw invalid("data must be an object");
      }
      const size = JSON.stringify(data).length;
      if (size > MAX_SERVICE_DATA_BYTES) {
        throw invalid(
          `data must be at most ${MAX_SERVICE_DATA_BYTES} bytes (has ${size})`,
          "too_large",
        );
      }
      const inFlight = this.#count.get(v) ?? 0;
      if (inFlight >= MAX_SERVICE_IN_FLIGHT) {
        throw new RelayError(
          "rate_limited",
          "too_many_requests",
          `At most ${MAX_SERVICE_IN_FLIGHT} service requests may be in flight at once`,
        );
      }
      // Counted while the session is looked up, so requests sent meanwhile count too.
      this.#count.set(v, inFlight + 1);
      let s: SessionRecord;
      try {
        s = await this.#opts.owned(v.principal.userId, sessionId);
      } finally {
        this.#count.set(v, Math.max(0, (this.#count.get(v) ?? 1) - 1));
      }
      assertNotEnded(s);
      const link = this.#opts.runners.connected(s.runnerId);
      const relayId = `${this.#prefix}${this.#next++}`;
      this.#inFlight.set(relayId, {
        viewer: v,
        requestId,
        sessionId,
        serviceId,
        runnerId: s.runnerId,
      });
      this.#count.set(v, (this.#count.get(v) ?? 0) + 1);
      const op = msg.op;
      link.request(
        "service_message",
        { sessionId, serviceId, op, data, requestId: relayId },
        op === "push" ? PUSH_WAIT_MS : OP_WAIT_MS,
      ).then(
        (result) =>
          v.send({ t: "service_message", serviceId, requestId, sessionId, ok: true, data: result }),
        fail,
      ).finally(() => {
        this.#inFlight.delete(relayId);
        this.#count.set(v, Math.max(0, (this.#count.get(v) ?? 1) - 1));
      });
    } catch (err) {
      fail(err);
    }
  }

  /**
   * A runner's `service_message`: progress of a request in flight (sent to
   * the viewer that asked) or an unsolicited message about one of its
   * sessions (sent to the viewers subscribed to it). Anything else is dropped.
   */
  fromRunner(link: { runnerId: string; userId: string }, msg: Record<string, unknown>): void {
    if (this.#deliver(link, msg) === false) this.#opts.share?.(link, msg);
  }

  /** What a runner held by another relay node sent (cluster.ts): told to the viewers here. */
  fromNode(runner: { runnerId: string; userId: string }, msg: Record<string, unknown>): void {
    this.#deliver(runner, msg);
  }

  /**
   * Hands a runner's message to the viewer that asked (true) or to the
   * session's viewers here (false: other nodes may have some too); nothing
   * for a malformed one.
   */
  #deliver(
    link: { runnerId: string; userId: string },
    msg: Record<string, unknown>,
  ): boolean | undefined {
    const { sessionId, serviceId, op } = msg;
    if (typeof sessionId !== "string" || typeof serviceId !== "string" || typeof op !== "string") {
      return;
    }
    const data = msg.data ?? null;
    if (typeof msg.requestId === "string") {
      const f = this.#inFlight.get(msg.requestId);
      if (!f) return false;
      if (f.runnerId !== link.runnerId || f.sessionId !== sessionId) return;
      f.viewer.send({
        t: "service_message",
        serviceId: f.serviceId,
        requestId: f.requestId,
        sessionId,
        op: op.slice(0, 100),
        data,
      });
      return true;
    }
    const s = this.#opts.session(sessionId);
    if (s && (s.runnerId !== link.runnerId || s.userId !== link.userId)) return;
    for (const v of this.#opts.viewersOf(link.userId)) {
      if (!s || !v.subs.has(sessionId)) continue;
      v.send({ t: "service_message", serviceId, sessionId, op: op.slice(0, 100), data });
    }
    return false;
  }
}
