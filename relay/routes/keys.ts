import { Hono } from "hono";
import { z } from "zod";
import type { CredentialSweeps } from "../credential_sweeps.ts";
import { notFound } from "../errors.ts";
import { createKey } from "../keys.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { Store } from "../store/mod.ts";

const CreateKey = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  expiresInDays: z.number().int().min(1).max(3650).nullable().optional(),
}).strict();

/** `/api/keys`: API keys and runner tokens of the caller. */
export function keyRoutes(
  store: Store,
  credentials: Pick<CredentialSweeps, "revokeKey">,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  app.post("/", async (c) => {
    const body = await readJson(c, CreateKey);
    const created = await createKey(
      store,
      principal(c).userId,
      body.name ?? "api",
      body.expiresInDays ?? null,
    );
    return c.json({ ok: true, ...created }, 201);
  });

  app.get("/", (c) => {
    const now = Date.now();
    const keys = store.keys.listForUser(principal(c).userId).map((k) => ({
      id: k.id,
      name: k.name,
      kind: k.kind,
      prefix: k.prefix,
      createdAt: k.createdAt,
      lastUsedAt: k.lastUsedAt,
      expiresAt: k.expiresAt,
      expired: k.expiresAt !== null && Date.parse(k.expiresAt) <= now,
    }));
    return c.json({ keys });
  });

  app.delete("/:id", (c) => {
    const id = c.req.param("id");
    if (!store.keys.delete(principal(c).userId, id)) throw notFound("Key");
    credentials.revokeKey(id);
    return c.json({ ok: true });
  });

  return app;
}
