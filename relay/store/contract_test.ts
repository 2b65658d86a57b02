import assert from "node:assert/strict";
import { join } from "node:path";
import { openDatabase } from "./db.ts";
import { asyncStore, REPOSITORIES, Store } from "./mod.ts";

Deno.test("the asynchronous store answers what the SQLite repositories return, and rejects what they throw", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-contract-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    const store = asyncStore(new Store(db));
    assert.equal(store.dialect, "sqlite");
    for (const name of REPOSITORIES) assert.ok(store[name], name);
    await store.settings.set("u1", "theme", { dark: true });
    const theme: { dark: boolean } = await store.settings.get("u1", "theme", { dark: false });
    assert.deepEqual(theme, { dark: true });
    assert.deepEqual(await store.settings.get("u2", "theme", { dark: false }), { dark: false });
    // A repeated seq is skipped (false), and a failing statement rejects rather than throws.
    const first = store.events.append("s1", 1, "{}");
    assert.ok(first instanceof Promise);
    assert.equal(await first, true);
    assert.equal(await store.events.append("s1", 1, "{}"), false);
    db.exec("DROP TABLE user_settings");
    await assert.rejects(store.settings.get("u1", "n", 0), /no such table/);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});
