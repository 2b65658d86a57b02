/**
 * `GET /api/runners/{runnerId}/sandbox-status` and `PUT .../sandbox-config`:
 * the runner's agent sandbox (runner/sandbox/). Only the runner's owner, by
 * session cookie (spec, Authentication rule 3): an API key is refused, so a
 * key an agent might hold cannot loosen the sandbox around it.
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { z } from "zod";
import {
  SANDBOX_MODES,
  type SandboxConfigSaved,
  type SandboxStatus,
} from "../../shared/sandbox_api.ts";
import { HttpError, principal, readJson, type RelayEnv } from "../_http.ts";
import { rejected } from "../errors.ts";
import type { RunnerRegistry } from "../runner_registry.ts";
import { routeDoc, RUNNER_ERRORS } from "./_openapi.ts";

const TIMEOUT_MS = 10_000;

const Strings = z.array(z.string().max(4096)).max(1000).nullable().optional();
const Flag = z.boolean().nullable().optional();

/** A partial `sandbox` config: the spec's keys checked, any other key passed through. */
const ConfigPatch = z.looseObject({
  mode: z.enum(SANDBOX_MODES).nullable().optional(),
  filesystem: z.looseObject({ denyRead: Strings, allowWrite: Strings, denyWrite: Strings })
    .nullable().optional(),
  network: z.looseObject({
    allowedDomains: Strings,
    deniedDomains: Strings,
    allowUnixSockets: Strings,
    allowLocalBinding: Flag,
    allowAllUnixSockets: Flag,
  }).nullable().optional(),
  failClosed: Flag,
});

const Violation = z.object({
  timestamp: z.string().max(40),
  operation: z.enum(["read", "write", "network"]),
  target: z.string().max(4096),
  reason: z.string().max(1000),
});
const Config = z.record(z.string(), z.unknown());
const StatusAnswer = z.object({
  mode: z.enum(SANDBOX_MODES),
  active: z.boolean(),
  platform: z.enum(["darwin", "linux", "win32"]),
  // An older runner does not send it.
  hiddenVariables: z.array(z.string().max(256)).max(256).default([]),
  violations: z.number().int().nonnegative(),
  recentViolations: z.array(Violation).max(20),
  config: Config,
  inactiveReason: z.string().max(1000).optional(),
}) satisfies z.ZodType<SandboxStatus>;
const SavedAnswer = z.object({
  saved: z.literal(true),
  resolvedConfig: Config,
  message: z.string().max(1000),
}) satisfies z.ZodType<SandboxConfigSaved>;

/** The sandbox routes, mounted under `/api/runners`. */
export function sandboxRoutes(runners: RunnerRegistry): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  /** The caller's runner id, after the cookie and ownership checks (foreign and unknown: 404). */
  const owned = async (c: Context<RelayEnv>) => {
    const p = principal(c);
    const runnerId = c.req.param("runnerId") ?? "";
    await runners.assertOwned(p.userId, runnerId);
    if (p.via !== "cookie") {
      throw new HttpError(403, "cookie_required", "Sign in: an API key cannot reach the sandbox");
    }
    return { userId: p.userId, runnerId };
  };
  const errors = { 404: "`not_found`: no such runner, or not the caller's", ...RUNNER_ERRORS };

  app.get(
    "/:runnerId/sandbox-status",
    routeDoc({
      tag: "Runners",
      summary: "The runner's agent sandbox: mode, whether it is enforced, violations, config",
      auth: "cookie",
      ok: "`{mode, active, platform, violations, recentViolations (20, newest first), config, " +
        "inactiveReason?}`",
      errors,
    }),
    async (c) => {
      const { userId, runnerId } = await owned(c);
      const link = await runners.connectedRunner(userId, runnerId);
      const res = StatusAnswer.safeParse(await link.request("sandbox_status", {}, TIMEOUT_MS));
      if (!res.success) {
        throw rejected("bad_runner_answer", "Runner sent an invalid answer to 'sandbox_status'");
      }
      return c.json(res.data satisfies SandboxStatus);
    },
  );

  app.put(
    "/:runnerId/sandbox-config",
    routeDoc({
      tag: "Runners",
      summary: "Deep-merge a partial sandbox config into the runner's global config file",
      description: "`null` removes a key, objects merge key by key, arrays and scalars replace. " +
        "Sessions started afterwards use it.",
      auth: "cookie",
      body: ConfigPatch,
      ok: "`{saved: true, resolvedConfig, message}`",
      errors: {
        400: "`invalid_body`: a mode other than none, basic, full, or a non-string array entry; " +
          "`bad_request`: the merged config is invalid (the runner says why)",
        ...errors,
      },
    }),
    async (c) => {
      // The body first, as every JSON route does (a bad one is 400 for anyone).
      const config = await readJson(c, ConfigPatch);
      const { userId, runnerId } = await owned(c);
      const link = await runners.connectedRunner(userId, runnerId);
      const res = SavedAnswer.safeParse(
        await link.request("sandbox_config", { config }, TIMEOUT_MS),
      );
      if (!res.success) {
        throw rejected("bad_runner_answer", "Runner sent an invalid answer to 'sandbox_config'");
      }
      return c.json(res.data satisfies SandboxConfigSaved);
    },
  );
  return app;
}
