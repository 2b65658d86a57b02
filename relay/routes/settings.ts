import { Hono } from "hono";
import { z } from "zod";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { Store } from "../store/mod.ts";

const HiddenModels = z.object({
  hiddenModels: z.array(
    z.string().max(400).regex(/^[^/\s]+\/\S+$/, "expected '<provider>/<model_id>'"),
  ).max(1000),
});

/** `/api/settings`: per-user preferences. */
export function settingsRoutes(store: Store): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.get("/hidden-models", (c) => {
    return c.json({
      hiddenModels: store.settings.get<string[]>(principal(c).userId, "hiddenModels", []),
    });
  });

  app.put("/hidden-models", async (c) => {
    const { hiddenModels } = await readJson(c, HiddenModels);
    const unique = [...new Set(hiddenModels)];
    store.settings.set(principal(c).userId, "hiddenModels", unique);
    return c.json({ ok: true, hiddenModels: unique });
  });

  return app;
}
