/**
 * Limits that hold across relay nodes (issue 22): two `baton relay`
 * processes on one PostgreSQL share one count of a webhook's fires, of
 * sign-ins and of registrations, and one memory of used nonces and delivered
 * bodies, so a second node is no way around either.
 *
 * @module
 */
import assert from "node:assert/strict";
import { json, signUp } from "./harness/client.ts";
import {
  assertGitHubReplays,
  assertRateLimited,
  createHook,
  enhanced,
  fire,
  github,
  startingRunner,
} from "./harness/webhooks.ts";
import type { FakeRunner } from "./harness/fake_runner.ts";
import { withTwoNodes } from "./harness/cluster.ts";
import { postgresAvailable } from "./harness/postgres.ts";
import { eventually } from "./harness/wait.ts";

const HAS_PG = postgresAvailable("the limits across relay nodes");

Deno.test({
  name:
    "a webhook's fire limit holds across two nodes: half its fires on each, the next refused on both",
  ignore: !HAS_PG,
  async fn() {
    await withTwoNodes(async ({ a, b }) => {
      const user = await signUp(a.url);
      // Deliveries its filter drops: counted, and nothing needs a runner.
      const hook = await createHook(user, { name: "CI", source: "ci", eventFilter: ["deploy"] });
      for (let i = 0; i < 6; i++) {
        const node = i % 2 ? b : a;
        const body = JSON.stringify({ type: "build", n: i });
        const res = await fire(node, hook.id, body, enhanced(hook.secret, body));
        assert.equal(res.status, 200, `fire ${i + 1}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.filtered, true);
      }
      for (const node of [b, a]) {
        const body = JSON.stringify({ type: "build", n: "over" });
        assertRateLimited(await fire(node, hook.id, body, enhanced(hook.secret, body)));
      }
      // Another webhook of the same account has its own allowance, on either node.
      const other = await createHook(user, { name: "Calm", source: "ci", eventFilter: ["x"] });
      const body = JSON.stringify({ type: "build" });
      assert.equal((await fire(b, other.id, body, enhanced(other.secret, body))).status, 200);
    }, { env: { BATON_WEBHOOK_RATE_LIMIT: "6" } });
  },
});

Deno.test({
  name:
    "a signed delivery replayed to the other node is refused, and a GitHub body under a new delivery id too",
  ignore: !HAS_PG,
  async fn() {
    await withTwoNodes(async ({ a, b }) => {
      let runner: FakeRunner | undefined;
      try {
        const user = await signUp(a.url);
        const started = await startingRunner(a, user);
        runner = started.runner;
        const { spawned } = started;

        // Enhanced signing: the nonce, claimed by node A, is used on node B too.
        const hook = await createHook(user, {
          name: "CI",
          source: "ci",
          runnerId: runner.runnerId,
        });
        const body = JSON.stringify({ type: "build", marker: "ONCE" });
        const captured = enhanced(hook.secret, body);
        const first = await fire(a, hook.id, body, captured);
        assert.equal(first.status, 200, JSON.stringify(first.body));
        assert.ok(first.body.sessionId);
        const replay = await fire(b, hook.id, body, captured);
        assert.equal(replay.status, 409, JSON.stringify(replay.body));
        assert.equal(replay.body.error.code, "nonce_reused");

        // GitHub signs the body only: the same delivery on B is a redelivery (answered
        // as one), the same body under a delivery id of the sender's choosing is refused.
        const gh = await createHook(user, {
          name: "GH",
          source: "github",
          runnerId: runner.runnerId,
        });
        const push = JSON.stringify({ ref: "refs/heads/main", marker: "CAPTURED" });
        const headers = await github(gh.secret, push, crypto.randomUUID());
        const delivered = await fire(a, gh.id, push, headers);
        assert.equal(delivered.status, 200, JSON.stringify(delivered.body));
        await assertGitHubReplays(b, gh.id, push, headers, delivered.body.sessionId);
        assert.equal(spawned.length, 2, "one session per delivery, none for the replays");
      } finally {
        await runner?.close();
      }
    });
  },
});

Deno.test({
  name:
    "a GitHub retry that reaches the other node while the first attempt still starts its session gets that session",
  ignore: !HAS_PG,
  async fn() {
    await withTwoNodes(async ({ a, b }) => {
      let runner: FakeRunner | undefined;
      try {
        const user = await signUp(a.url);
        let start!: () => void;
        const held = new Promise<void>((r) => start = r);
        const started = await startingRunner(a, user, undefined, held);
        runner = started.runner;
        const gh = await createHook(user, {
          name: "GH",
          source: "github",
          runnerId: runner.runnerId,
        });
        const push = JSON.stringify({ ref: "refs/heads/main", marker: "SLOW" });
        const headers = await github(gh.secret, push, crypto.randomUUID());
        const first = fire(a, gh.id, push, headers);
        await eventually("the spawn on the runner", () => started.spawned.length || undefined);
        // The sender gave up on A and retried; the balancer sent the retry to B.
        const retry = fire(b, gh.id, push, headers);
        const early = await Promise.race([
          retry.then((r) => r),
          new Promise<null>((r) => setTimeout(() => r(null), 500)),
        ]);
        assert.equal(early, null, `B answered before A's attempt ended: ${JSON.stringify(early)}`);
        start();
        const [delivered, again] = await Promise.all([first, retry]);
        assert.equal(delivered.status, 200, JSON.stringify(delivered.body));
        assert.equal(again.status, 200, JSON.stringify(again.body));
        assert.equal(again.body.duplicate, true);
        assert.equal(again.body.sessionId, delivered.body.sessionId);
        assert.equal(started.spawned.length, 1, "one session for the delivery and its retry");
        // Once answered, the body under another delivery id is still a replay, refused at once.
        await assertGitHubReplays(b, gh.id, push, headers, delivered.body.sessionId);
      } finally {
        await runner?.close();
      }
    });
  },
});

Deno.test({
  name: "sign-in attempts and registrations spread over two nodes hit one limit",
  ignore: !HAS_PG,
  async fn() {
    await withTwoNodes(async ({ a, b }) => {
      // One registration and one sign-in (for its cookie), on node A.
      const user = await signUp(a.url);
      const wrong = { email: user.email, password: "not the password" };

      // better-auth takes 20 sign-ins a minute from one address; each node alone would
      // take 20 more. Alternating nodes, the 20th attempt overall is the last one taken.
      const statuses: number[] = [];
      for (let i = 0; i < 30 && !statuses.includes(429); i++) {
        const node = i % 2 ? a : b;
        const res = await fetch(`${node.url}/api/auth/sign-in/email`, json("POST", wrong));
        statuses.push(res.status);
        if (res.status === 429) {
          const retry = Number(res.headers.get("x-retry-after"));
          assert.ok(retry >= 1 && retry <= 60, `X-Retry-After: ${retry}`);
        }
        await res.body?.cancel();
      }
      assert.deepEqual(statuses, [...Array(19).fill(401), 429], "refused at the 21st sign-in");
      for (const node of [a, b]) {
        const res = await fetch(`${node.url}/api/auth/sign-in/email`, json("POST", wrong));
        assert.equal(res.status, 429, "refused on both nodes");
        await res.body?.cancel();
      }

      // The CLI's registration takes 5 per 15 minutes from one address, across nodes.
      const registered: number[] = [];
      for (let i = 0; i < 5; i++) {
        const node = i % 2 ? a : b;
        const res = await fetch(`${node.url}/api/register`, json("POST", wrong));
        registered.push(res.status);
        if (res.status === 429) {
          const retry = Number(res.headers.get("retry-after"));
          assert.ok(retry > 800 && retry <= 900, `Retry-After: ${retry}`);
        }
        await res.body?.cancel();
      }
      assert.deepEqual(registered, [401, 401, 401, 401, 429], "the first was signUp's, on A");
    });
  },
});
