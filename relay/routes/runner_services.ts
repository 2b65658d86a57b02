/**
 * `GET /api/runners/{runnerId}/services`: what the runner's services offer
 * (relay/runner_services.ts), as the runner last announced it. Owner only:
 * a foreign or unknown runner is 404 alike; an offline one 503.
 *
 * @module
 */
import { Hono } from "hono";
import type { RunnerServicesResponse } from "../../shared/services_api.ts";
import { principal, type RelayEnv } from "../_http.ts";
import type { RunnerRegistry } from "../runner_registry.ts";
import type { RunnerServices } from "../runner_services.ts";
import { routeDoc } from "./_openapi.ts";

/** The runner services route, mounted under `/api/runners`. */
export function runnerServiceRoutes(
  runners: RunnerRegistry,
  services: RunnerServices,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  app.get(
    "/:runnerId/services",
    routeDoc({
      tag: "Runners",
      summary: "The runner's services: their ids, panels, sigil definitions and status",
      description: "`serviceIds` lists the running services; `panels` those serving a panel " +
        "(reached through the tunnel on `port`); `services` every discovered one, a failed one " +
        "with its `error` (bad manifest, init threw). As announced after the runner loaded them.",
      auth: "principal",
      ok: "`{serviceIds, panels: [{id, title, icon, port}], sigils, services: [{id, label, " +
        "icon, source, status, error?}]}`",
      errors: {
        404: "`not_found`: no such runner, or not the caller's",
        503: "`runner_offline`: the runner is not connected",
      },
    }),
    async (c) => {
      const p = principal(c);
      const runnerId = c.req.param("runnerId");
      await runners.connectedRunner(p.userId, runnerId);
      return c.json(services.view(runnerId) satisfies RunnerServicesResponse);
    },
  );
  return app;
}
