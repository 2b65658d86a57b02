/**
 * Push notifications with two relay nodes on one PostgreSQL and NATS (issue
 * 22): node A holds the runner and commits its events, so A decides what is
 * pushed; a person looking at the session through node B must spare them the
 * push all the same, and once B's tab is hidden, or its socket gone, the
 * pushes come again.
 *
 * @module
 */
import assert from "node:assert/strict";
import { json, signIn, signUp, type User, Viewer } from "./harness/client.ts";
import { withTwoNodes } from "./harness/cluster.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { NATS_SERVER, NatsServer } from "./harness/nats.ts";
import { postgresAvailable } from "./harness/postgres.ts";
import { PushService } from "./harness/push_service.ts";

const HAS_PG = postgresAvailable("push across relay nodes");

Deno.test({
  name:
    "a session on screen through node B spares the push node A sends; hidden or closed on B, A pushes again",
  ignore: !HAS_PG || !NATS_SERVER,
  async fn() {
    await using service = new PushService();
    const nats = await NatsServer.start();
    try {
      await withTwoNodes(async ({ a, b }) => {
        const user = await signUp(a.url);
        const fake = await FakeRunner.connect(a.url, { apiKey: await runnerToken(user) });
        const watcher = await Viewer.connect(a.url, { cookie: user.cookie });
        let viewer: Viewer | null = null;
        try {
          const pushed = await subscribePush(user, service);
          const id = await spawnSession(user, fake.runnerId);
          let seq = 0;
          const agentEnd = async () => {
            fake.sendEvents(id, [{ seq: ++seq, ts: Date.now(), e: { type: "agent_end" } }]);
            await fake.waitForAck(id, seq);
          };
          // What B says on the bus reaches A in order: once A's feed shows a rename made
          // through B, A has heard every screen notice B sent before it.
          watcher.send({ t: "watch" });
          const cookieB = await signIn(b.url, user.email, user.password);
          let renames = 0;
          const heardFromB = async () => {
            const title = `rename ${++renames}`;
            const res = await fetch(`${b.url}/api/sessions/${id}`, {
              ...json("PATCH", { title }),
              headers: { "content-type": "application/json", cookie: cookieB, origin: b.url },
            });
            assert.equal(res.status, 200, await res.text());
            await watcher.waitFor((m) =>
              m.t === "session" &&
              (m as { session?: { title?: string } }).session?.title === title
            );
          };

          // A push names the session's title when it was sent: which end it was for.
          // (Pushes of one session are sent in order, so one for an earlier end,
          // titled before the rename, would have come first.)
          const pushTitled = (title: string) =>
            service.until(
              () => service.of(pushed.id).some((p) => p.payload.title === title),
              `the push titled ${title}`,
            );

          // Nobody looks: pushed (and the push sender is warm, so a push that
          // should not go out would not lag behind the next one).
          await heardFromB();
          await agentEnd();
          await pushTitled("baton: rename 1");

          viewer = await Viewer.connect(b.url, { cookie: cookieB });
          viewer.subscribe(id);
          await viewer.waitFor((m) => m.t === "subscribed");
          viewer.send({ t: "visibility", sessionId: id, visible: true });
          await heardFromB();
          await agentEnd();

          // Hidden on B (the phone locked): A pushes the next end.
          viewer.send({ t: "visibility", sessionId: id, visible: false });
          await heardFromB();
          await agentEnd();
          await pushTitled("baton: rename 3");
          assert.equal(service.requests, 2, "no push while the session was on screen on B");

          // On screen again, then B's socket goes (the tab closed): that counts as off.
          viewer.send({ t: "visibility", sessionId: id, visible: true });
          await heardFromB();
          await agentEnd();
          await viewer.close();
          viewer = null;
          await heardFromB();
          await agentEnd();
          await pushTitled("baton: rename 5");
          assert.equal(service.requests, 3, "none while it was on screen again");
        } finally {
          await viewer?.close();
          await watcher.close();
          await fake.close();
        }
      }, {
        args: ["--allow-signup", "--bus", nats.url],
        env: { BATON_PUSH_ALLOW_ORIGINS: service.origin },
      });
    } finally {
      await nats.stop();
    }
  },
});

/** Subscribes the user's "browser" at the push service. */
async function subscribePush(user: User, service: PushService) {
  const s = await service.subscribe();
  const res = await user.web(
    "/api/push/subscribe",
    json("POST", { endpoint: s.endpoint, keys: s.keys }),
  );
  assert.equal(res.status, 200, await res.text());
  return s;
}
