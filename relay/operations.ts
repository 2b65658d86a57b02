/**
 * `GET /ready` and `GET /metrics`, the endpoints a load balancer and a
 * Prometheus server use (docs/operations.md, "Readiness and metrics").
 * This module is in the relay's start graph and stays light: the metrics
 * library comes with the first scrape (./metrics_text.ts).
 *
 * Who may read what: `/ready` answers anyone (balancers probe without
 * credentials), with the failures' messages only for callers who may read
 * the metrics. `/metrics` answers loopback callers only, unless
 * `BATON_METRICS_TOKEN` is set; then it takes that token as a bearer token
 * from anyone (and nothing else, loopback included). A request carrying a
 * proxy's forwarding header is never taken for a loopback caller: a reverse
 * proxy on the same host would otherwise publish the metrics.
 *
 * @module
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { type Context, type Handler, Hono } from "hono";
import { METRICS_CONTENT_TYPE, type ReadyResponse } from "../shared/operations_api.ts";
import { errorResponse, type RelayEnv } from "./_http.ts";
import type { BusMeter } from "./bus_meter.ts";
import type { Hub } from "./hub.ts";
import { type MetricsExposition, type MetricsSource, RelayMeter } from "./meter.ts";
import { Readiness } from "./readiness.ts";
import { isEnded } from "./session_state.ts";

export { Readiness, RelayMeter };

/** What {@linkcode relayOperations} is wired to. */
export interface RelayOperationsOptions {
  /** The store's trivial query: throws when the database cannot answer. */
  storeAnswers: () => Promise<void>;
  hub: Hub;
  meter: RelayMeter;
  /** What crossed the bus between relay nodes (with `--bus` only). */
  busMeter?: BusMeter | null;
  /** The relay's options: its log and `metricsToken`. */
  options: { log?: (line: string) => void; metricsToken?: string };
}

/** The operations endpoints of a relay, wired. */
export interface RelayOperations {
  /** `GET /ready` and `GET /metrics`, to mount where the host check has run. */
  routes: Hono<RelayEnv>;
  /** The checks of `GET /ready`: the store's is there; the wiring adds others (the bus). */
  readiness: Readiness;
  /** Stops the metrics' event-loop sampler (the relay closes). */
  close(): void;
}

/**
 * Wires readiness and metrics to a relay: counts every answer of `app` by
 * status class (call it before any other middleware is added), registers
 * the store's readiness check (its trivial query, and no commit failing
 * lately) and builds the two routes.
 */
export function relayOperations(app: Hono<RelayEnv>, o: RelayOperationsOptions): RelayOperations {
  app.use("*", o.meter.countHttp());
  const readiness = new Readiness(o.options.log ? { log: o.options.log } : {});
  readiness.add("store", async () => {
    await o.storeAnswers();
    const trouble = o.meter.writeTrouble();
    if (trouble) throw new Error(trouble);
  });
  // A node cut off from the bus serves only its own runners and viewers: not ready for a balancer.
  const bus = o.busMeter?.bus;
  if (bus) {
    readiness.add("bus", async () => {
      if (!bus.connected) throw new Error("Cut off from the bus");
      await bus.flush();
    });
  }
  const handlers = operationRoutes({
    readiness,
    source: hubMetrics(o.hub, o.meter, o.busMeter ?? null),
    ...(o.options.metricsToken ? { metricsToken: o.options.metricsToken } : {}),
  });
  const routes = new Hono<RelayEnv>();
  routes.get("/ready", handlers.ready);
  routes.get("/metrics", handlers.metrics);
  return { routes, readiness, close: handlers.close };
}

/** Options of {@linkcode operationRoutes}. */
export interface OperationOptions {
  readiness: Readiness;
  /** What the metrics read at scrape time. */
  source: MetricsSource;
  /** `BATON_METRICS_TOKEN`: required of every scraper when set. */
  metricsToken?: string;
}

/** The two handlers, and a way to stop what the first scrape started. */
export interface OperationRoutes {
  ready: Handler<RelayEnv>;
  metrics: Handler<RelayEnv>;
  /** Stops the metrics' event-loop sampler (the relay closes). */
  close(): void;
}

/** Headers a reverse proxy adds: a request with one came through a proxy, not from this host. */
const FORWARDING_HEADERS = ["forwarded", "x-forwarded-for", "x-real-ip"];

/** Builds the handlers of `GET /ready` and `GET /metrics`. */
export function operationRoutes(options: OperationOptions): OperationRoutes {
  const tokenDigest = options.metricsToken ? digest(options.metricsToken) : null;
  let exposition: Promise<MetricsExposition> | null = null;
  let loaded: MetricsExposition | null = null;
  let closed = false;

  /** Null when the caller may read the metrics, else why not (status, code, message). */
  const refusal = (c: Context<RelayEnv>): [401 | 403, string, string] | null => {
    if (tokenDigest) {
      const m = /^Bearer ([\x21-\x7e]+)$/i.exec(c.req.header("authorization") ?? "");
      if (m && timingSafeEqual(digest(m[1]!), tokenDigest)) return null;
      return [401, "unauthorized", "Metrics need the bearer token (BATON_METRICS_TOKEN)"];
    }
    if (isLoopback(c) && loopbackHost(c.req.header("host") ?? new URL(c.req.url).host)) {
      if (!FORWARDING_HEADERS.some((h) => c.req.header(h) !== undefined)) return null;
    }
    return [
      403,
      "metrics_forbidden",
      "Metrics are served to loopback callers only; set BATON_METRICS_TOKEN to scrape from elsewhere",
    ];
  };

  const ready: Handler<RelayEnv> = async (c) => {
    const report = await options.readiness.run();
    const detailed = refusal(c) === null;
    const checks: ReadyResponse["checks"] = {};
    for (const [name, r] of Object.entries(report.checks)) {
      checks[name] = detailed || r.ok ? r : { ok: r.ok, ms: r.ms };
    }
    c.header("cache-control", "no-store");
    if (report.ok) return c.json({ ok: true, checks } satisfies ReadyResponse);
    const failed = Object.keys(checks).filter((n) => !checks[n]!.ok);
    return c.json(
      {
        ok: false,
        checks,
        error: { code: "not_ready", message: `Not ready: ${failed.join(", ")}` },
      } satisfies ReadyResponse,
      503,
    );
  };

  const metrics: Handler<RelayEnv> = async (c) => {
    const refused = refusal(c);
    if (refused) {
      const [status, code, message] = refused;
      const headers: Record<string, string> = status === 401
        ? { "www-authenticate": 'Bearer realm="baton metrics"' }
        : {};
      return errorResponse(c, status, code, message, headers);
    }
    exposition ??= import("./metrics_text.ts").then((m) => {
      loaded = m.metricsExposition(options.source);
      if (closed) loaded.close();
      return loaded;
    }).catch((err) => {
      exposition = null;
      throw err;
    });
    const text = await (await exposition).text();
    return c.body(text, 200, { "content-type": METRICS_CONTENT_TYPE, "cache-control": "no-store" });
  };

  return {
    ready,
    metrics,
    close() {
      closed = true;
      (loaded as MetricsExposition | null)?.close();
    },
  };
}

/** What the metrics read of the hub at scrape time (nothing is counted per event here). */
export function hubMetrics(hub: Hub, meter: RelayMeter, bus: BusMeter | null): MetricsSource {
  return {
    meter,
    bus: bus && {
      connected: () => bus.bus.connected,
      requests: bus.requests,
      eventsPublished: () => bus.eventsPublished,
      eventsReceived: () => bus.eventsReceived,
    },
    viewerQueues() {
      let viewers = 0;
      let queuedBytes = 0;
      for (const v of hub.fanout.viewers()) {
        viewers++;
        queuedBytes += v.bufferedAmount;
      }
      return { viewers, queuedBytes };
    },
    runners: () => hub.runners.links().length,
    sessions() {
      let live = 0;
      let pendingEvents = meter.inFlightEvents;
      for (const s of hub.events.liveSessions.values()) {
        pendingEvents += s.pending.length;
        if (!isEnded(s.view.status) && hub.runners.link(s.runnerId)) live++;
      }
      return { live, pendingEvents };
    },
    eventsSent: () => hub.fanout.eventsSent,
  };
}

function digest(text: string): Uint8Array {
  return createHash("sha256").update(text).digest();
}

/**
 * Whether a Host header names this host by a loopback name: a page whose
 * own name resolves to 127.0.0.1 (DNS rebinding) sends its own name, and a
 * relay bound to every address has no host check to stop it.
 */
function loopbackHost(host: string): boolean {
  return /^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])(:\d{1,5})?$/i.test(host);
}

/** Whether the request's peer is this host (127.0.0.0/8 or ::1, also as IPv4-mapped). */
function isLoopback(c: Context<RelayEnv>): boolean {
  const info = c.env as { remoteAddr?: { hostname?: string } } | undefined;
  const host = (info?.remoteAddr?.hostname ?? "").replace(/^::ffff:/i, "");
  return host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
