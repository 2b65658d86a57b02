/**
 * `GET|DELETE /api/runners/{runnerId}/recent-folders`: fed by spawns, per
 * runner and per user, newest first, and a removed folder stays removed
 * until a session uses it again.
 */
import assert from "node:assert/strict";
import { json, signUp, type User } from "./harness/client.ts";
import { FakeRunner, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay } from "./harness/in_process.ts";

async function folders(user: User, runnerId: string): Promise<string[]> {
  const res = await user.api(`/api/runners/${runnerId}/recent-folders`);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text).folders;
}

async function dismiss(user: User, runnerId: string, path: string) {
  const res = await user.api(`/api/runners/${runnerId}/recent-folders`, json("DELETE", { path }));
  return { status: res.status, body: await res.json() };
}

Deno.test("recent folders come from spawns, per runner and per user, newest first, and a removed one stays removed until used again", async (t) => {
  await using relay = await startTestRelay({ allowSignup: true });
  const alice = await signUp(relay.url);
  const bob = await signUp(relay.url);
  const laptop = await FakeRunner.connect(relay.url, { apiKey: alice.apiKey });
  const server = await FakeRunner.connect(relay.url, { apiKey: alice.apiKey });
  const bobs = await FakeRunner.connect(relay.url, { apiKey: bob.apiKey });
  try {
    await t.step("a runner without sessions has none", async () => {
      assert.deepEqual(await folders(alice, laptop.runnerId), []);
    });

    await t.step("spawns feed it, newest first, each folder once", async () => {
      for (const cwd of ["/w/a", "/w/b", "/w/a", "/w/c"]) {
        await spawnSession(alice, laptop.runnerId, { cwd });
      }
      await spawnSession(alice, server.runnerId, { cwd: "/srv/x" });
      await spawnSession(bob, bobs.runnerId, { cwd: "/home/bob" });
      assert.deepEqual(await folders(alice, laptop.runnerId), ["/w/c", "/w/a", "/w/b"]);
      assert.deepEqual(await folders(alice, server.runnerId), ["/srv/x"]);
      assert.deepEqual(await folders(bob, bobs.runnerId), ["/home/bob"]);
    });

    await t.step("another user's runner answers like an unknown one", async () => {
      for (const method of ["GET", "DELETE"]) {
        const init = method === "GET" ? {} : json("DELETE", { path: "/w/a" });
        const foreign = await bob.api(`/api/runners/${laptop.runnerId}/recent-folders`, init);
        const unknown = await bob.api("/api/runners/nope/recent-folders", init);
        assert.equal(foreign.status, 404);
        assert.deepEqual(await foreign.json(), await unknown.json());
      }
      assert.deepEqual(await folders(alice, laptop.runnerId), ["/w/c", "/w/a", "/w/b"]);
    });

    await t.step("a removed folder is gone, also after more spawns elsewhere", async () => {
      assert.deepEqual(await dismiss(alice, laptop.runnerId, "/w/a"), {
        status: 200,
        body: { ok: true, deleted: true },
      });
      assert.deepEqual(await folders(alice, laptop.runnerId), ["/w/c", "/w/b"]);
      assert.deepEqual(
        (await dismiss(alice, laptop.runnerId, "/w/a")).body,
        { ok: true, deleted: false },
        "removing it again removes nothing",
      );
      assert.deepEqual((await dismiss(alice, laptop.runnerId, "/never")).body.deleted, false);
      await spawnSession(alice, laptop.runnerId, { cwd: "/w/d" });
      await spawnSession(alice, server.runnerId, { cwd: "/w/a" });
      assert.deepEqual(await folders(alice, laptop.runnerId), ["/w/d", "/w/c", "/w/b"]);
      assert.deepEqual(await folders(alice, server.runnerId), ["/w/a", "/srv/x"], "per runner");
    });

    await t.step("used again, it comes back on top", async () => {
      await spawnSession(alice, laptop.runnerId, { cwd: "/w/a" });
      assert.deepEqual(await folders(alice, laptop.runnerId), ["/w/a", "/w/d", "/w/c", "/w/b"]);
    });

    await t.step("removed right before a spawn into it, it still comes back", async () => {
      // The removal and the next session may fall in the same millisecond.
      for (let i = 0; i < 20; i++) {
        assert.equal((await dismiss(alice, laptop.runnerId, "/w/b")).status, 200);
        await spawnSession(alice, laptop.runnerId, { cwd: "/w/b" });
        assert.equal((await folders(alice, laptop.runnerId))[0], "/w/b", `round ${i}`);
      }
    });

    await t.step("a bad body changes nothing", async () => {
      const before = await folders(alice, laptop.runnerId);
      for (const body of [{}, { path: "" }, { path: "a\u0000b" }, { path: 5 }]) {
        const res = await alice.api(
          `/api/runners/${laptop.runnerId}/recent-folders`,
          json("DELETE", body),
        );
        assert.equal(res.status, 400);
        assert.equal((await res.json()).error.code, "invalid_body");
      }
      assert.deepEqual(await folders(alice, laptop.runnerId), before);
    });
  } finally {
    await laptop.close();
    await server.close();
    await bobs.close();
  }
});
