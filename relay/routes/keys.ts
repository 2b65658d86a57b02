import { Hono } from "hono";
import { z } from "zod";
import type { CredentialSweeps } from "../credential_sweeps.ts";
import type {
  CreateKeyRequest,
  CreateKeyResponse,
  KeyListResponse,
  OkResponse,
} from "../../shared/api.ts";
import { invalid, notFound } from "../errors.ts";
import { createKey, isRunnerKeyName } from "../keys.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import type { AsyncStore } from "../store/mod.ts";
import { requestSchema, routeDoc } from "./_openapi.ts";

const CreateKey = requestSchema<CreateKeyRequest>()(
  z.object({
    name: z.string().trim().min(1).max(100).optional(),
    expiresInDays: z.number().int().min(1).max(3650).nullable().optional(),
    scope: z.enum(["full", "read"]).optional(),
    runnerId: z.string().min(1).max(200).nullable().optional(),
  }).strict(),
);

/** `/api/keys`: API keys and runner tokens of the caller. */
export function keyRoutes(
  store: AsyncStore,
  credentials: Pick<CredentialSweeps, "revokeKey">,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  const createDoc = routeDoc({
    tag: "Keys",
    summary: "Create an API key or runner token",
    description: "A name `runner`, `runner:*` or `runner-*` makes a runner token (`brt_`), " +
      "any other an API key (`bk_`). The secret is in this answer only. An API key's `scope` " +
      "is `full` (default) or `read`; a runner token's is always `runner` (its runner's " +
      "channels, trigger broadcasts and triggers into its sessions). `runnerId` binds the " +
      "key to one of the caller's runners; a runner token without one is bound by its first " +
      "hello.",
    auth: "principal",
    body: CreateKey,
    ok: {
      status: 201,
      description: "`{ok, id, key, name, kind, scope, runnerId, prefix, expiresAt}`",
    },
    errors: {
      400: "`bad_request`: a `scope` given for a runner token",
      404: "`not_found`: `runnerId` is not one of the caller's runners",
    },
  });
  app.post("/", createDoc, async (c) => {
    const body = await readJson(c, CreateKey);
    const { userId } = principal(c);
    const name = body.name ?? "api";
    if (body.scope !== undefined && isRunnerKeyName(name)) {
      throw invalid("A runner token's scope is always 'runner': leave 'scope' out");
    }
    const runnerId = body.runnerId ?? null;
    if (runnerId !== null && !await store.runners.getOwned(userId, runnerId)) {
      throw notFound("Runner");
    }
    const created = await createKey(store, userId, {
      name,
      expiresInDays: body.expiresInDays ?? null,
      ...(body.scope ? { scope: body.scope } : {}),
      runnerId,
    });
    return c.json({ ok: true, ...created } satisfies CreateKeyResponse, 201);
  });

  const listDoc = routeDoc({
    tag: "Keys",
    summary: "List the caller's keys",
    auth: "principal",
    ok: "`{keys: [...]}`, newest first, never the secret",
  });
  app.get("/", listDoc, async (c) => {
    const now = Date.now();
    const keys = (await store.keys.listForUser(principal(c).userId)).map((k) => ({
      id: k.id,
      name: k.name,
      kind: k.kind,
      scope: k.scope,
      runnerId: k.runnerId,
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
  app.delete("/:id", revokeDoc, async (c) => {
    const id = c.req.param("id");
    if (!await store.keys.delete(principal(c).userId, id)) throw notFound("Key");
    credentials.revokeKey(id);
    return c.json({ ok: true } satisfies OkResponse);
  });

  return app;
}
