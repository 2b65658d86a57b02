import { Hono } from "hono";
import { MAX_INPUT_ATTACHMENTS } from "../../shared/attachments_api.ts";
import { z } from "zod";
import type {
  DismissFolderRequest,
  DismissFolderResponse,
  ModelsResponse,
  OkResponse,
  RecentFoldersResponse,
  RunnerListResponse,
  RunnerRequest,
  SpawnSessionRequest,
  SpawnSessionResponse,
} from "../../shared/api.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import { assertRunnerInScope } from "../scopes.ts";
import type { RecentFolders } from "../recent_folders.ts";
import type { RunnerRegistry } from "../runner_registry.ts";
import type { SessionService } from "../session_service.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";
import { PathString } from "./trigger_schemas.ts";

const ModelRef = z.object({
  provider: z.string().min(1).max(200),
  id: z.string().min(1).max(200),
});

const Spawn = requestSchema<SpawnSessionRequest>()(z.object({
  runnerId: z.string().min(1).max(100),
  // Its length is checked by the session service (text_too_long), like every input's.
  prompt: z.string().optional().default(""),
  cwd: PathString.nullable().optional(),
  model: ModelRef.nullable().optional(),
  attachments: z.array(z.string().max(100)).max(MAX_INPUT_ATTACHMENTS).optional(),
}));

const RunnerRef = requestSchema<RunnerRequest>()(
  z.object({ runnerId: z.string().min(1).max(100) }),
);

const FolderRef = requestSchema<DismissFolderRequest>()(
  z.object({ path: PathString.min(1) }),
);

const NOT_FOUND = { 404: "`not_found`: no such runner, or not the caller's" } as const;

/** `/api/runners`: listing, spawning, restarting and stopping runners, their models. */
export function runnerRoutes(
  runners: RunnerRegistry,
  sessions: SessionService,
  folders: RecentFolders,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  const listDoc = routeDoc({
    tag: "Runners",
    summary: "List the caller's runners",
    auth: "principal",
    ok: "An array of runners (not wrapped in an object), by name, then id",
  });
  app.get(
    "/",
    listDoc,
    async (c) => {
      const { userId, runnerId } = principal(c);
      const list = (await runners.list(userId)).filter((r) =>
        runnerId === null || r.id === runnerId
      );
      return c.json(list satisfies RunnerListResponse);
    },
  );

  const spawnDoc = routeDoc({
    tag: "Runners",
    summary: "Start a session on a connected runner",
    auth: "principal",
    body: Spawn,
    ok: "`{sessionId, shareUrl}`, once the runner started the session's worker",
    errors: {
      400: "`invalid_body` (a `cwd` with NUL or another control character, ...), " +
        "`text_too_long` (a prompt over 200,000 characters), " +
        "`cwd_outside_roots`, `cwd_not_found`, `bad_request`, `unknown_model` (the runner's)",
      404: "`not_found`: no such runner, or not the caller's; an attachment that is not the " +
        "caller's, expired, or of a session on another runner",
      ...RUNNER_ERRORS,
    },
  });
  app.post("/spawn", spawnDoc, async (c) => {
    const body = await readJson(c, Spawn);
    assertRunnerInScope(principal(c), body.runnerId);
    const res = await sessions.spawn(principal(c).userId, {
      runnerId: body.runnerId,
      prompt: body.prompt,
      cwd: body.cwd?.trim() ? body.cwd : null,
      model: body.model ?? null,
      attachments: body.attachments ?? [],
    });
    return c.json(res satisfies SpawnSessionResponse);
  });

  const restartDoc = routeDoc({
    tag: "Runners",
    summary: "Restart a runner's daemon",
    description:
      "It exits with code 75 and its supervisor starts it again; its sessions come back.",
    auth: "principal",
    body: RunnerRef,
    ok: "`{ok: true}`: the daemon acknowledged",
    errors: { ...NOT_FOUND, ...RUNNER_ERRORS },
  });
  app.post("/restart", restartDoc, async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    assertRunnerInScope(principal(c), runnerId);
    await runners.control(principal(c).userId, runnerId, "restart");
    return c.json({ ok: true } satisfies OkResponse);
  });

  const stopDoc = routeDoc({
    tag: "Runners",
    summary: "Stop a runner's daemon",
    description: "Nothing can start it again remotely.",
    auth: "principal",
    body: RunnerRef,
    ok: "`{ok: true}`: the daemon acknowledged",
    errors: { ...NOT_FOUND, ...RUNNER_ERRORS },
  });
  app.post("/stop", stopDoc, async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    assertRunnerInScope(principal(c), runnerId);
    await runners.control(principal(c).userId, runnerId, "stop");
    return c.json({ ok: true } satisfies OkResponse);
  });

  // Folders of the caller's recent sessions on this runner, newest first,
  // minus the ones dismissed (until a newer session uses them again).
  const foldersDoc = routeDoc({
    tag: "Runners",
    summary: "The folders of the caller's recent sessions on a runner",
    auth: "principal",
    ok: "`{folders: [...]}`, newest session first, at most 20",
    errors: NOT_FOUND,
  });
  app.get("/:runnerId/recent-folders", foldersDoc, async (c) => {
    const list = await folders.list(principal(c).userId, c.req.param("runnerId"));
    return c.json({ folders: list } satisfies RecentFoldersResponse);
  });

  const dismissDoc = routeDoc({
    tag: "Runners",
    summary: "Remove a folder from the recent folders",
    description: "Until a newer session uses it again.",
    auth: "principal",
    body: FolderRef,
    ok: "`{ok: true, deleted}`: whether it was in the list",
    errors: NOT_FOUND,
  });
  app.delete("/:runnerId/recent-folders", dismissDoc, async (c) => {
    const userId = principal(c).userId;
    const runnerId = c.req.param("runnerId");
    // A foreign runner answers 404 whatever the body.
    await runners.assertOwned(userId, runnerId);
    const { path } = await readJson(c, FolderRef);
    const deleted = await folders.dismiss(userId, runnerId, path);
    return c.json({ ok: true, deleted } satisfies DismissFolderResponse);
  });

  const modelsDoc = routeDoc({
    tag: "Runners",
    summary: "The models a runner offers, minus the caller's hidden ones",
    auth: "principal",
    ok: "`{models: [{provider, id, name?, reasoning?, contextWindow?}], error?}`",
    errors: { ...NOT_FOUND, ...RUNNER_ERRORS },
  });
  app.get("/:runnerId/models", modelsDoc, async (c) => {
    const models = await sessions.models(principal(c).userId, c.req.param("runnerId"));
    return c.json(models satisfies ModelsResponse);
  });

  return app;
}
