import { Hono } from "hono";
import { z } from "zod";
import { notFound } from "../errors.ts";
import { displayPrefix, generateKey, hashKey } from "../keys.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { Hub } from "../hub.ts";
import type { Store } from "../store/mod.ts";

const CreateKey = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  expiresInDays: z.number().int().min(1).max(3650).nullable().optional(),
}).strict();

/** Creates a key for `userId`, stores its hash and returns the secret once. */
export async function createKey(
  store: Store,
  userId: string,
  name: string,
  expiresInDays: number | null,
) {
  const { key, kind } = generateKey(name);
  const now = new Date();
  const rec = {
    id: crypto.randomUUID(),
    userId,
    name,
    kind,
    prefix: displayPrefix(key),
    hash: await hashKey(key),
    createdAt: now.toISOString(),
    expiresAt: expiresInDays
      ? new Date(now.getTime() + expiresInDays * 86_400_000).toISOString()
      : null,
    lastUsedAt: null,
  };
  store.keys.insert(rec);
  return { id: rec.id, key, name, kind, prefix: rec.prefix, expiresAt: rec.expiresAt };
}

/** `/api/keys`: API keys and runner tokens of the caller. */
export function keyRoutes(store: Store, hub: Hub): Hono<RelayEnv> {
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
    hub.credentials.revokeKey(id);
    return c.json({ ok: true });
  });

  return app;
}
