/**
 * The relay's side of subagents, driven exactly by a fake runner: its
 * `subagents.*` calls checked (ownership, bad input, depth and count
 * limits), the child's answer bounded, children ended with their parent,
 * and push rule 2 (suppressChildNotifications) on a real child.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { SessionEventBody } from "../shared/protocol.ts";
import { MAX_SUBAGENTS_PER_SESSION, SUBAGENT_RESULT_MAX_CHARS } from "../shared/subagents_api.ts";
import { json, signUp, type User } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { tempDir } from "./harness/procs.ts";
import { PushService } from "./harness/push_service.ts";

let nextCall = 1;
/** Sends a call as a worker's tool would (through its daemon) and returns the relay's result. */
async function call(
  fake: FakeRunner,
  op: string,
  data: Record<string, unknown>,
): Promise<{ ok: boolean; data?: Record<string, unknown>; error?: { code: string } }> {
  const id = nextCall++;
  fake.send({ t: "call", id, op, data });
  const isMine = (m: Record<string, unknown>) => m.t === "result" && m.id === id;
  await fake.until(() => fake.received.some(isMine), `the result of ${op}`, 30_000);
  return fake.received.find(isMine) as never;
}

const seqs = new Map<string, number>();
async function emit(fake: FakeRunner, sessionId: string, e: SessionEventBody) {
  const seq = (seqs.get(sessionId) ?? 0) + 1;
  seqs.set(sessionId, seq);
  fake.sendEvents(sessionId, [{ seq, ts: Date.now(), e }]);
  await fake.waitForAck(sessionId, seq);
}

async function started(fake: FakeRunner, id: string) {
  await emit(fake, id, { type: "session_start", cwd: "/fake", model: null, resumed: false });
}

async function info(user: User, id: string) {
  return (await (await user.api(`/api/sessions/${id}`)).json()).session;
}

Deno.test("subagent calls: checked, limited, answered with bounded text, ended with the parent", async (t) => {
  await using service = new PushService();
  await using relay = await startTestRelay({
    allowSignup: true,
    pushAllowedOrigins: [service.origin],
  });
  const user = await signUp(relay.url);
  const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
  try {
    const parent = await spawnSession(user, fake.runnerId);
    await started(fake, parent);

    await t.step("bad input and foreign sessions are refused and start nothing", async () => {
      const before = fake.requests.filter((r) => r.op === "spawn").length;
      for (
        const [data, code] of [
          [{ sessionId: parent, task: "" }, "bad_request"],
          [{ sessionId: parent, task: 42 }, "bad_request"],
          [{ sessionId: parent, task: "x", agent: "../etc/passwd" }, "bad_request"],
          [{ sessionId: crypto.randomUUID(), task: "x" }, "not_found"],
          [{ task: "x" }, "not_found"],
        ] as const
      ) {
        const r = await call(fake, "subagents.spawn", data);
        assert.equal(r.ok, false, JSON.stringify(data));
        assert.equal(r.error?.code, code, JSON.stringify(data));
      }
      const other = await call(fake, "subagents.nope", { sessionId: parent });
      assert.equal(other.error?.code, "unknown_op");
      const waitForeign = await call(fake, "subagents.wait", {
        sessionId: parent,
        childId: parent,
      });
      assert.equal(waitForeign.error?.code, "not_found", "a session that is no child of it");
      assert.equal(fake.requests.filter((r) => r.op === "spawn").length, before);
    });

    await t.step("another user's runner cannot start or wait on this user's children", async () => {
      const bob = await signUp(relay.url, { name: "Bob" });
      const bobFake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(bob) });
      try {
        const r = await call(bobFake, "subagents.spawn", { sessionId: parent, task: "x" });
        assert.equal(r.error?.code, "not_found");
      } finally {
        await bobFake.close();
      }
    });

    let child = "";
    await t.step("a child's last assistant text is its answer, cut to the limit", async () => {
      const r = await call(fake, "subagents.spawn", { sessionId: parent, task: "do it" });
      assert.equal(r.ok, true, JSON.stringify(r));
      child = String(r.data!.sessionId);
      const spawnReq = fake.requests.findLast((q) => q.op === "spawn")!;
      assert.equal((spawnReq.data as { prompt: string }).prompt, "do it");
      const c = await info(user, child);
      assert.equal(c.parentId, parent);
      await started(fake, child);
      const pending = call(fake, "subagents.wait", { sessionId: parent, childId: child });
      const big = "y".repeat(SUBAGENT_RESULT_MAX_CHARS + 5000);
      await emit(fake, child, { type: "agent_start" });
      await emit(fake, child, {
        type: "message_end",
        message: { role: "assistant", content: [{ type: "text", text: "first" }] },
      });
      await emit(fake, child, {
        type: "message_end",
        message: { role: "assistant", content: [{ type: "text", text: big }] },
      });
      await emit(fake, child, { type: "agent_end" });
      const res = await pending;
      assert.equal(res.ok, true);
      assert.equal(res.data!.done, true);
      assert.equal(res.data!.ok, true);
      const text = String(res.data!.text);
      assert.ok(text.startsWith("y".repeat(SUBAGENT_RESULT_MAX_CHARS)));
      assert.ok(text.length < SUBAGENT_RESULT_MAX_CHARS + 300, `${text.length} characters`);
      assert.match(text, /answer cut/);
      // Its job done, the child is told to end.
      await fake.until(
        () =>
          fake.requests.some((q) =>
            q.op === "input" && (q.data as { sessionId: string; kind: string }).sessionId ===
              child &&
            (q.data as { kind: string }).kind === "end"
          ),
        "the child's end",
      );
    });

    await t.step("a model error in the child is a failed answer", async () => {
      const r = await call(fake, "subagents.spawn", { sessionId: parent, task: "fail" });
      const id = String(r.data!.sessionId);
      await started(fake, id);
      await emit(fake, id, {
        type: "message_end",
        message: { role: "assistant", stopReason: "error", errorMessage: "429 Too many" },
      });
      await emit(fake, id, { type: "agent_end" });
      const res = await call(fake, "subagents.wait", { sessionId: parent, childId: id });
      assert.deepEqual(res.data, { done: true, ok: false, text: "429 Too many" });
    });

    await t.step("depth: a grandchild cannot start subagents", async () => {
      const r1 = await call(fake, "subagents.spawn", { sessionId: child, task: "grand" });
      assert.equal(r1.ok, true, JSON.stringify(r1));
      const grand = String(r1.data!.sessionId);
      const r2 = await call(fake, "subagents.spawn", { sessionId: grand, task: "great" });
      assert.equal(r2.error?.code, "subagent_depth");
    });

    await t.step("a session starts at most MAX_SUBAGENTS_PER_SESSION children", async () => {
      const p2 = await spawnSession(user, fake.runnerId);
      await started(fake, p2);
      for (let i = 0; i < MAX_SUBAGENTS_PER_SESSION; i++) {
        const r = await call(fake, "subagents.spawn", { sessionId: p2, task: `t${i}` });
        assert.equal(r.ok, true, JSON.stringify(r));
      }
      const over = await call(fake, "subagents.spawn", { sessionId: p2, task: "one more" });
      assert.equal(over.error?.code, "subagent_limit");
      const kids = (await (await user.api(`/api/sessions/${p2}/children`)).json()).sessions;
      assert.equal(kids.length, MAX_SUBAGENTS_PER_SESSION);
    });

    await t.step("waits repeated on one child are held four at a time", async () => {
      const r = await call(fake, "subagents.spawn", { sessionId: parent, task: "waited" });
      const id = String(r.data!.sessionId);
      await started(fake, id);
      const t0 = Date.now();
      const waits = Array.from(
        { length: 10 },
        () => call(fake, "subagents.wait", { sessionId: parent, childId: id }),
      );
      const early = await Promise.all(waits.slice(4));
      assert.ok(Date.now() - t0 < 10_000, "the waits past four are answered at once");
      for (const w of early) assert.deepEqual(w.data, { done: false });
      await emit(fake, id, { type: "agent_end" });
      for (const w of await Promise.all(waits.slice(0, 4))) assert.equal(w.data!.done, true);
    });

    await t.step("children end when their parent ends", async () => {
      const p3 = await spawnSession(user, fake.runnerId);
      await started(fake, p3);
      const r = await call(fake, "subagents.spawn", { sessionId: p3, task: "long" });
      const kid = String(r.data!.sessionId);
      await started(fake, kid);
      await emit(fake, p3, { type: "session_end", reason: "crashed", message: "gone" });
      await fake.until(
        () =>
          fake.requests.some((q) =>
            q.op === "input" && (q.data as { sessionId: string }).sessionId === kid &&
            (q.data as { kind: string }).kind === "end"
          ),
        "the child's end after its parent's",
      );
    });

    await t.step(
      "push rule 2: a suppressing subscription skips the child, never the parent",
      async () => {
        const sub = async (suppress: boolean) => {
          const s = await service.subscribe();
          const res = await user.web(
            "/api/push/subscribe",
            json("POST", { endpoint: s.endpoint, keys: s.keys }),
          );
          assert.equal(res.status, 200);
          const id = (await res.json()).id as string;
          if (suppress) {
            const put = await user.web(
              "/api/push/child-notifications",
              json("PUT", { endpoint: s.endpoint, suppress: true }),
            );
            assert.equal(put.status, 200);
            await put.body?.cancel();
          }
          return { ...s, subscriptionId: id };
        };
        const quiet = await sub(true);
        const loud = await sub(false);
        const p4 = await spawnSession(user, fake.runnerId);
        await started(fake, p4);
        const r = await call(fake, "subagents.spawn", { sessionId: p4, task: "notify" });
        const kid = String(r.data!.sessionId);
        await started(fake, kid);
        await emit(fake, kid, { type: "agent_end" });
        await service.until(() => service.of(loud.id).length === 1, "the child's push to loud");
        await emit(fake, p4, { type: "agent_end" });
        await service.until(() => service.of(loud.id).length === 2, "the parent's push to loud");
        await service.until(() => service.of(quiet.id).length === 1, "the parent's push to quiet");
        await relay.relay.hub.push!.idle();
        assert.deepEqual(service.of(quiet.id).map((m) => m.payload.sessionId), [p4]);
        assert.deepEqual(service.of(loud.id).map((m) => m.payload.sessionId), [kid, p4]);
      },
    );
  } finally {
    await fake.close();
  }
});

Deno.test("a child that answers after a relay restart is read back from its log and ended", async () => {
  const dataDir = await tempDir("baton-subagents-");
  const runnerId = crypto.randomUUID();
  try {
    let token: string, parent: string, child: string;
    {
      await using relay = await startTestRelay({ dataDir });
      const user = await signUp(relay.url);
      token = await runnerToken(user);
      const fake = await FakeRunner.connect(relay.url, { apiKey: token, runnerId });
      try {
        parent = await spawnSession(user, runnerId);
        await started(fake, parent);
        const r = await call(fake, "subagents.spawn", { sessionId: parent, task: "long job" });
        child = String(r.data!.sessionId);
        await started(fake, child);
      } finally {
        await fake.close();
      }
    }
    await using relay = await startTestRelay({ dataDir });
    const fake = await FakeRunner.connect(relay.url, {
      apiKey: token,
      runnerId,
      sessions: [parent, child],
    });
    try {
      // The child answers while no wait follows it (the relay forgot it with its memory).
      await emit(fake, child, {
        type: "message_end",
        message: { role: "assistant", content: [{ type: "text", text: "survived" }] },
      });
      await emit(fake, child, { type: "agent_end" });
      const res = await call(fake, "subagents.wait", { sessionId: parent, childId: child });
      assert.deepEqual(res.data, { done: true, ok: true, text: "survived" });
      await fake.until(
        () =>
          fake.requests.some((q) =>
            q.op === "input" && (q.data as { sessionId: string }).sessionId === child &&
            (q.data as { kind: string }).kind === "end"
          ),
        "the answered child's end",
      );
    } finally {
      await fake.close();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});
