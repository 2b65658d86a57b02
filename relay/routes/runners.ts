import { Hono } from "hono";
import { z } from "zod";
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

/** `/api/runners`: listing, spawning, restarting and stopping runners, their models. */
export function runnerRoutes(hub: Hub): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.get("/", (c) => c.json(hub.listRunners(principal(c).userId)));

  app.post("/spawn", async (c) => {
    const body = await readJson(c, Spawn);
    const res = await hub.spawn(principal(c).userId, {
      runnerId: body.runnerId,
      prompt: body.prompt,
      cwd: body.cwd?.trim() ? body.cwd : null,
      model: body.model ?? null,
    });
    return c.json(res);
  });

  app.post("/restart", async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    await hub.connectedRunner(principal(c).userId, runnerId).request("restart", {}, 10_000);
    return c.json({ ok: true });
  });

  app.post("/stop", async (c) => {
    const { runnerId } = await readJson(c, RunnerRef);
    await hub.connectedRunner(principal(c).userId, runnerId).request("stop", {}, 10_000);
    return c.json({ ok: true });
  });

  app.get("/:runnerId/models", async (c) => {
    const models = await hub.models(principal(c).userId, c.req.param("runnerId"));
    return c.json({ models });
  });

  return app;
}
