/**
 * The bus as `GET /metrics` sees it: a {@linkcode Bus} that times each
 * request to another node's runner and counts the events that cross, into
 * plain numbers ({@linkcode BusMeter}) read at scrape time.
 *
 * @module
 */
import type { Bus, EventSubscriber, EventSubscription, StoredEvent } from "./bus/mod.ts";
import { PlainHistogram } from "./meter.ts";

/**
 * Upper bounds (seconds) of the bus request buckets: a request answered by a
 * runner on another node is a loopback or LAN round trip to nats-server and
 * on to the runner (~1–5 ms), plus whatever the runner does (a file read, a
 * spawn: up to seconds).
 */
export const BUS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Counts of what crossed the bus. */
export class BusMeter {
  /** Seconds each request to a runner on another node took (answered or failed). */
  readonly requests = new PlainHistogram(BUS_BUCKETS);
  /** Events this node published after committing them. */
  eventsPublished = 0;
  /** Events that arrived from other nodes for the sessions this node's viewers watch. */
  eventsReceived = 0;

  constructor(readonly bus: Bus) {}

  /** The bus, counted: what the hub uses instead of `bus`. */
  metered(): Bus {
    const bus = this.bus;
    return {
      get nodeId() {
        return bus.nodeId;
      },
      get connected() {
        return bus.connected;
      },
      serveRunner: (runnerId, handler) => bus.serveRunner(runnerId, handler),
      requestRunner: async (runnerId, op, data, timeoutMs) => {
        const started = performance.now();
        try {
          return await bus.requestRunner(runnerId, op, data, timeoutMs);
        } finally {
          this.requests.observe((performance.now() - started) / 1000);
        }
      },
      publishEvents: (userId: string, sessionId: string, events: readonly StoredEvent[]) => {
        this.eventsPublished += events.length;
        bus.publishEvents(userId, sessionId, events);
      },
      subscribeEvents: (sessionId: string, subscriber: EventSubscriber): EventSubscription => {
        return bus.subscribeEvents(sessionId, {
          onEvents: (events, userId) => {
            this.eventsReceived += events.length;
            subscriber.onEvents(events, userId);
          },
          onGap: (gap) => subscriber.onGap(gap),
        });
      },
      publishState: (userId, state) => bus.publishState(userId, state),
      subscribeState: (userId, subscriber) => bus.subscribeState(userId, subscriber),
      serveStreams: (runnerId, target) => bus.serveStreams(runnerId, target),
      streamsTo: (runnerId) => bus.streamsTo(runnerId),
      nodes: () => bus.nodes(),
      flush: () => bus.flush(),
      close: () => bus.close(),
    };
  }
}
