/**
 * The bus of a relay that is one process: plain maps and direct calls, no
 * copies, no serialisation. What the embedded default uses.
 *
 * @module
 */
import { offline, RelayError } from "../errors.ts";
import { errorToWire, newNodeId, SeqCursor, wireToError, withTimeout } from "./_common.ts";
import type {
  Bus,
  BusOptions,
  EventSubscriber,
  EventSubscription,
  NodeInfo,
  RunnerHandler,
  StateSubscriber,
  StoredEvent,
  StreamTarget,
} from "./types.ts";

/** One node's bus: every subscriber and runner is in this process. */
export class LocalBus implements Bus {
  readonly nodeId = newNodeId();
  readonly connected = true;
  readonly #runners = new Map<string, RunnerHandler>();
  readonly #events = new Map<string, Set<SeqCursor>>();
  readonly #states = new Map<string, Set<StateSubscriber>>();
  readonly #streams = new Map<string, StreamTarget>();
  readonly #log: (line: string) => void;

  constructor(options: BusOptions = {}) {
    this.#log = options.log ?? (() => {});
  }

  serveRunner(runnerId: string, handler: RunnerHandler): () => void {
    this.#runners.set(runnerId, handler);
    return () => {
      if (this.#runners.get(runnerId) === handler) this.#runners.delete(runnerId);
    };
  }

  async requestRunner(
    runnerId: string,
    op: string,
    data: unknown,
    timeoutMs: number,
  ): Promise<unknown> {
    const handler = this.#runners.get(runnerId);
    if (!handler) throw offline();
    try {
      return await withTimeout(handler(op, data, timeoutMs), op, timeoutMs);
    } catch (err) {
      throw err instanceof RelayError ? err : wireToError(errorToWire(err));
    }
  }

  serveStreams(runnerId: string, target: StreamTarget): () => void {
    this.#streams.set(runnerId, target);
    return () => {
      if (this.#streams.get(runnerId) === target) this.#streams.delete(runnerId);
    };
  }

  /** The serving target itself: one process, nothing to cross. */
  streamsTo(runnerId: string): Promise<StreamTarget | null> {
    return Promise.resolve(this.#streams.get(runnerId) ?? null);
  }

  publishEvents(userId: string, sessionId: string, events: readonly StoredEvent[]): void {
    const cursors = this.#events.get(sessionId);
    if (!cursors || events.length === 0) return;
    const list = [...events];
    for (const cursor of [...cursors]) cursor.deliver(list, userId);
  }

  subscribeEvents(sessionId: string, subscriber: EventSubscriber): EventSubscription {
    const cursor = new SeqCursor(subscriber, this.#log);
    let set = this.#events.get(sessionId);
    if (!set) this.#events.set(sessionId, set = new Set());
    set.add(cursor);
    return {
      caughtUp: (seq) => cursor.caughtUp(seq),
      stop: () => {
        set.delete(cursor);
        if (set.size === 0 && this.#events.get(sessionId) === set) this.#events.delete(sessionId);
      },
    };
  }

  publishState(userId: string, state: unknown): void {
    for (const s of [...this.#states.get(userId) ?? []]) {
      try {
        s.onState(state);
      } catch (err) {
        this.#log(`Bus: a state subscriber threw: ${err instanceof Error ? err.message : err}`);
      }
    }
  }

  subscribeState(userId: string, subscriber: StateSubscriber): () => void {
    let set = this.#states.get(userId);
    if (!set) this.#states.set(userId, set = new Set());
    set.add(subscriber);
    return () => {
      set.delete(subscriber);
      if (set.size === 0 && this.#states.get(userId) === set) this.#states.delete(userId);
    };
  }

  nodes(): NodeInfo[] {
    return [{ nodeId: this.nodeId, runners: [...this.#runners.keys()], seenAt: Date.now() }];
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.#runners.clear();
    this.#events.clear();
    this.#states.clear();
    this.#streams.clear();
    return Promise.resolve();
  }
}
