import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { join } from "node:path";
import { RelayError } from "./errors.ts";
import { SecretBox } from "./secret_box.ts";
import { openDatabase } from "./store/db.ts";
import { type AsyncStore, asyncStore, REPOSITORIES, Store } from "./store/mod.ts";
import { Webhooks } from "./webhooks.ts";

/**
 * The SQLite store answering each call a few milliseconds late, as a store
 * across the network does: the relay's awaits between a check and a write
 * are then wide enough for a concurrent request to pass through.
 */
function late(store: AsyncStore, ms: number): AsyncStore {
  const out: Record<string, unknown> = { dialect: store.dialect };
  for (const name of REPOSITORIES) {
    const repo = store[name] as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
    out[name] = Object.fromEntries(
      Object.entries(repo).map(([method, fn]) => [method, async (...args: unknown[]) => {
        await new Promise((resolve) => setTimeout(resolve, ms));
        return await fn(...args);
      }]),
    );
  }
  return out as unknown as AsyncStore;
}

Deno.test("copies of one signed delivery fired together on a slow store start one session", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-webhook-claim-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    const sqlite = new Store(db);
    const now = new Date().toISOString();
    sqlite.runners.upsert({
      id: "r1",
      userId: "u1",
      name: "laptop",
      platform: "linux",
      version: "1",
      roots: [],
      createdAt: now,
      lastSeenAt: null,
    });
    const box = await SecretBox.fromSecret("relay secret", "baton webhook secrets");
    const secret = "0".repeat(64);
    sqlite.webhooks.save({
      id: "w1",
      userId: "u1",
      name: "CI",
      source: "ci",
      secretEnc: await box.seal(secret),
      runnerId: "r1",
      cwd: null,
      prompt: null,
      model: null,
      eventFilter: [],
      filters: [],
      filterMode: "and",
      enabled: true,
      requireReplayProtection: true,
      createdAt: now,
      updatedAt: now,
    });
    let spawned = 0;
    const webhooks = new Webhooks({
      store: late(asyncStore(sqlite), 3),
      triggers: { spawnWithTrigger: () => Promise.resolve(`s${++spawned}`) },
      sessions: {
        waitRunning: () => Promise.resolve("running"),
        input: () => Promise.resolve(),
        abandonSession: () => {},
      } as never,
      runners: { connected: () => ({}) as never },
      box,
      baseUrl: "http://127.0.0.1",
      connectTimeoutMs: 1000,
    });
    const body = new TextEncoder().encode(JSON.stringify({ type: "x" }));
    const timestamp = new Date().toISOString();
    const nonce = crypto.randomUUID();
    const headers = new Headers({
      "x-webhook-timestamp": timestamp,
      "x-webhook-nonce": nonce,
      "x-webhook-signature": createHmac("sha256", secret).update(`${timestamp}.${nonce}.`)
        .update(body).digest("hex"),
    });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 4 }, () => webhooks.fire("w1", headers, body)),
    );
    const codes = outcomes.map((o) =>
      o.status === "fulfilled" ? String(o.value.status) : (o.reason as RelayError).code
    ).sort();
    assert.deepEqual(codes, ["200", "nonce_reused", "nonce_reused", "nonce_reused"]);
    assert.equal(spawned, 1);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});
