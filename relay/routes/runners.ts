import { Hono } from "hono";
import { z } from "zod";
import { notFound } from "../errors.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { Hub } from "../hub.ts";

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

const MAX_RECENT_FOLDERS = 20;

function recentFolders(
  hub: Pick<Hub, "store">,
  userId: string,
  runnerId: string,
): string[] {
  const dismissed = hub.store.settings.get<Record<string, string>>(
    userId,
    `recentFolders.dismissed.${runnerId}`,
    {},
  );
  const seen = new Set<string>();
  const out: string[] = [];
  for (const s of hub.store.sessions.listForUser(userId)) {
    if (s.runnerId !== runnerId || !s.cwd || seen.has(s.cwd)) continue;
    seen.add(s.cwd);
    const gone = dismissed[s.cwd];
    if (gone && gone >= s.createdAt) continue;
    out.push(s.cwd);
    if (out.length === MAX_RECENT_FOLDERS) break;
  }
  return out;
}

/** `/api/runners`: listing, spawning, restarting and stopping runners, their models. */
export function runnerRoutes(hub: Pick<Hub, "store" | "runners" | "sessions">): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.get("/", (c) => c.json(hub.runners.list(principal(c).userId)));

  app.post("/spawn", async (c) => {
    const body = await readJson(c, Spawn);
    const res = await hub.sessions.spawn(principal(c).userId, {
      runnerId: body.runnerId,
      prompt: body.prompt,
      cwd: body.cwd?.trim() ? body.cwd : null,
      model: body.model ?? null,
    });
    return c.json(res);
  });

  app.post("/restart", async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    await hub.runners.connectedRunner(principal(c).userId, runnerId).request("restart", {}, 10_000);
    return c.json({ ok: true });
  });

  app.post("/stop", async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    await hub.runners.connectedRunner(principal(c).userId, runnerId).request("stop", {}, 10_000);
    return c.json({ ok: true });
  });

  // Folders of the caller's recent sessions on this runner, newest first,
  // minus the ones dismissed (until a newer session uses them again).
  app.get("/:runnerId/recent-folders", (c) => {
    const userId = principal(c).userId;
    const runnerId = c.req.param("runnerId");
    if (!hub.store.runners.getOwned(userId, runnerId)) throw notFound("Runner");
    return c.json({ folders: recentFolders(hub, userId, runnerId) });
  });

  app.delete("/:runnerId/recent-folders", async (c) => {
    const userId = principal(c).userId;
    const runnerId = c.req.param("runnerId");
    if (!hub.store.runners.getOwned(userId, runnerId)) throw notFound("Runner");
    const { path } = await readJson(c, FolderRef);
    const deleted = recentFolders(hub, userId, runnerId).includes(path);
    if (deleted) {
      const key = `recentFolders.dismissed.${runnerId}`;
      const dismissed = hub.store.settings.get<Record<string, string>>(userId, key, {});
      dismissed[path] = new Date().toISOString();
      hub.store.settings.set(userId, key, dismissed);
    }
    return c.json({ ok: true, deleted });
  });

  app.get("/:runnerId/models", async (c) => {
    return c.json(await hub.sessions.models(principal(c).userId, c.req.param("runnerId")));
  });

  return app;
}
