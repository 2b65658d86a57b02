/**
 * The repository methods that stand for what the relay once did in a
 * `store.tx(...)` of its own: each is one step, all or nothing, since no
 * transaction may span an `await` of the asynchronous store.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { openDatabase } from "./db.ts";
import { Store } from "./mod.ts";
import type { NewAttachment } from "./attachments.ts";

async function withStore(fn: (store: Store) => void | Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "baton-atomic-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    await fn(new Store(db));
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a webhook nonce is claimed once while it is in use, and again once its time is up", async () => {
  await withStore((store) => {
    const hooks = store.webhooks;
    assert.equal(hooks.claimNonce("w1", "n1", 2_000, 1_000), true);
    assert.equal(hooks.claimNonce("w1", "n1", 3_000, 1_500), false, "in use until 2000");
    assert.equal(hooks.nonceUsedUntil("w1", "n1"), 2_000, "a lost claim changes nothing");
    assert.equal(hooks.claimNonce("w2", "n1", 3_000, 1_500), true, "another webhook's own");
    assert.equal(hooks.claimNonce("w1", "n1", 9_000, 2_000), true, "its time is up");
    assert.equal(hooks.nonceUsedUntil("w1", "n1"), 9_000);
  });
});

Deno.test("a push subscription: new, the same endpoint again, moved with its keys, taken without them, and the cap", async () => {
  await withStore((store) => {
    const sub = (over: Record<string, unknown> = {}) => ({
      id: crypto.randomUUID(),
      userId: "u1",
      endpoint: "https://push.example.com/a",
      p256dh: "k1",
      auth: "a1",
      createdAt: "2030-01-01T00:00:00.000Z",
      ...over,
    });
    const first = store.push.subscribe(sub({ enabledEvents: "agent_error" }), 2);
    assert.ok(first.ok);
    // Again, with new keys and no kinds: the same row, its kinds kept.
    const again = store.push.subscribe(sub({ p256dh: "k2" }), 2);
    assert.deepEqual(again, first);
    assert.equal(store.push.byEndpoint("https://push.example.com/a")?.enabledEvents, "agent_error");
    assert.equal(store.push.byEndpoint("https://push.example.com/a")?.p256dh, "k2");
    // Another account with other keys cannot take it; with the same keys, it moves.
    assert.deepEqual(store.push.subscribe(sub({ userId: "u2" }), 2), {
      ok: false,
      reason: "taken",
    });
    const moved = store.push.subscribe(sub({ userId: "u2", p256dh: "k2" }), 2);
    assert.deepEqual(moved, first);
    assert.equal(store.push.byEndpoint("https://push.example.com/a")?.userId, "u2");
    assert.equal(store.push.byEndpoint("https://push.example.com/a")?.enabledEvents, "*");
    // The cap counts the user's subscriptions; updating one of them is not a new one.
    store.push.subscribe(sub({ userId: "u2", endpoint: "https://push.example.com/b" }), 2);
    assert.deepEqual(
      store.push.subscribe(sub({ userId: "u2", endpoint: "https://push.example.com/c" }), 2),
      { ok: false, reason: "full" },
    );
    assert.ok(store.push.subscribe(sub({ userId: "u2", p256dh: "k2" }), 2).ok);
    assert.equal(store.push.countOf("u2"), 2);
  });
});

Deno.test("an upload's rows go in all together or not at all", async () => {
  await withStore((store) => {
    const row = (id: string): NewAttachment => ({
      attachmentId: id,
      sessionId: "s1",
      userId: "u1",
      sha256: "0".repeat(64),
      filename: `${id}.txt`,
      mimeType: "text/plain",
      size: 10,
      createdAt: "2030-01-01T00:00:00.000Z",
      expiresAt: "2030-01-02T00:00:00.000Z",
    });
    assert.throws(() => store.attachments.insertAll([row("a"), row("b"), row("a")]));
    assert.equal(store.attachments.userBytes("u1", "2030-01-01T00:00:00.000Z"), 0);
    store.attachments.insertAll([row("a"), row("b")]);
    assert.equal(store.attachments.userBytes("u1", "2030-01-01T00:00:00.000Z"), 20);
  });
});

Deno.test("a trigger's answer is recorded on its inbound entry and appended as an outbound one, together", async () => {
  await withStore((store) => {
    const base = {
      type: "ci:done",
      source: "ci",
      payload: {},
      deliverAs: "steer" as const,
      expectsResponse: true,
    };
    store.triggers.addHistory("s1", {
      ...base,
      triggerId: "t1",
      ts: "2030-01-01T00:00:00.000Z",
      direction: "inbound",
    });
    const response = { action: "ok", ts: "2030-01-01T00:01:00.000Z" };
    store.triggers.respond("s1", "t1", response, {
      ...base,
      triggerId: "t2",
      expectsResponse: false,
      ts: response.ts,
      direction: "outbound",
    });
    const [reply, inbound] = store.triggers.history("s1", 10);
    assert.equal(reply?.triggerId, "t2");
    assert.equal(reply?.direction, "outbound");
    assert.deepEqual(inbound?.response, response);
  });
});
