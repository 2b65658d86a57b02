/**
 * What both buses share: one subscription's seq cursor (each event once, in
 * order, a jump reported as a gap), errors on the wire between nodes, and
 * the one "runner did not answer" timeout.
 *
 * @module
 */
import { type ErrorKind, HTTP_STATUS, RelayError, timeout } from "../errors.ts";
import type { EventSubscriber, EventSubscription, StoredEvent } from "./types.ts";

/**
 * One subscription's position in its session: drops events at or below what
 * it delivered (or was told it holds), reports a jump as a gap.
 */
export class SeqCursor implements Pick<EventSubscription, "caughtUp"> {
  #last = 0;
  /** Whether anything was delivered or caught up yet (before that, no jump is a gap). */
  #started = false;

  constructor(readonly subscriber: EventSubscriber, readonly log: (line: string) => void) {}

  get last(): number {
    return this.#last;
  }

  caughtUp(seq: number): void {
    if (seq > this.#last) this.#last = seq;
    this.#started = true;
  }

  /** Delivers the new events of a frame (ascending seq). */
  deliver(events: StoredEvent[], userId: string): void {
    let from = 0;
    while (from < events.length && events[from]!.seq <= this.#last) from++;
    if (from === events.length) return;
    const fresh = from === 0 ? events : events.slice(from);
    const first = fresh[0]!.seq;
    if (this.#started && first > this.#last + 1) {
      this.gap({ reason: "seq", after: this.#last, before: first });
    }
    this.#started = true;
    this.#last = fresh[fresh.length - 1]!.seq;
    try {
      this.subscriber.onEvents(fresh, userId);
    } catch (err) {
      this.log(`Bus: an event subscriber threw: ${err instanceof Error ? err.message : err}`);
    }
  }

  /** The session's events reach `seq` (a publisher back from an outage says so). */
  tail(seq: number): void {
    if (!this.#started || seq <= this.#last) return;
    const after = this.#last;
    this.#last = seq;
    this.gap({ reason: "seq", after, before: seq + 1 });
  }

  /** Tells the subscriber it may have missed events after its last one. */
  gap(gap: Parameters<EventSubscriber["onGap"]>[0]): void {
    try {
      this.subscriber.onGap(gap);
    } catch (err) {
      this.log(`Bus: an event subscriber threw: ${err instanceof Error ? err.message : err}`);
    }
  }
}

/** A RelayError as it crosses the bus. */
export interface WireError {
  kind: ErrorKind;
  code: string;
  message: string;
}

/** The wire form of what a runner handler threw: a RelayError keeps its kind, code and message. */
export function errorToWire(err: unknown): WireError {
  if (err instanceof RelayError) return { kind: err.kind, code: err.code, message: err.message };
  return {
    kind: "rejected",
    code: "node_error",
    message: `Relay node failed the request: ${err instanceof Error ? err.message : String(err)}`,
  };
}

/** The RelayError a wire error stands for (an unknown kind is "rejected"). */
export function wireToError(e: Partial<WireError> | undefined): RelayError {
  const kind = typeof e?.kind === "string" && Object.hasOwn(HTTP_STATUS, e.kind)
    ? e.kind
    : "rejected";
  const code = typeof e?.code === "string" && e.code ? e.code : "runner_error";
  const message = typeof e?.message === "string" && e.message ? e.message : "Request failed";
  return new RelayError(kind, code, message);
}

/** The error of a runner request nobody answered in time (the same words as runner_link.ts). */
export function requestTimeout(op: string): RelayError {
  return timeout("runner_timeout", `Runner did not answer '${op}' in time`);
}

/** A runner request from a node that lost the bus: nothing was sent (503, like an offline runner). */
export function cutOff(): RelayError {
  return new RelayError(
    "offline",
    "runner_offline",
    "Runner is not reachable: this relay node is cut off from the bus",
  );
}

/** The handler's answer, or a timeout after `timeoutMs` (the handler keeps running). */
export function withTimeout<T>(p: Promise<T>, op: string, timeoutMs: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(requestTimeout(op)), timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** A node id: unique per process start. */
export function newNodeId(): string {
  return crypto.randomUUID().replaceAll("-", "").slice(0, 16);
}
