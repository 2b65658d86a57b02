/**
 * What a captured webhook request, or a flood of signed ones, can still
 * start: replay protection per webhook (across relay restarts) and the
 * per-webhook rate limit.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { serveRelay } from "../relay/serve.ts";
import { migrate } from "../relay/store/db.ts";
import type { Webhook } from "../shared/api.ts";
import { json, signUp, type User } from "./harness/client.ts";
import {
  assertGitHubReplays,
  assertRateLimited,
  createHook,
  enhanced,
  fire,
  github,
  hmacHex,
  startingRunner,
} from "./harness/webhooks.ts";
import type { FakeRunner } from "./harness/fake_runner.ts";
import { tempDir } from "./harness/procs.ts";

async function changeHook(user: User, id: string, body: Record<string, unknown>) {
  const res = await user.web(`/api/webhooks/${id}`, json("PUT", body));
  const got = await res.json();
  assert.equal(res.status, 200, JSON.stringify(got));
  return got.webhook as Webhook;
}

function serve(dataDir: string, extra: { webhookFiresPerMinute?: number } = {}) {
  return serveRelay({
    hostname: "127.0.0.1",
    port: 0,
    dataDir,
    ...extra,
  });
}

Deno.test("a captured GitHub delivery starts nothing after a relay restart, under its own delivery id or a new one", async () => {
  const dataDir = await tempDir("baton-webhook-replay-");
  let relay = await serve(dataDir);
  let runner: FakeRunner | undefined;
  try {
    const user = await signUp(relay.url);
    let r = await startingRunner(relay, user);
    runner = r.runner;
    const hook = await createHook(user, {
      name: "GH",
      source: "github",
      runnerId: runner.runnerId,
    });
    assert.equal(hook.requireReplayProtection, true);
    const body = JSON.stringify({ ref: "refs/heads/main", marker: "CAPTURED" });
    const captured = await github(hook.secret, body, crypto.randomUUID());
    const first = await fire(relay, hook.id, body, captured);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(r.spawned.length, 1);

    await runner.close();
    await relay.shutdown();
    relay = await serve(dataDir);
    r = await startingRunner(relay, user, runner.runnerId);
    runner = r.runner;

    // The same request again: a redelivery, answered as one; under a delivery id of the
    // attacker's choosing: refused. Nothing starts.
    await assertGitHubReplays(relay, hook.id, body, captured, first.body.sessionId);
    assert.equal(r.spawned.length, 0, "the replays started nothing");
    // A new delivery (another body) still starts a session on the restarted relay.
    const next = JSON.stringify({ ref: "refs/heads/main", marker: "NEXT" });
    const ok = await fire(
      relay,
      hook.id,
      next,
      await github(hook.secret, next, crypto.randomUUID()),
    );
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(r.spawned.length, 1);
  } finally {
    await runner?.close();
    await relay.shutdown();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("with replay protection a legacy signature or a GitHub one without a delivery id is refused; without it, accepted", async () => {
  const dataDir = await tempDir("baton-webhook-legacy-");
  const relay = await serve(dataDir);
  let runner: FakeRunner | undefined;
  try {
    const user = await signUp(relay.url);
    const r = await startingRunner(relay, user);
    runner = r.runner;
    const hook = await createHook(user, {
      name: "Old CI",
      source: "ci",
      runnerId: runner.runnerId,
    });
    const body = JSON.stringify({ type: "build", marker: "LEGACY" });
    const legacy = { "x-webhook-signature": hmacHex(hook.secret, body) };
    const bare = await github(hook.secret, body);

    for (const [what, headers] of [["legacy", legacy], ["GitHub without an id", bare]] as const) {
      const res = await fire(relay, hook.id, body, headers);
      assert.equal(res.status, 401, `${what}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, "replay_protection_required");
    }
    assert.equal(r.spawned.length, 0);

    const off = await changeHook(user, hook.id, { requireReplayProtection: false });
    assert.equal(off.requireReplayProtection, false);
    for (const headers of [legacy, bare]) {
      const res = await fire(relay, hook.id, body, headers);
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
    assert.equal(r.spawned.length, 2);
  } finally {
    await runner?.close();
    await relay.shutdown();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("the 61st signed fire of a webhook within a minute gets 429 with Retry-After and starts nothing", async () => {
  const dataDir = await tempDir("baton-webhook-limit-");
  const relay = await serve(dataDir);
  let runner: FakeRunner | undefined;
  try {
    const user = await signUp(relay.url);
    const r = await startingRunner(relay, user);
    runner = r.runner;
    const hook = await createHook(user, {
      name: "Busy",
      source: "ci",
      runnerId: runner.runnerId,
      eventFilter: ["deploy"],
    });
    const other = await createHook(user, { name: "Calm", source: "ci", runnerId: runner.runnerId });
    // Unsigned requests cost the sender nothing and do not use the webhook's allowance.
    for (let i = 0; i < 10; i++) {
      const res = await fire(relay, hook.id, "{}", { "x-webhook-signature": "0".repeat(64) });
      assert.equal(res.status, 401);
    }
    // Sixty signed deliveries the filter drops (nothing starts, fast).
    for (let i = 0; i < 60; i++) {
      const body = JSON.stringify({ type: "build", n: i });
      const res = await fire(relay, hook.id, body, enhanced(hook.secret, body));
      assert.equal(res.status, 200, `fire ${i + 1}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.filtered, true);
    }
    const body = JSON.stringify({ type: "deploy", marker: "SIXTY-FIRST" });
    assertRateLimited(await fire(relay, hook.id, body, enhanced(hook.secret, body)));
    assert.equal(r.spawned.length, 0, "the refused fire started nothing");
    // The limit is the webhook's own: another one of the same user still fires.
    const calm = await fire(relay, other.id, body, enhanced(other.secret, body));
    assert.equal(calm.status, 200, JSON.stringify(calm.body));
    assert.equal(r.spawned.length, 1);
  } finally {
    await runner?.close();
    await relay.shutdown();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("a relay-wide webhook rate limit replaces the default", async () => {
  const dataDir = await tempDir("baton-webhook-limit-");
  const relay = await serve(dataDir, { webhookFiresPerMinute: 3 });
  try {
    const user = await signUp(relay.url);
    const hook = await createHook(user, { name: "x", source: "ci", eventFilter: ["never"] });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const body = JSON.stringify({ type: "build", n: i });
      statuses.push((await fire(relay, hook.id, body, enhanced(hook.secret, body))).status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429]);
  } finally {
    await relay.shutdown();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("webhooks stored before replay protection keep accepting what they did; new ones refuse it", async () => {
  const dataDir = await tempDir("baton-webhook-migrate-");
  try {
    // A database as the release before this one left it, with one webhook.
    const db = new DatabaseSync(join(dataDir, "relay.db"));
    migrate(db, { through: 5 });
    db.prepare(
      `INSERT INTO webhooks (id, user_id, name, source, secret_enc, runner_id, cwd, prompt, model,
         event_filter, filters, filter_mode, enabled, created_at, updated_at)
       VALUES ('old-hook', 'u1', 'Old', 'ci', 'x', NULL, NULL, NULL, NULL, '[]', '[]', 'and', 1,
         '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
    ).run();
    db.close();
    const relay = await serve(dataDir);
    try {
      const old = await relay.relay.store.webhooks.get("old-hook");
      assert.equal(old?.requireReplayProtection, false);
    } finally {
      await relay.shutdown();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});
