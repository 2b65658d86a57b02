/**
 * How `GET /ready` and `GET /metrics` appear in the OpenAPI document. The
 * relay serves them itself, outside the API (relay/operations.ts: they stay
 * in the start graph, this module and its libraries do not); the document
 * describes them beside `GET /health`.
 *
 * @module
 */
import type { Handler, Hono } from "hono";
import type { RelayEnv } from "../_http.ts";
import { routeDoc } from "./_openapi.ts";

/** Never called: the document is generated from these routes, requests reach relay/operations.ts. */
const described: Handler<RelayEnv> = (c) => c.body(null, 500);

/** Adds the two routes' descriptions to the app the document is generated from. */
export function operationDocs(documented: Hono<RelayEnv>): void {
  documented.get(
    "/ready",
    routeDoc({
      tag: "Health",
      summary: "Readiness: the store answers and every registered check passes (the bus, if any)",
      description: "Each check has its own time limit (2 s). Failures' messages are shown only " +
        "to callers who may read `/metrics`. Probes arriving together share one run.",
      auth: "none",
      ok: '`{"ok": true, "checks": {"store": {"ok": true, "ms": 0.1}}}`',
      errors: {
        503: "`not_ready`: the body also has `ok: false` and `checks`, naming those that failed",
      },
    }),
    described,
  );
  documented.get(
    "/metrics",
    routeDoc({
      tag: "Health",
      summary: "Prometheus metrics of this node (text exposition 0.0.4)",
      description: "Loopback callers only, unless `BATON_METRICS_TOKEN` is set: then every " +
        "caller sends it as `Authorization: Bearer <token>`. See docs/operations.md.",
      auth: "metrics",
      ok: "`text/plain; version=0.0.4`: counters, gauges and histograms named `baton_*`",
      errors: {
        401:
          "`unauthorized`: `BATON_METRICS_TOKEN` is set and the bearer token is missing or wrong",
        403: "`metrics_forbidden`: no token is set and the caller is not on this host " +
          "(or came through a proxy, or named the relay by a name that is not a loopback one)",
      },
    }),
    described,
  );
}
