/**
 * `/api/runners/terminal` and `/api/runners/{runnerId}/terminals[/{id}]`:
 * open, list and close web terminals on a runner (runner/workspace/terminal.ts).
 * A terminal is a shell on the runner's machine, so only the owner's browser
 * session or a full, unbound API key may reach these routes; the browser
 * attaches over the `/_terminal` WebSocket (relay/terminal_socket.ts).
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import {
  MAX_TERMINAL_DIMENSION,
  MAX_TERMINALS_PER_RUNNER,
  type OpenTerminalRequest,
  type OpenTerminalResponse,
  type TerminalInfo,
} from "../../shared/terminal_api.ts";
import { HttpError, principal, readJson, type RelayEnv } from "../_http.ts";
import { rejected, RelayError } from "../errors.ts";
import type { RunnerRegistry } from "../runner_registry.ts";
import { forbiddenScope, isUnrestricted } from "../scopes.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";

const Size = z.number().int().min(1).max(MAX_TERMINAL_DIMENSION);

const OpenTerminal = requestSchema<OpenTerminalRequest>()(
  z.object({
    runnerId: z.string().min(1).max(64),
    cwd: z.string().min(1).max(4096).optional(),
    cols: Size.default(80),
    rows: Size.default(24),
  }).strict(),
);

const Info = z.object({
  terminalId: z.string().regex(/^t_[A-Za-z0-9]{1,40}$/),
  cwd: z.string().max(4096),
  shell: z.string().max(4096),
  cols: Size,
  rows: Size,
  createdAt: z.string().max(40),
  viewers: z.number().int().nonnegative(),
}) satisfies z.ZodType<TerminalInfo>;

const TERMINAL_ID = /^t_[A-Za-z0-9]{1,40}$/;

function onlyFull(c: Parameters<typeof principal>[0]): string {
  const p = principal(c);
  if (!isUnrestricted(p)) {
    forbiddenScope("A terminal needs the browser session or a full, unbound API key");
  }
  return p.userId;
}

function answer<T>(schema: z.ZodType<T>, value: unknown, op: string): T {
  const res = schema.safeParse(value);
  if (!res.success) throw rejected("bad_runner_answer", `Runner sent an invalid answer to '${op}'`);
  return res.data;
}

const ERRORS = {
  403: "`forbidden_scope`: a read-only key, a key bound to a runner, or a runner token",
  404: "`not_found`: no such runner or terminal, or not the caller's",
  ...RUNNER_ERRORS,
} as const;

/** The terminal routes, mounted under `/api/runners`. */
export function terminalRoutes(runners: RunnerRegistry): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  const openDoc = routeDoc({
    tag: "Runners",
    summary: "Open a web terminal (the user's shell in a PTY) on a runner",
    description: "`cwd` must lie inside the runner's workspace roots (default: its default " +
      `folder). At most ${MAX_TERMINALS_PER_RUNNER} terminals per runner. Attach with the ` +
      "`/_terminal` WebSocket (docs/protocol.md). Browser session or full, unbound key only.",
    auth: "principal",
    body: OpenTerminal,
    ok: "`{ok, terminalId, runnerId, cwd, shell, cols, rows, createdAt, viewers}`",
    errors: {
      ...ERRORS,
      400: "`bad_request`, `cwd_not_found`, `cwd_outside_roots`",
      429: `\`too_many_terminals\`: the runner has ${MAX_TERMINALS_PER_RUNNER} open already`,
    },
  });
  app.post("/terminal", openDoc, async (c) => {
    const userId = onlyFull(c);
    const body = await readJson(c, OpenTerminal);
    const link = await runners.connectedRunner(userId, body.runnerId);
    const { runnerId, ...req } = body;
    const res = await link.request("terminal_open", req, 15_000).catch((err) => {
      if (err instanceof RelayError && err.code === "too_many_terminals") {
        throw new HttpError(429, err.code, err.message);
      }
      throw err;
    });
    const out: OpenTerminalResponse = { ok: true, runnerId, ...answer(Info, res, "terminal_open") };
    return c.json(out);
  });

  const listDoc = routeDoc({
    tag: "Runners",
    summary: "The terminals open on a runner",
    auth: "principal",
    ok: "`{ok, terminals: [{terminalId, cwd, shell, cols, rows, createdAt, viewers}]}`",
    errors: ERRORS,
  });
  app.get("/:runnerId/terminals", listDoc, async (c) => {
    const userId = onlyFull(c);
    const link = await runners.connectedRunner(userId, c.req.param("runnerId"));
    const res = answer(
      z.object({ terminals: z.array(Info).max(MAX_TERMINALS_PER_RUNNER * 4) }),
      await link.request("terminal_list", {}, 10_000),
      "terminal_list",
    );
    return c.json({ ok: true as const, terminals: res.terminals });
  });

  const closeDoc = routeDoc({
    tag: "Runners",
    summary: "Close a terminal (its shell gets SIGHUP, then SIGKILL after 2 s)",
    auth: "principal",
    ok: "`{ok, closed: true}`",
    errors: ERRORS,
  });
  app.delete("/:runnerId/terminals/:terminalId", closeDoc, async (c) => {
    const userId = onlyFull(c);
    const link = await runners.connectedRunner(userId, c.req.param("runnerId"));
    const terminalId = c.req.param("terminalId");
    if (!TERMINAL_ID.test(terminalId)) throw new HttpError(404, "not_found", "Terminal not found");
    await link.request("terminal_close", { terminalId }, 10_000);
    return c.json({ ok: true as const, closed: true });
  });
  return app;
}
