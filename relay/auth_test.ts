import assert from "node:assert/strict";
import { join } from "node:path";
import { getMigrations } from "better-auth/db/migration";
import { authConfig } from "./_better_auth.ts";
import { migrate, openDatabase } from "./store/db.ts";
import { DatabaseSync } from "node:sqlite";

function configOn(db: DatabaseSync) {
  return authConfig({
    db,
    baseUrl: "http://127.0.0.1:7420",
    secret: "a test secret that is long enough to sign",
    trustedOrigins: [],
    clientIpHeader: "x-baton-client-ip",
    signupOpen: () => Promise.resolve(true),
  });
}

Deno.test("the relay's own migrations create every table and column better-auth uses", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-auth-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    // better-auth is no longer loaded at start to create them: if a version
    // of it wants more, this fails and the relay needs a migration for it.
    const { toBeCreated, toBeAdded } = await getMigrations(configOn(db));
    assert.deepEqual(toBeCreated.map((t) => t.table), []);
    assert.deepEqual(toBeAdded.map((t) => [t.table, Object.keys(t.fields)]), []);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a database whose account tables better-auth made itself keeps them and its accounts", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-auth-" });
  const path = join(dir, "relay.db");
  try {
    // As a release before migration 8 left it: better-auth created its tables at start.
    const old = new DatabaseSync(path);
    migrate(old, { through: 5 });
    await (await getMigrations(configOn(old))).runMigrations();
    const now = new Date().toISOString();
    old.prepare(
      `INSERT INTO "user" (id, name, email, emailVerified, createdAt, updatedAt)
       VALUES ('u1', 'Ada', 'ada@example.com', 0, ?, ?)`,
    ).run(now, now);
    old.close();

    const db = openDatabase(path);
    try {
      const row = db.prepare("SELECT 1 AS ok FROM baton_migrations WHERE name = 'account tables'")
        .get();
      assert.equal(row?.ok, 1);
      assert.equal(db.prepare(`SELECT email FROM "user"`).get()?.email, "ada@example.com");
      const { toBeCreated, toBeAdded } = await getMigrations(configOn(db));
      assert.equal(toBeCreated.length + toBeAdded.length, 0);
    } finally {
      db.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
