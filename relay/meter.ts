/**
 * The relay's own counts for `GET /metrics`, kept as plain numbers on the
 * hot paths: the metrics library (prom-client, ~MBs) is loaded on the
 * first scrape only and reads these through its collect callbacks, so a
 * relay nobody scrapes carries none of it, and no event pays for a
 * library call.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import type { CommitEvents } from "./store/event_writer.ts";

/**
 * Upper bounds (seconds) of the commit latency buckets: an inline commit of
 * a few events takes ~0.1–1 ms on SQLite, a commit through the store thread
 * 1–5 ms, PostgreSQL adds its round trips; past a second something is wrong.
 */
export const COMMIT_BUCKETS = [
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
] as const;

/**
 * How long a failed commit keeps the store check failing when no commit has
 * succeeded since (runners re-send after the relay closes their link, so a
 * lasting fault keeps failing; a healed one clears on the next commit).
 */
export const WRITE_FAILURE_WINDOW_MS = 30_000;

/** A histogram as plain numbers: a count per bucket (the last is +Inf), their sum and count. */
export class PlainHistogram {
  /** Observations per bucket, not cumulative; one more than the bounds (+Inf). */
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Array(bounds.length + 1).fill(0);
  }

  observe(value: number): void {
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** What the metrics read at scrape time, besides the meter's own counts. */
export interface MetricsSource {
  meter: RelayMeter;
  /** Viewer sockets connected, and the bytes each has not sent yet. */
  viewerQueues(): { viewers: number; queuedBytes: number };
  /** Runner control links connected. */
  runners(): number;
  /** Sessions of connected runners that have not ended; events received, not yet committed. */
  sessions(): { live: number; pendingEvents: number };
  /** Events handed to viewer sockets so far. */
  eventsSent(): number;
  /** What crossed the bus between relay nodes; null for a relay alone (no `--bus`). */
  bus?: {
    connected(): boolean;
    requests: PlainHistogram;
    eventsPublished(): number;
    eventsReceived(): number;
  } | null;
}

/** The Prometheus text of a relay, built by ./metrics_text.ts on the first scrape. */
export interface MetricsExposition {
  text(): Promise<string>;
  /** Stops its event-loop sampler. */
  close(): void;
}

/** Options of {@linkcode RelayMeter}. */
export interface RelayMeterOptions {
  /** Milliseconds since the epoch (default Date.now). */
  now?: () => number;
}

/** Counts the relay keeps for its metrics and its store check. */
export class RelayMeter {
  /** HTTP answers by the first digit of their status (index 1 to 5). */
  readonly http: number[] = [0, 0, 0, 0, 0, 0];
  /** Seconds each commit of the event log took (successful or not). */
  readonly commits = new PlainHistogram(COMMIT_BUCKETS);
  /** Events committed to the event log. */
  eventsStored = 0;
  /** Commits that failed (their events are re-sent by the runners). */
  commitFailures = 0;
  /** Events of the commit in flight. */
  inFlightEvents = 0;
  readonly #now: () => number;
  #lastFailure: { at: number; message: string } | null = null;

  constructor(options: RelayMeterOptions = {}) {
    this.#now = options.now ?? Date.now;
  }

  /** `commit`, timed and counted. */
  metered(commit: CommitEvents): CommitEvents {
    return (batch) => {
      let events = 0;
      for (const c of batch) events += c.events.length;
      this.inFlightEvents += events;
      const started = performance.now();
      const done = () => {
        this.inFlightEvents -= events;
        this.commits.observe((performance.now() - started) / 1000);
      };
      return commit(batch).then(() => {
        done();
        this.eventsStored += events;
        this.#lastFailure = null;
      }, (err) => {
        done();
        this.commitFailures++;
        this.#lastFailure = { at: this.#now(), message: String(err?.message ?? err) };
        throw err;
      });
    };
  }

  /**
   * Why the store cannot be written to, or null: the last commit failed
   * within {@linkcode WRITE_FAILURE_WINDOW_MS} and none succeeded since.
   */
  writeTrouble(): string | null {
    const f = this.#lastFailure;
    if (!f || this.#now() - f.at > WRITE_FAILURE_WINDOW_MS) return null;
    const ago = Math.round((this.#now() - f.at) / 1000);
    return `Storing events failed ${ago} s ago: ${f.message}`;
  }

  /** Counts every answer of the app by status class. */
  countHttp(): MiddlewareHandler {
    return async (c, next) => {
      try {
        await next();
      } finally {
        this.http[Math.min(5, Math.max(1, Math.floor(c.res.status / 100)))]!++;
      }
    };
  }
}
