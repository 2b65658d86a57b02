/**
 * Key scopes: a runner token reaches only its runner's channel, broadcasts
 * and triggers into its sessions; a read-only key only reads; a key bound to
 * a runner only that runner and its sessions. Refusals are 403
 * `forbidden_scope` and change nothing.
 */
import assert from "node:assert/strict";
import type { CreateKeyResponse, KeyListResponse } from "../shared/api.ts";
import { json, signUp, type User, Viewer } from "./harness/client.ts";
import { FakeRunner, FakeRunnerRejected, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";
import { baseEnv, baton, tempDir } from "./harness/procs.ts";

/** Creates a key through the API (with the account's full CLI key). */
async function createKey(user: User, body: Record<string, unknown>): Promise<CreateKeyResponse> {
  const res = await user.api("/api/keys", json("POST", body));
  const text = await res.text();
  assert.equal(res.status, 201, text);
  return JSON.parse(text);
}

/** fetch() against the relay with `key` in x-api-key. */
function withKey(relay: TestRelay, key: string) {
  return (path: string, init: RequestInit = {}) =>
    fetch(`${relay.url}${path}`, {
      ...init,
      headers: { "x-api-key": key, ...(init.headers as Record<string, string> | undefined) },
    });
}

/** Asserts a 403 `forbidden_scope` with a message. */
async function refused(res: Response, what: string): Promise<void> {
  const text = await res.text();
  assert.equal(res.status, 403, `${what}: ${res.status} ${text}`);
  const body = JSON.parse(text);
  assert.equal(body.error.code, "forbidden_scope", `${what}: ${text}`);
  assert.ok(body.error.message.length > 10, `${what}: ${text}`);
}

const CI_DEF = {
  type: "ci:build_finished",
  label: "Build finished",
  params: [],
};

/** A fake runner that declares one trigger type, as a service would. */
async function runnerWithCatalog(relay: TestRelay, apiKey: string, runnerId?: string) {
  const runner = await FakeRunner.connect(relay.url, { apiKey, ...(runnerId ? { runnerId } : {}) });
  runner.send({ t: "service_announce", triggerDefs: [CI_DEF], panels: [], sigils: [] });
  return runner;
}

Deno.test("a runner token reaches only its runner's channel, broadcasts and session triggers", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const token = await createKey(user, { name: "runner-laptop" });
  assert.equal(token.scope, "runner");
  const mine = await runnerWithCatalog(relay, token.key);
  const other = await runnerWithCatalog(relay, user.apiKey);
  const brt = withKey(relay, token.key);
  try {
    const mySession = await spawnSession(user, mine.runnerId);
    const otherSession = await spawnSession(user, other.runnerId);
    const webhook = await user.api("/api/webhooks", json("POST", { name: "CI", source: "ci" }));
    const webhookId = (await webhook.json()).webhook.id as string;

    await t.step("the token is bound to the first runner that said hello with it", async () => {
      const list: KeyListResponse = await (await user.api("/api/keys")).json();
      assert.equal(list.keys.find((k) => k.id === token.id)?.runnerId, mine.runnerId);
      const err = await FakeRunner.connect(relay.url, { apiKey: token.key }).then(
        () => null,
        (e) => e,
      );
      assert.ok(err instanceof FakeRunnerRejected, String(err));
      assert.equal(err.code, 4003);
      assert.equal(err.error?.code, "forbidden_scope");
    });

    await t.step("what an account can do is refused with 403 forbidden_scope", async () => {
      const keysBefore = (await (await user.api("/api/keys")).json()).keys.length;
      const cases: [string, () => Promise<Response>][] = [
        ["create a key", () => brt("/api/keys", json("POST", { name: "escalated" }))],
        ["list keys", () => brt("/api/keys")],
        ["revoke a key", () => brt(`/api/keys/${token.id}`, { method: "DELETE" })],
        ["list webhooks", () => brt("/api/webhooks")],
        ["read a webhook's secret", () => brt(`/api/webhooks/${webhookId}`)],
        ["create a webhook", () => brt("/api/webhooks", json("POST", { name: "x", source: "x" }))],
        [
          "spawn on another runner",
          () => brt("/api/runners/spawn", json("POST", { runnerId: other.runnerId, prompt: "x" })),
        ],
        [
          "spawn on its own runner",
          () => brt("/api/runners/spawn", json("POST", { runnerId: mine.runnerId, prompt: "x" })),
        ],
        ["list runners", () => brt("/api/runners")],
        ["list sessions", () => brt("/api/sessions")],
        ["list another runner's sessions", () => brt(`/api/sessions?runnerId=${other.runnerId}`)],
        ["read another runner's session", () => brt(`/api/sessions/${otherSession}`)],
        ["read its own runner's session events", () => brt(`/api/sessions/${mySession}/events`)],
        [
          "send input to its runner's session",
          () => brt(`/api/sessions/${mySession}/input`, json("POST", { text: "hi" })),
        ],
        [
          "trigger another runner's session",
          () =>
            brt(
              `/api/sessions/${otherSession}/trigger`,
              json("POST", { type: CI_DEF.type, payload: {} }),
            ),
        ],
        [
          "trigger a session that does not exist",
          () =>
            brt(
              `/api/sessions/${crypto.randomUUID()}/trigger`,
              json("POST", { type: CI_DEF.type, payload: {} }),
            ),
        ],
        [
          "broadcast on another runner",
          () =>
            brt(
              `/api/runners/${other.runnerId}/trigger-broadcast`,
              json("POST", { type: CI_DEF.type, payload: {} }),
            ),
        ],
        [
          "stop its runner",
          () => brt("/api/runners/stop", json("POST", { runnerId: mine.runnerId })),
        ],
        ["read settings", () => brt("/api/settings/hidden-models")],
      ];
      for (const [what, call] of cases) await refused(await call(), what);
      assert.equal((await (await user.api("/api/keys")).json()).keys.length, keysBefore);
      assert.equal(mine.requests.filter((r) => r.op === "spawn").length, 1);
      assert.equal(other.requests.filter((r) => r.op === "spawn").length, 1);
      assert.equal(other.open, true);
    });

    await t.step("the viewer channel is refused", async () => {
      await assert.rejects(Viewer.connect(relay.url, { apiKey: token.key }));
    });

    await t.step("its runner's broadcast and triggers into its sessions still work", async () => {
      const broadcast = await brt(
        `/api/runners/${mine.runnerId}/trigger-broadcast`,
        json("POST", { type: CI_DEF.type, payload: { ok: true } }),
      );
      assert.equal(broadcast.status, 200, await broadcast.clone().text());
      assert.equal((await broadcast.json()).ok, true);
      const trigger = await brt(
        `/api/sessions/${mySession}/trigger`,
        json("POST", { type: CI_DEF.type, payload: { ok: true } }),
      );
      assert.equal(trigger.status, 200, await trigger.clone().text());
      assert.ok((await trigger.json()).triggerId);
      assert.equal(mine.open, true);
    });
  } finally {
    await mine.close();
    await other.close();
  }
});

Deno.test("a read-only key can read but not change anything", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const runner = await FakeRunner.connect(relay.url, { apiKey: user.apiKey });
  try {
    const sessionId = await spawnSession(user, runner.runnerId);
    const read = await createKey(user, { name: "dashboard", scope: "read" });
    assert.equal(read.scope, "read");
    const ro = withKey(relay, read.key);
    for (const path of ["/api/runners", "/api/sessions", `/api/sessions/${sessionId}`]) {
      const res = await ro(path);
      assert.equal(res.status, 200, `${path}: ${await res.text()}`);
    }
    const writes: [string, () => Promise<Response>][] = [
      [
        "spawn",
        () => ro("/api/runners/spawn", json("POST", { runnerId: runner.runnerId, prompt: "x" })),
      ],
      ["rename", () => ro(`/api/sessions/${sessionId}`, json("PATCH", { title: "renamed" }))],
      ["input", () => ro(`/api/sessions/${sessionId}/input`, json("POST", { text: "hi" }))],
      ["clear triggers", () => ro(`/api/sessions/${sessionId}/triggers`, { method: "DELETE" })],
      ["hide models", () => ro("/api/settings/hidden-models", json("PUT", { hiddenModels: [] }))],
      ["create a key", () => ro("/api/keys", json("POST", { name: "more" }))],
      ["list keys", () => ro("/api/keys")],
      ["list webhooks", () => ro("/api/webhooks")],
    ];
    for (const [what, call] of writes) await refused(await call(), what);
    const s = await (await user.api(`/api/sessions/${sessionId}`)).json();
    assert.notEqual(s.session.title, "renamed");
    assert.equal(runner.requests.filter((r) => r.op === "spawn").length, 1);
    assert.equal(runner.requests.filter((r) => r.op === "input").length, 0);

    // A read-only key cannot connect a runner (a runner writes sessions' events).
    const err = await FakeRunner.connect(relay.url, { apiKey: read.key }).then(
      () => null,
      (e) => e,
    );
    assert.ok(err instanceof FakeRunnerRejected, String(err));
    assert.equal(err.error?.code, "forbidden_scope");
  } finally {
    await runner.close();
  }
});

Deno.test("a key bound to a runner cannot touch other runners or their sessions", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const a = await FakeRunner.connect(relay.url, { apiKey: user.apiKey });
  const b = await FakeRunner.connect(relay.url, { apiKey: user.apiKey });
  try {
    const onA = await spawnSession(user, a.runnerId);
    const onB = await spawnSession(user, b.runnerId);
    const unknown = await user.api(
      "/api/keys",
      json("POST", { name: "ci-a", runnerId: "no-such-runner" }),
    );
    assert.equal(unknown.status, 404, await unknown.text());
    const bound = await createKey(user, { name: "ci-a", runnerId: a.runnerId });
    assert.equal(bound.runnerId, a.runnerId);
    const k = withKey(relay, bound.key);

    const runners = await (await k("/api/runners")).json();
    assert.deepEqual(runners.map((r: { id: string }) => r.id), [a.runnerId]);
    const listed = await (await k("/api/sessions")).json();
    assert.deepEqual(listed.sessions.map((s: { sessionId: string }) => s.sessionId), [onA]);
    assert.equal((await k(`/api/sessions/${onA}`)).status, 200);
    const spawned = await k(
      "/api/runners/spawn",
      json("POST", { runnerId: a.runnerId, prompt: "x", cwd: "/fake" }),
    );
    assert.equal(spawned.status, 200, await spawned.text());

    const cases: [string, () => Promise<Response>][] = [
      ["read a session on B", () => k(`/api/sessions/${onB}`)],
      ["read its events", () => k(`/api/sessions/${onB}/events`)],
      ["send it input", () => k(`/api/sessions/${onB}/input`, json("POST", { text: "hi" }))],
      ["rename it", () => k(`/api/sessions/${onB}`, json("PATCH", { title: "x" }))],
      ["list B's sessions", () => k(`/api/sessions?runnerId=${b.runnerId}`)],
      [
        "spawn on B",
        () => k("/api/runners/spawn", json("POST", { runnerId: b.runnerId, prompt: "x" })),
      ],
      ["stop B", () => k("/api/runners/stop", json("POST", { runnerId: b.runnerId }))],
      ["read B's models", () => k(`/api/runners/${b.runnerId}/models`)],
      ["read B's usage", () => k(`/api/runners/${b.runnerId}/usage`)],
      ["create a key", () => k("/api/keys", json("POST", { name: "more" }))],
      ["list webhooks", () => k("/api/webhooks")],
    ];
    for (const [what, call] of cases) await refused(await call(), what);
    assert.equal(b.requests.filter((r) => r.op === "spawn").length, 1);
    assert.equal(b.requests.filter((r) => r.op === "input" || r.op === "control").length, 0);
    assert.equal(b.open, true);

    // Nor can it connect as runner B.
    const err = await FakeRunner.connect(relay.url, { apiKey: bound.key, runnerId: b.runnerId })
      .then(() => null, (e) => e);
    assert.ok(err instanceof FakeRunnerRejected, String(err));
    assert.equal(err.error?.code, "forbidden_scope");
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("'baton key create' makes read-only and runner-bound keys, and refuses what it cannot", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const runner = await FakeRunner.connect(relay.url, { apiKey: user.apiKey });
  const home = await tempDir("baton-key-cli-");
  const env = baseEnv(home, { BATON_API_KEY: user.apiKey, BATON_RELAY_URL: relay.url });
  try {
    const read = await baton(["key", "create", "--name", "dashboard", "--read"], env);
    assert.equal(read.code, 0, read.stderr);
    const key = read.stdout.trim();
    assert.match(key, /^bk_[A-Za-z0-9_-]{43}$/);
    assert.match(read.stderr, /scope read/);
    const ro = withKey(relay, key);
    assert.equal((await ro("/api/runners")).status, 200);
    await refused(
      await ro("/api/runners/stop", json("POST", { runnerId: runner.runnerId })),
      "stop",
    );

    const bound = await baton(["key", "create", "--name", "ci", "--runner", runner.runnerId], env);
    assert.equal(bound.code, 0, bound.stderr);
    const listed: KeyListResponse = await (await user.api("/api/keys")).json();
    assert.equal(listed.keys.find((k) => k.name === "ci")?.runnerId, runner.runnerId);

    const before = listed.keys.length;
    const unknown = await baton(["key", "create", "--runner", "no-such-runner"], env);
    assert.equal(unknown.code, 1, unknown.stderr);
    assert.match(unknown.stderr, /404/);
    const bad = await baton(["key", "create", "--name", "runner-x", "--read"], env);
    assert.equal(bad.code, 2, bad.stderr);
    assert.equal(bad.stderr.trim().split("\n").length, 1, bad.stderr);
    // A read-only key cannot make keys.
    const narrow = await baton(["key", "create"], { ...env, BATON_API_KEY: key });
    assert.equal(narrow.code, 1, narrow.stderr);
    assert.match(narrow.stderr, /403/);
    const after = (await (await user.api("/api/keys")).json()).keys.length;
    assert.equal(after, before);
  } finally {
    await runner.close();
  }
});
