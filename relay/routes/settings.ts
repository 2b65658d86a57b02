import { Hono } from "hono";
import { z } from "zod";
import type {
  HiddenModelsRequest,
  HiddenModelsResponse,
  SetHiddenModelsResponse,
} from "../../shared/api.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { AsyncStore } from "../store/mod.ts";
import { requestSchema, routeDoc } from "./_openapi.ts";

const HiddenModels = requestSchema<HiddenModelsRequest>()(z.object({
  hiddenModels: z.array(
    z.string().max(400).regex(/^[^/\s]+\/\S+$/, "expected '<provider>/<model_id>'"),
  ).max(1000),
}));

/** `/api/settings`: per-user preferences. */
export function settingsRoutes(store: AsyncStore): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  const getDoc = routeDoc({
    tag: "Settings",
    summary: "The models the caller hides from model lists",
    auth: "principal",
    ok: '`{hiddenModels: ["<provider>/<model_id>", ...]}`; `[]` until set',
  });
  app.get("/hidden-models", getDoc, async (c) => {
    return c.json(
      {
        hiddenModels: await store.settings.get<string[]>(principal(c).userId, "hiddenModels", []),
      } satisfies HiddenModelsResponse,
    );
  });

  const putDoc = routeDoc({
    tag: "Settings",
    summary: "Replace the hidden models",
    auth: "principal",
    body: HiddenModels,
    ok: "`{ok: true, hiddenModels}`, duplicates dropped",
  });
  app.put("/hidden-models", putDoc, async (c) => {
    const { hiddenModels } = await readJson(c, HiddenModels);
    const unique = [...new Set(hiddenModels)];
    await store.settings.set(principal(c).userId, "hiddenModels", unique);
    return c.json({ ok: true, hiddenModels: unique } satisfies SetHiddenModelsResponse);
  });

  return app;
}
