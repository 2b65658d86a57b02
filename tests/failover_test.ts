/**
 * A runner given several relay nodes (issue 22): when its node dies it
 * moves to another, and its sessions go on from their last acknowledged seq
 * with nothing lost and nothing twice; a first node that is down at start is
 * passed over; a bad URL in the list stops `baton runner` with one line.
 */
import assert from "node:assert/strict";
import { assertContiguous, json, signIn, signUp, storedEvents, Viewer } from "./harness/client.ts";
import { FakeRunner } from "./harness/fake_runner.ts";
import { onNode as on, streamedText, withRunner, withTwoNodes } from "./harness/cluster.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import { NATS_SERVER, NatsServer } from "./harness/nats.ts";
import { postgresAvailable } from "./harness/postgres.ts";
import { baseEnv, baton, RelayProcess, tempDir } from "./harness/procs.ts";

const HAS_PG = postgresAvailable("the runner failover tests on two relay nodes");
if (!NATS_SERVER) {
  console.log("nats-server is not installed: the failover test with a bus is ignored");
}

/** A loopback URL nothing listens on. */
function deadUrl(): string {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return `http://127.0.0.1:${port}`;
}

Deno.test({
  name:
    "a runner whose relay node is SIGKILLed mid-stream moves to the other node with its tunnel, and the session's log has every seq once",
  ignore: !HAS_PG,
  async fn() {
    const llm = MockLlm.start();
    // A service on the runner's machine, reached through the tunnel.
    const service = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () => new Response("from the runner's machine"),
    );
    try {
      await withTwoNodes(async ({ a, b }) => {
        let world: Awaited<ReturnType<typeof withRunner>> | undefined;
        try {
          world = await withRunner(a, llm, { relayUrl: `${a.url},${b.url}` });
          const { user, runner, runnerId } = world;
          assert.match(runner.proc.output(), new RegExp(`connecting to ${a.url}, ${b.url}`));
          /** A GET of the service through a node's tunnel, signed in there as a browser is. */
          const throughTunnel = async (node: RelayProcess) => {
            const cookie = await signIn(node.url, user.email, user.password);
            const res = await fetch(
              `${node.url}/api/tunnel/runner/${runnerId}/${service.addr.port}/`,
              { headers: { cookie } },
            );
            return `${res.status} ${await res.text()}`;
          };
          await runner.proc.waitFor(new RegExp(`tunnel connected to ${a.url}`), 20_000);
          assert.equal(await throughTunnel(a), "200 from the runner's machine");

          const pieces = Array.from({ length: 80 }, (_, i) => `p${i} `);
          llm.enqueue({ text: pieces, chunkDelayMs: 25 });
          const id = await world.spawn("stream through a node's death");
          const onA = await Viewer.connect(a.url, { apiKey: user.apiKey });
          onA.subscribe(id);
          await onA.until(() => onA.eventsOf(id).length > 15, "some streamed events on node A");
          const before = await storedEvents(user, id);
          assert.ok(!before.some((e) => e.e.type === "agent_end"), "node A dies mid-stream");
          const killedAt = Date.now();
          await a.kill("SIGKILL");
          await onA.closed;

          // The first reconnect waits the backoff's first step (0.25–0.5 s):
          // well under 10 s even on a loaded machine.
          await runner.connected(2, 10_000);
          const movedMs = Date.now() - killedAt;
          assert.ok(movedMs < 10_000, `moved to node B in ${movedMs} ms`);
          assert.match(runner.proc.output(), new RegExp(`reconnecting to ${b.url}`));

          const userB = on(b, user);
          const onB = await Viewer.connect(b.url, { apiKey: user.apiKey });
          try {
            onB.subscribe(id);
            await onB.waitForEvent(id, "agent_end", 30_000);
            const seen = onB.eventsOf(id);
            assertContiguous(seen);
            const stored = await storedEvents(userB, id);
            assertContiguous(stored);
            assert.deepEqual(seen, stored, "the viewer on B saw exactly the stored log");
            assert.deepEqual(
              stored.slice(0, before.length),
              before,
              "what node A had stored is kept, unchanged",
            );
            assert.equal(streamedText(stored), pieces.join(""), "every piece arrived exactly once");
            assert.equal(stored.filter((e) => e.e.type === "agent_end").length, 1);
            const res = await userB.api(`/api/sessions/${id}`);
            const { session } = await res.json();
            assert.equal(res.status, 200);
            assert.equal(session.lastSeq, stored.at(-1)!.seq, "node B's session row is up to date");
            assert.equal(session.status, "running", "the session goes on");
            assert.equal(session.activity, "idle", "its turn ended");
          } finally {
            await onB.close();
          }

          // The tunnel followed the control channel to B.
          await runner.proc.waitFor(new RegExp(`tunnel connected to ${b.url}`), 20_000);
          assert.equal(await throughTunnel(b), "200 from the runner's machine");
        } finally {
          await world?.runner.stop();
        }
      });
    } finally {
      await service.shutdown();
      await llm.close();
    }
  },
});

Deno.test({
  name:
    "with a bus, a viewer on node B watching a runner on node A sees every event once, in order, across A's SIGKILL and the runner's move to B",
  ignore: !HAS_PG || !NATS_SERVER,
  async fn() {
    await using nats = await NatsServer.start();
    const llm = MockLlm.start();
    try {
      await withTwoNodes(async ({ a, b }) => {
        let world: Awaited<ReturnType<typeof withRunner>> | undefined;
        let viewer: Viewer | undefined;
        try {
          world = await withRunner(a, llm, { relayUrl: `${a.url},${b.url}` });
          const { user, runner } = world;
          const pieces = Array.from({ length: 80 }, (_, i) => `p${i} `);
          llm.enqueue({ text: pieces, chunkDelayMs: 25 });
          const id = await world.spawn("stream to node B's viewer through a node's death");
          viewer = await Viewer.connect(b.url, { apiKey: user.apiKey });
          const v = viewer;
          v.subscribe(id);
          // Live from node A over the bus.
          await v.until(() => v.eventsOf(id).length > 15, "some events on node B while A ingests");
          const before = await storedEvents(user, id);
          assert.ok(!before.some((e) => e.e.type === "agent_end"), "node A dies mid-stream");
          await a.kill("SIGKILL");
          await runner.connected(2, 10_000);
          await v.waitForEvent(id, "agent_end", 30_000);
          const seen = v.eventsOf(id);
          assertContiguous(seen);
          const stored = await storedEvents(on(b, user), id);
          assert.deepEqual(
            seen,
            stored,
            "node B's viewer saw exactly the stored log, each seq once",
          );
          assert.deepEqual(stored.slice(0, before.length), before);
          assert.equal(streamedText(seen), pieces.join(""));
        } finally {
          await viewer?.close();
          await world?.runner.stop();
        }
      }, { env: { BATON_BUS_URL: nats.url } });
    } finally {
      await llm.close();
    }
  },
});

Deno.test({
  name:
    "events node A stored but never acknowledged, re-sent to node B that holds the session from before, are stored and shown once",
  ignore: !HAS_PG,
  async fn() {
    // The window a real runner hits by chance (A commits, dies before its
    // ack leaves), driven on purpose with a runner that speaks the protocol;
    // B loaded the session earlier for a viewer, so its own idea of the
    // session's last seq is behind the log.
    await withTwoNodes(async ({ a, b }) => {
      const delta = (seq: number) => ({
        seq,
        ts: Date.now(),
        e: {
          type: "message_update",
          assistantMessageEvent: { type: "text_delta", delta: `d${seq} ` },
        },
      });
      const seqs = (from: number, to: number) =>
        Array.from({ length: to - from + 1 }, (_, i) => delta(from + i));
      const viewers: Viewer[] = [];
      try {
        const user = await signUp(a.url);
        const onA = await FakeRunner.connect(a.url, { apiKey: user.apiKey });
        const spawned = await user.api(
          "/api/runners/spawn",
          json("POST", { runnerId: onA.runnerId, cwd: "/fake", prompt: "x" }),
        );
        const { sessionId: id } = await spawned.json();
        onA.sendEvents(id, seqs(1, 10));
        await onA.waitForAck(id, 10);
        const early = await Viewer.connect(b.url, { apiKey: user.apiKey });
        viewers.push(early);
        early.subscribe(id);
        await early.until(() => early.eventsOf(id).length >= 10, "B's viewer caught up to 10");
        onA.sendEvents(id, seqs(11, 20));
        await onA.waitForAck(id, 20);
        await a.kill("SIGKILL");
        await onA.closed;

        // As a runner that never got the acks of 16..20: it sends them again.
        const onB = await FakeRunner.connect(b.url, {
          apiKey: user.apiKey,
          runnerId: onA.runnerId,
          sessions: [id],
        });
        assert.ok((onB.welcome.acked[id] ?? 0) <= 20);
        onB.sendEvents(id, seqs(16, 25));
        await onB.waitForAck(id, 25);
        const stored = await storedEvents(on(b, user), id);
        assertContiguous(stored);
        assert.equal(stored.length, 25);
        assert.equal(
          streamedText(stored),
          seqs(1, 25).map((e) => e.e.assistantMessageEvent.delta).join(""),
        );
        await early.until(() => early.eventsOf(id).length >= 25, "B's first viewer has 25");
        const late = await Viewer.connect(b.url, { apiKey: user.apiKey });
        viewers.push(late);
        late.subscribe(id);
        await late.until(() => late.eventsOf(id).length >= 25, "a new viewer on B has 25");
        await onB.barrier();
        assert.deepEqual(
          early.eventsOf(id),
          stored,
          "the viewer on B from before saw each seq once",
        );
        assert.deepEqual(late.eventsOf(id), stored);
        await onB.close();
      } finally {
        for (const v of viewers) await v.close();
      }
    });
  },
});

Deno.test("a runner whose first relay URL is down at start connects to the second", async () => {
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  const dead = deadUrl();
  let world: Awaited<ReturnType<typeof withRunner>> | undefined;
  try {
    world = await withRunner(relay, llm, { relayUrl: `${dead},${relay.url}` });
    const { user, runner } = world;
    assert.match(runner.proc.output(), new RegExp(`reconnecting to ${relay.url}`));
    const [r] = await (await user.api("/api/runners")).json();
    assert.equal(r.connected, true, JSON.stringify(r));
    // A session works through the second node.
    llm.enqueue({ text: ["all ", "good"] });
    const id = await world.spawn("hello");
    const v = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      v.subscribe(id);
      await v.waitForEvent(id, "agent_end", 30_000);
      assert.equal(streamedText(v.eventsOf(id)), "all good");
    } finally {
      await v.close();
    }
  } finally {
    await world?.runner.stop();
    await relay.stop();
    await llm.close();
  }
});

Deno.test("baton runner refuses a bad URL anywhere in its relay list with one line and exit 2", async () => {
  const home = await tempDir();
  const env = baseEnv(home, { BATON_API_KEY: "brt_unused" });
  const cases: [string[], Record<string, string>, RegExp][] = [
    [
      ["--relay", "http://127.0.0.1:1,ftp://relay.example"],
      {},
      /'ftp:\/\/relay\.example'.* in --relay/,
    ],
    [["--relay", "http://127.0.0.1:1", "--relay", "not a url"], {}, /'not a url' in --relay/],
    [[], { BATON_RELAY_URL: "http://127.0.0.1:1,http://[bad" }, /in BATON_RELAY_URL/],
    [["--relay", " , "], {}, /Invalid --relay: no relay URL/],
    // Nor is a service unit written that could not start.
    [["install", "--dry-run", "--relay", "http://127.0.0.1:1,ws//x"], {}, /'ws\/\/x' in --relay/],
  ];
  for (const [args, extra, message] of cases) {
    const out = await baton(["runner", ...args], { ...env, ...extra });
    assert.equal(out.code, 2, `${args.join(" ")}: ${out.stderr}`);
    const lines = out.stderr.trim().split("\n");
    assert.equal(lines.length, 1, out.stderr);
    assert.match(lines[0]!, message);
    assert.equal(out.stdout, "", "nothing started");
  }
});
