/**
 * `GET /api/runners/{runnerId}/usage`: token and cost totals the runner
 * computes from pi's session files (runner/workspace/usage.ts). The relay
 * checks the range and ownership, asks, and passes on only an answer of the
 * documented shape.
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import {
  USAGE_MAX_SESSIONS,
  USAGE_RANGES,
  type UsageRange,
  type UsageResponse,
} from "../../shared/usage_api.ts";
import { principal, type RelayEnv } from "../_http.ts";
import { invalid, rejected } from "../errors.ts";
import type { RunnerRegistry } from "../runner_registry.ts";
import { routeDoc, RUNNER_ERRORS } from "./_openapi.ts";

/**
 * A cold index reads every session file once (10k files of ~11 KB: ~7 s on a
 * 2-core machine); later answers take ~0.1 s. A minute leaves room for far
 * larger histories on the first call.
 */
const USAGE_TIMEOUT_MS = 60_000;

const Count = z.number().finite().nonnegative();
const Text = z.string().max(1000).nullable();
const Amounts = { inputTokens: Count, outputTokens: Count, costUsd: Count };

/** The runner's answer, checked before it reaches the caller (unknown keys are dropped). */
const Answer = z.object({
  ok: z.literal(true),
  range: z.enum(USAGE_RANGES),
  totalInputTokens: Count,
  totalOutputTokens: Count,
  totalCostUsd: Count,
  totalCacheReadTokens: Count,
  totalCacheWriteTokens: Count,
  sessions: z.array(z.object({
    sessionId: Text,
    piSessionId: Text,
    cwd: Text,
    model: Text,
    startedAt: Text,
    lastActivityAt: Text,
    ...Amounts,
  })).max(USAGE_MAX_SESSIONS),
  sessionCount: z.number().int().nonnegative(),
  truncated: z.boolean(),
  days: z.array(z.object({ date: z.string().max(10), ...Amounts })).max(100_000),
  models: z.array(z.object({ model: z.string().max(1000), ...Amounts })).max(10_000),
  filesIndexed: z.number().int().nonnegative(),
  skippedLines: z.number().int().nonnegative(),
}) satisfies z.ZodType<UsageResponse>;

/** The usage route, mounted under `/api/runners`. */
export function usageRoutes(runners: RunnerRegistry): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const doc = routeDoc({
    tag: "Runners",
    summary: "Token and cost usage on a runner, from pi's session files",
    description: "Totals, per session (most expensive first, at most 1000), per UTC day and " +
      "per model. The first call on a runner may take seconds (it indexes every file once).",
    auth: "principal",
    query: [{
      name: "range",
      description: "The last 7, 30 or 90 UTC days (today included), or `all`",
      schema: { type: "string", enum: [...USAGE_RANGES], default: "90d" },
    }],
    ok: "`{ok, range, totalInputTokens, totalOutputTokens, totalCostUsd, totalCacheReadTokens, " +
      "totalCacheWriteTokens, sessions, sessionCount, truncated, days, models, filesIndexed, " +
      "skippedLines}`",
    errors: {
      400: "`bad_request`: `range` is not one of `7d`, `30d`, `90d`, `all`",
      404: "`not_found`: no such runner, or not the caller's",
      ...RUNNER_ERRORS,
    },
  });
  app.get("/:runnerId/usage", doc, async (c) => {
    const userId = principal(c).userId;
    const runnerId = c.req.param("runnerId");
    // Unknown and foreign runners answer 404 whatever the query; a bad range 400 even offline.
    await runners.assertOwned(userId, runnerId);
    const range = c.req.query("range") ?? "90d";
    if (!(USAGE_RANGES as readonly string[]).includes(range)) {
      throw invalid(`range must be one of ${USAGE_RANGES.join(", ")}`);
    }
    const link = await runners.connectedRunner(userId, runnerId);
    const res = Answer.safeParse(
      await link.request("usage", { range: range as UsageRange }, USAGE_TIMEOUT_MS),
    );
    if (!res.success) {
      throw rejected("bad_runner_answer", "Runner sent an invalid answer to 'usage'");
    }
    return c.json(res.data satisfies UsageResponse);
  });
  return app;
}
