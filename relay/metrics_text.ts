/**
 * The Prometheus text of `GET /metrics`, through prom-client. Loaded on the
 * first scrape (operations.ts imports it dynamically): an unscraped relay
 * carries neither the library nor the event-loop sampler. Every value is
 * read at scrape time from plain counts (meter.ts, the hub) in the
 * metrics' collect callbacks; no label grows with sessions, viewers or
 * users, so a scrape's size does not either.
 *
 * @module
 */
import { Counter, Gauge, type Metric, Registry } from "prom-client";
import { type MetricsExposition, type MetricsSource, PlainHistogram } from "./meter.ts";

/** How often the event loop's lag is sampled once metrics are scraped (ms). */
const LAG_SAMPLE_MS = 500;
/** Upper bounds (seconds) of the lag buckets: a turn over 50 ms is felt by every viewer. */
const LAG_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** Builds the registry over `src` and starts sampling the event loop. */
export function metricsExposition(src: MetricsSource): MetricsExposition {
  const registry = new Registry();
  const registers = [registry];
  const counter = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read());
      },
    });

  counter(
    "baton_events_ingested_total",
    "Session events committed to the event log (from runners and the relay itself)",
    () => src.meter.eventsStored,
  );
  counter(
    "baton_events_sent_total",
    "Session events sent to viewers, live and catching up",
    () => src.eventsSent(),
  );
  counter(
    "baton_commit_failures_total",
    "Commits of the event log that failed (their events are sent again by the runners)",
    () => src.meter.commitFailures,
  );
  new Counter({
    name: "baton_http_requests_total",
    help: "HTTP requests answered, by status class",
    labelNames: ["code"],
    registers,
    collect() {
      this.reset();
      for (let i = 1; i <= 5; i++) this.inc({ code: `${i}xx` }, src.meter.http[i]!);
    },
  });
  // One look at the viewers serves both gauges.
  let queues = { viewers: 0, queuedBytes: 0 };
  gauge("baton_viewers", "Viewer sockets connected", () => (queues = src.viewerQueues()).viewers);
  gauge(
    "baton_fanout_queued_bytes",
    "Bytes queued on viewer sockets, not yet sent",
    () => queues.queuedBytes,
  );
  gauge("baton_runners", "Runner control links connected", () => src.runners());
  let sessions = { live: 0, pendingEvents: 0 };
  gauge(
    "baton_sessions_live",
    "Sessions of connected runners that have not ended, in memory on this node",
    () => (sessions = src.sessions()).live,
  );
  gauge(
    "baton_events_pending",
    "Events received and not yet committed (waiting, or in the commit in flight)",
    () => sessions.pendingEvents,
  );
  registry.registerMetric(histogram(
    "baton_commit_duration_seconds",
    "Time each commit of the event log took",
    src.meter.commits,
  ));
  const bus = src.bus;
  if (bus) {
    gauge("baton_bus_connected", "1 while this node is connected to the bus", () => {
      return bus.connected() ? 1 : 0;
    });
    counter(
      "baton_bus_events_published_total",
      "Committed events this node published to the other nodes",
      () => bus.eventsPublished(),
    );
    counter(
      "baton_bus_events_received_total",
      "Events from other nodes for the sessions this node's viewers watch",
      () => bus.eventsReceived(),
    );
    registry.registerMetric(histogram(
      "baton_bus_request_duration_seconds",
      "Time each request to a runner held by another node took, answer included",
      bus.requests,
    ));
  }
  const lag = new PlainHistogram(LAG_BUCKETS);
  registry.registerMetric(histogram(
    "baton_event_loop_lag_seconds",
    `How late a timer fired, sampled every ${LAG_SAMPLE_MS} ms from the first scrape on`,
    lag,
  ));
  gauge("process_resident_memory_bytes", "Resident memory size in bytes", () => {
    return Deno.memoryUsage().rss;
  });
  gauge("nodejs_heap_size_used_bytes", "JavaScript heap in use, in bytes", () => {
    return Deno.memoryUsage().heapUsed;
  });
  const started = Math.round(performance.timeOrigin / 1000);
  gauge("process_start_time_seconds", "Start time of the process (Unix seconds)", () => started);

  let timer: ReturnType<typeof setTimeout> | null = null;
  let expected = 0;
  const sample = () => {
    const now = performance.now();
    if (expected > 0) lag.observe(Math.max(0, now - expected) / 1000);
    expected = now + LAG_SAMPLE_MS;
    const next = setTimeout(sample, LAG_SAMPLE_MS);
    Deno.unrefTimer(next);
    timer = next;
  };
  sample();

  return {
    text: () => registry.metrics(),
    close() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}

/**
 * A histogram whose counts are kept by the relay (a {@linkcode PlainHistogram}),
 * handed to the registry as prom-client's own histograms hand theirs: the
 * registry formats the `_bucket`, `_sum` and `_count` samples.
 */
function histogram(name: string, help: string, h: PlainHistogram): Metric {
  const type = "histogram";
  const metric = {
    name,
    help,
    type,
    aggregator: "sum",
    get() {
      const values: {
        value: number;
        labels: Record<string, string | number>;
        metricName: string;
      }[] = [];
      let cumulative = 0;
      for (let i = 0; i <= h.bounds.length; i++) {
        cumulative += h.counts[i]!;
        values.push({
          value: cumulative,
          labels: { le: i < h.bounds.length ? h.bounds[i]! : "+Inf" },
          metricName: `${name}_bucket`,
        });
      }
      values.push({ value: h.sum, labels: {}, metricName: `${name}_sum` });
      values.push({ value: h.count, labels: {}, metricName: `${name}_count` });
      return Promise.resolve({ name, help, type, values, aggregator: "sum" });
    },
  };
  return metric as unknown as Metric;
}
