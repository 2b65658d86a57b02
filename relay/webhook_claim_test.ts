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

/** A webhook `w1` (secret `SECRET`) on runner `r1` of `u1`, over a store that answers late. */
async function withLateWebhooks(
  fn: (webhooks: Webhooks, spawned: () => number) => Promise<void>,
): Promise<void> {
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
    sqlite.webhooks.save({
      id: "w1",
      userId: "u1",
      name: "CI",
      source: "ci",
      secretEnc: await box.seal(SECRET),
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
    await fn(webhooks, () => spawned);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const SECRET = "0".repeat(64);

/** What each fire answered: its status, or the code it was refused with, sorted. */
async function outcomes(fires: Promise<{ status: number }>[]): Promise<string[]> {
  return (await Promise.allSettled(fires)).map((o) =>
    o.status === "fulfilled" ? String(o.value.status) : (o.reason as RelayError).code
  ).sort();
}

Deno.test("copies of one signed delivery fired together on a slow store start one session", async () => {
  await withLateWebhooks(async (webhooks, spawned) => {
    const body = new TextEncoder().encode(JSON.stringify({ type: "x" }));
    const timestamp = new Date().toISOString();
    const nonce = crypto.randomUUID();
    const signature = createHmac("sha256", SECRET).update(`${timestamp}.${nonce}.`).update(body)
      .digest("hex");
    const headers = new Headers({
      "x-webhook-timestamp": timestamp,
      "x-webhook-nonce": nonce,
      "x-webhook-signature": signature,
    });
    const fires = Array.from({ length: 4 }, () => webhooks.fire("w1", headers, body));
    assert.deepEqual(await outcomes(fires), [
      "200",
      "nonce_reused",
      "nonce_reused",
      "nonce_reused",
    ]);
    assert.equal(spawned(), 1);
  });
});

Deno.test("a GitHub delivery and its retry fired together on a slow store: one session, the retry a duplicate", async () => {
  await withLateWebhooks(async (webhooks, spawned) => {
    const body = new TextEncoder().encode(JSON.stringify({ action: "opened" }));
    const headers = new Headers({
      "x-github-event": "issues",
      "x-github-delivery": crypto.randomUUID(),
      "x-hub-signature-256": `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`,
    });
    const first = webhooks.fire("w1", headers, body);
    const retry = webhooks.fire("w1", headers, body);
    assert.deepEqual(await outcomes([first, retry]), ["200", "200"]);
    const duplicates = [await first, await retry].filter((r) => r.body.duplicate === true);
    assert.equal(duplicates.length, 1);
    assert.equal(spawned(), 1);
  });
});
