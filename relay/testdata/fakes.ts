/**
 * Fakes for the relay's unit tests: a clock whose time and turns the test
 * moves, a viewer socket that reads or stalls, a runner link that records
 * what it is sent. Nothing here waits.
 *
 * @module
 */
import type { RelayToViewer } from "../../shared/protocol.ts";
import type { Clock } from "../_clock.ts";
import type { FanoutViewer, Subscription } from "../fanout.ts";
import type { RunnerConnection } from "../runner_registry.ts";

interface Timer {
  at: number;
  fn: () => void;
  every: number | null;
}

/** A clock that moves only when told: `advance` fires timers, `endTurn` runs immediates. */
export class FakeClock implements Clock {
  #now: number;
  #nextId = 1;
  readonly #timers = new Map<number, Timer>();
  #immediates: (() => void)[] = [];

  constructor(start = Date.UTC(2030, 0, 1)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): number {
    const id = this.#nextId++;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), fn, every: null });
    return id;
  }

  clearTimeout(id: number): void {
    this.#timers.delete(id);
  }

  setInterval(fn: () => void, ms: number): number {
    const id = this.#nextId++;
    this.#timers.set(id, { at: this.#now + ms, fn, every: ms });
    return id;
  }

  clearInterval(id: number): void {
    this.#timers.delete(id);
  }

  setImmediate(fn: () => void): void {
    this.#immediates.push(fn);
  }

  /** Ends the current turn of the loop: runs the immediates queued, and any they queue. */
  endTurn(): void {
    while (this.#immediates.length > 0) {
      const run = this.#immediates;
      this.#immediates = [];
      for (const fn of run) fn();
    }
  }

  /**
   * Ends the current turn, then moves time forward, firing the timers that
   * come due in order, each in a turn of its own.
   */
  advance(ms: number): void {
    this.endTurn();
    const end = this.#now + ms;
    while (true) {
      let next: [number, Timer] | undefined;
      for (const entry of this.#timers) {
        if (entry[1].at <= end && (!next || entry[1].at < next[1].at)) next = entry;
      }
      if (!next) break;
      const [id, t] = next;
      this.#now = Math.max(this.#now, t.at);
      if (t.every === null) this.#timers.delete(id);
      else t.at += t.every;
      t.fn();
      this.endTurn();
    }
    this.#now = end;
  }

  /** Timers and intervals not fired or cleared yet. */
  get pendingTimers(): number {
    return this.#timers.size;
  }
}

/**
 * A viewer's socket. A reading one sends everything at once; a stalled one
 * keeps every frame waiting (`bufferedAmount` grows) until `drain`.
 */
export class FakeViewer implements FanoutViewer {
  readonly principal: { userId: string };
  readonly subs = new Map<string, Subscription>();
  closed = false;
  reading: boolean;
  bufferedAmount = 0;
  /** Every frame handed to the socket, in order. */
  readonly frames: string[] = [];

  constructor(options: { userId?: string; reading?: boolean } = {}) {
    this.principal = { userId: options.userId ?? "u1" };
    this.reading = options.reading ?? true;
  }

  send(msg: RelayToViewer): void {
    this.sendRaw(JSON.stringify(msg));
  }

  sendRaw(frame: string): void {
    if (this.closed) return;
    this.frames.push(frame);
    if (!this.reading) this.bufferedAmount += frame.length;
  }

  /** The socket sent everything it held (and reads from now on when `reading`). */
  drain(reading = this.reading): void {
    this.bufferedAmount = 0;
    this.reading = reading;
  }

  /** The frames as messages. */
  messages(): (RelayToViewer & { events?: { seq: number }[] })[] {
    return this.frames.map((f) => JSON.parse(f));
  }

  /** The seqs of every event received, in the order received. */
  seqs(): number[] {
    return this.messages().flatMap((m) => m.t === "events" ? m.events!.map((e) => e.seq) : []);
  }

  /** The frames of type `t`. */
  of<T extends RelayToViewer["t"]>(t: T): Extract<RelayToViewer, { t: T }>[] {
    return this.messages().filter((m) => m.t === t) as Extract<RelayToViewer, { t: T }>[];
  }
}

/** A runner's link that records what it is sent and whether it was closed. */
export class FakeLink implements RunnerConnection {
  readonly pendingSpawns = new Set<string>();
  readonly sent: { t: string; [k: string]: unknown }[] = [];
  closedWith: { code: number; reason: string } | null = null;

  constructor(
    readonly runnerId = "r1",
    readonly userId = "u1",
    readonly keyId: string | null = null,
  ) {}

  send(msg: unknown): void {
    this.sent.push(msg as { t: string });
  }

  request(): Promise<unknown> {
    return Promise.resolve({});
  }

  close(code: number, reason: string): void {
    this.closedWith = { code, reason };
  }

  /** The acks received, as `sessionId:seq`. */
  acks(): string[] {
    return this.sent.filter((m) => m.t === "ack").map((m) => `${m.sessionId}:${m.seq}`);
  }
}

/** Stored events `from..to` with JSON of about `bytes` each. */
export function storedEvents(
  from: number,
  to: number,
  bytes = 40,
): { seq: number; json: string }[] {
  const out = [];
  for (let seq = from; seq <= to; seq++) {
    const head = `{"seq":${seq},"ts":0,"e":{"type":"message_update","d":"`;
    out.push({ seq, json: head + "x".repeat(Math.max(0, bytes - head.length - 3)) + '"}}' });
  }
  return out;
}
