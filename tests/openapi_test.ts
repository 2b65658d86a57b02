/**
 * The OpenAPI document against the app and the docs: every route the app
 * serves under /api (read from the app itself, as the fuzzer does) is in
 * `GET /api/openapi.json` with its method, path, auth and error statuses,
 * what it claims about auth holds when the route is called without
 * credentials, and docs/api.md names no route the document lacks.
 */
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { createRelay, type Relay } from "../relay/app.ts";
import { tempDir } from "./harness/procs.ts";

/** Not in the document, on purpose (docs/api.md says why). */
const OUTSIDE = new Set([
  // better-auth's proxy: its answers and errors are better-auth's own.
  "/api/auth/*",
  // The HTTP tunnel: every method, and the proxied service's answers (docs/api.md says why).
  "/api/tunnel/runner/{runnerId}/{port}/*",
  "/api/tunnel/{sessionId}/{port}/*",
  "/api/tunnel/g/{token}/*",
  // The document itself.
  "/api/openapi.json",
]);

const BASE_URL = "http://relay.test:7420";

/** The routes outside /api the document describes: liveness, readiness, metrics. */
const OPERATIONS = new Set(["/health", "/ready", "/metrics"]);

interface ResponseDoc {
  content?: Record<string, { schema?: { $ref?: string } }>;
}

interface Operation {
  security?: Record<string, string[]>[];
  requestBody?: unknown;
  responses: Record<string, ResponseDoc>;
}

interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
}

/** A relay built in-process (no socket: `app.request`) and its document. */
async function withDocument(
  fn: (relay: Relay, doc: Document) => void | Promise<void>,
): Promise<void> {
  const dataDir = await tempDir("baton-openapi-");
  const relay = await createRelay({ dataDir, baseUrl: BASE_URL });
  try {
    const res = await relay.app.request("/api/openapi.json");
    assert.equal(res.status, 200);
    await fn(relay, await res.json());
  } finally {
    await relay.close();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}

/** Hono's `/a/:id/b/:target?` as OpenAPI writes it: `/a/{id}/b/{target}`. */
function openApiPath(honoPath: string): string {
  return honoPath.replace(/:([A-Za-z0-9_]+)\??/g, "{$1}");
}

/** Every `METHOD path` the app routes under /api, and OPERATIONS (middleware left out). */
async function appRoutes(relay: Relay): Promise<{ method: string; path: string }[]> {
  const seen = new Map<string, { method: string; path: string }>();
  for (const r of await relay.routes()) {
    if (OUTSIDE.has(r.path)) continue;
    if (!r.path.startsWith("/api/") && !OPERATIONS.has(r.path)) continue;
    const route = { method: r.method, path: openApiPath(r.path) };
    seen.set(`${route.method} ${route.path}`, route);
  }
  return [...seen.values()];
}

/** Whether `op` asks for a cookie or a key (as `requirePrincipal` does). */
function needsPrincipal(op: Operation): boolean {
  return (op.security ?? []).some((s) => "cookie" in s || "apiKey" in s || "bearer" in s);
}

Deno.test("the OpenAPI document is served without credentials and holds nothing of the relay's", async () => {
  await withDocument(async (relay, doc) => {
    assert.equal(doc.openapi, "3.1.0");
    assert.ok(doc.components.schemas.Error, "the shared error body is a component");
    const text = JSON.stringify(doc);
    assert.ok(!text.includes("relay.test"), "the base URL is not in the document");
    const res = await relay.app.request("/api/openapi.json");
    assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(await res.text(), text, "a second request gets the same document");
  });
});

Deno.test("every API route of the app is in the OpenAPI document, with its auth and error statuses", async (t) => {
  await withDocument(async (relay, doc) => {
    const routes = await appRoutes(relay);
    assert.ok(routes.length > 30, `only ${routes.length} routes read from the app`);

    for (const { method, path } of routes) {
      await t.step(`${method} ${path}`, async () => {
        const op = doc.paths[path]?.[method.toLowerCase()];
        assert.ok(op, "missing from the document");
        assert.ok(Array.isArray(op.security), "states its auth (an empty list: none)");
        for (const requirement of op.security) {
          for (const scheme of Object.keys(requirement)) {
            assert.ok(doc.components.securitySchemes[scheme], `unknown scheme '${scheme}'`);
          }
        }
        const errors = Object.keys(op.responses).filter((s) => Number(s) >= 400);
        assert.ok(errors.length > 0, "lists its error statuses");
        for (const status of errors) {
          const response: ResponseDoc | undefined = op.responses[status];
          const schema: { $ref?: string } | undefined = response?.content?.["application/json"]
            ?.schema;
          assert.equal(schema?.$ref, "#/components/schemas/Error", `${status} has the error body`);
        }
        if (op.security.length > 0) assert.ok(op.responses["401"], "401 for bad credentials");
        if (op.requestBody && !op.security.some((s) => "webhookSignature" in s)) {
          for (const status of ["400", "413", "415"]) {
            assert.ok(op.responses[status], `${status} for a bad body`);
          }
        }

        // What the document says about auth holds: without credentials a
        // route behind requirePrincipal answers 401, any other route does not.
        const target = path.replace(/\{[^}]+\}/g, "00000000-0000-4000-8000-000000000000");
        const res = await relay.app.request(target, { method });
        await res.body?.cancel();
        if (needsPrincipal(op)) assert.equal(res.status, 401, "needs credentials");
        else assert.notEqual(res.status, 401, "needs no cookie or key");
      });
    }

    await t.step("the document lists no route the app lacks", () => {
      const served = new Set(routes.map((r) => `${r.method} ${r.path}`));
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const method of Object.keys(item)) {
          assert.ok(served.has(`${method.toUpperCase()} ${path}`), `${method} ${path}`);
        }
      }
    });
  });
});

/** Every `METHOD /path` docs/api.md names: its `### \`METHOD /path\`` headings and its table. */
async function documentedRoutes(): Promise<string[]> {
  const md = await Deno.readTextFile(fileURLToPath(new URL("../docs/api.md", import.meta.url)));
  const found = new Set<string>();
  for (const line of md.split("\n")) {
    if (!line.startsWith("### ")) continue;
    for (const m of line.matchAll(/`([A-Z]+) (\/[^`\s]*)`/g)) found.add(`${m[1]} ${m[2]}`);
  }
  const table = md.split("## Routes at a glance")[1]?.split("\n## ")[0] ?? "";
  let rows = 0;
  for (const line of table.split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const [, methods, paths] = cells;
    if (!methods || !paths || !/^[A-Z]+(, [A-Z]+)*$/.test(methods)) continue;
    rows++;
    for (const method of methods.split(", ")) {
      for (const m of paths.matchAll(/`(\/[^`]*)`/g)) found.add(`${method} ${m[1]}`);
    }
  }
  assert.ok(rows > 20, `only ${rows} rows read from the "Routes at a glance" table`);
  return [...found];
}

Deno.test("docs/api.md names no API route that is missing from the OpenAPI document", async () => {
  const documented = await documentedRoutes();
  await withDocument((_relay, doc) => {
    const inDocument = new Set(
      Object.entries(doc.paths).flatMap(([path, item]) =>
        Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`)
      ),
    );
    // The WebSocket paths and the web client's pages are not HTTP API routes.
    const api = documented.filter((r) => {
      const path = r.split(" ")[1]!;
      return (path.startsWith("/api/") || OPERATIONS.has(path)) && !OUTSIDE.has(path);
    });
    assert.ok(api.length > 30, `only ${api.length} API routes read from docs/api.md`);
    const missing = api.filter((r) => !inDocument.has(r));
    assert.deepEqual(missing, [], "named in docs/api.md, missing from the document");
    // And the other way round: the prose covers every route of the document.
    const undocumented = [...inDocument].filter((r) => !documented.includes(r));
    assert.deepEqual(undocumented, [], "in the document, not named in docs/api.md");
  });
});
