import { Hono } from "hono";
import { z } from "zod";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { RunnerRegistry } from "../runner_registry.ts";
import type { SessionService } from "../session_service.ts";

const ModelRef = z.object({
  provider: z.string().min(1).max(200),
  id: z.string().min(1).max(200),
});

const Spawn = z.object({
  runnerId: z.string().min(1).max(100),
  prompt: z.string().max(200_000).optional().default(""),
  cwd: z.string().max(4096).nullable().optional(),
  model: ModelRef.nullable().optional(),
});

const RunnerRef = z.object({ runnerId: z.string().min(1).max(100) });

const FolderRef = z.object({ path: z.string().min(1).max(4096) });

/** `/api/runners`: listing, spawning, restarting and stopping runners, their models. */
export function runnerRoutes(runners: RunnerRegistry, sessions: SessionService): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.get("/", (c) => c.json(runners.list(principal(c).userId)));

  app.post("/spawn", async (c) => {
    const body = await readJson(c, Spawn);
    const res = await sessions.spawn(principal(c).userId, {
      runnerId: body.runnerId,
      prompt: body.prompt,
      cwd: body.cwd?.trim() ? body.cwd : null,
      model: body.model ?? null,
    });
    return c.json(res);
  });

  app.post("/restart", async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    await runners.control(principal(c).userId, runnerId, "restart");
    return c.json({ ok: true });
  });

  app.post("/stop", async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    await runners.control(principal(c).userId, runnerId, "stop");
    return c.json({ ok: true });
  });

  app.get("/:runnerId/recent-folders", (c) => {
    const folders = sessions.recentFolders(principal(c).userId, c.req.param("runnerId"));
    return c.json({ folders });
  });

  app.delete("/:runnerId/recent-folders", async (c) => {
    const userId = principal(c).userId;
    const runnerId = c.req.param("runnerId");
    // A foreign runner answers 404 whatever the body.
    runners.assertOwned(userId, runnerId);
    const { path } = await readJson(c, FolderRef);
    return c.json({ ok: true, deleted: sessions.dismissFolder(userId, runnerId, path) });
  });

  app.get("/:runnerId/models", async (c) => {
    return c.json(await sessions.models(principal(c).userId, c.req.param("runnerId")));
  });

  return app;
}
