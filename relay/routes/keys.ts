import { Hono } from "hono";
import { z } from "zod";
import type {
  CreatedKey,
  CreateKeyRequest,
  CreateKeyResponse,
  KeyListResponse,
  OkResponse,
} from "../../shared/api.ts";
import { notFound } from "../errors.ts";
import { displayPrefix, generateKey, hashKey } from "../keys.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { Hub } from "../hub.ts";
import type { Store } from "../store/mod.ts";
import { requestSchema, routeDoc } from "./_openapi.ts";

const CreateKey = requestSchema<CreateKeyRequest>()(
  z.object({
    name: z.string().trim().min(1).max(100).optional(),
    expiresInDays: z.number().int().min(1).max(3650).nullable().optional(),
  }).strict(),
);

/** Creates a key for `userId`, stores its hash and returns the secret once. */
export async function createKey(
  store: Store,
  userId: string,
  name: string,
  expiresInDays: number | null,
): Promise<CreatedKey> {
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

  const createDoc = routeDoc({
    tag: "Keys",
    summary: "Create an API key or runner token",
    description: "A name `runner`, `runner:*` or `runner-*` makes a runner token (`brt_`), " +
      "any other an API key (`bk_`). The secret is in this answer only.",
    auth: "principal",
    body: CreateKey,
    ok: { status: 201, description: "`{ok, id, key, name, kind, prefix, expiresAt}`" },
  });
  app.post("/", createDoc, async (c) => {
    const body = await readJson(c, CreateKey);
    const created = await createKey(
      store,
      principal(c).userId,
      body.name ?? "api",
      body.expiresInDays ?? null,
    );
    return c.json({ ok: true, ...created } satisfies CreateKeyResponse, 201);
  });

  const listDoc = routeDoc({
    tag: "Keys",
    summary: "List the caller's keys",
    auth: "principal",
    ok: "`{keys: [...]}`, newest first, never the secret",
  });
  app.get("/", listDoc, (c) => {
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
    return c.json({ keys } satisfies KeyListResponse);
  });

  const revokeDoc = routeDoc({
    tag: "Keys",
    summary: "Revoke a key",
    description: "Its sockets close with code 4401 at once.",
    auth: "principal",
    ok: "`{ok: true}`",
    errors: { 404: "`not_found`: no such key, or not the caller's" },
  });
  app.delete("/:id", revokeDoc, (c) => {
    const id = c.req.param("id");
    if (!store.keys.delete(principal(c).userId, id)) throw notFound("Key");
    hub.revokeKey(id);
    return c.json({ ok: true } satisfies OkResponse);
  });

  return app;
}
