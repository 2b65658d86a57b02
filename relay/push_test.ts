import assert from "node:assert/strict";
import { MAX_QUEUED, PushNotifier } from "./push.ts";
import { kindEnabled, parseEnabledEvents, topicOf } from "./push_kinds.ts";
import type { PushSubscriptionRecord } from "./store/mod.ts";
import type { SendOutcome } from "./push_sender.ts";
import { PushSender } from "./push_sender.ts";
import { endpointProblem, isPublicAddress, sendProblem } from "./push_endpoint.ts";
import { generateVapidKeys } from "./push_keys.ts";

/** Lets the notifier's steps (each a few promises) run. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

function sub(id: string, over: Partial<PushSubscriptionRecord> = {}): PushSubscriptionRecord {
  return {
    id,
    userId: "u1",
    endpoint: `https://push.example.com/${id}`,
    p256dh: "k",
    auth: "a",
    enabledEvents: "*",
    suppressChildNotifications: false,
    createdAt: "2026-01-01T00:00:00.000Z",
    ...over,
  };
}

/** A notifier over fixed subscriptions whose sends are recorded (and answered by `answer`). */
function notifier(subs: PushSubscriptionRecord[], options: {
  parentOf?: (id: string) => string | null;
  answer?: () => Promise<SendOutcome>;
  maxQueued?: number;
  onScreen?: () => boolean;
} = {}) {
  const sent: { endpoint: string; payload: Record<string, unknown>; topic: string }[] = [];
  const deleted: string[] = [];
  const n = new PushNotifier({
    store: {
      push: {
        listOf: () => subs,
        countOf: () => subs.length,
        byEndpoint: (e: string) => subs.find((s) => s.endpoint === e) ?? null,
        delete: (id: string) => deleted.push(id),
      },
      sessions: { get: () => ({ title: "fix the tests" }) },
    } as never,
    send: (t, payload, d) => {
      sent.push({ endpoint: t.endpoint, payload: JSON.parse(payload), topic: d.topic });
      return options.answer?.() ?? Promise.resolve({ ok: true, status: 201 });
    },
    onScreen: options.onScreen ?? (() => false),
    ...(options.parentOf ? { parentOf: options.parentOf } : {}),
    ...(options.maxQueued ? { maxQueued: options.maxQueued } : {}),
  });
  return { n, sent, deleted };
}

Deno.test("rule 2: suppressing child notifications skips a child's, never the parent's", async () => {
  const quiet = sub("quiet", { suppressChildNotifications: true });
  const loud = sub("loud");
  const { n, sent } = notifier([quiet, loud], {
    parentOf: (id) => (id === "child" ? "parent" : null),
  });
  n.notify("u1", "child", "agent_finished");
  n.notify("u1", "parent", "agent_finished");
  await n.idle();
  const got = sent.map((s) => `${s.endpoint.split("/").pop()} ${s.payload.sessionId}`).sort();
  assert.deepEqual(got, ["loud child", "loud parent", "quiet parent"]);
});

Deno.test("kinds: '*' takes all, a list takes its own; unknown kinds are refused", () => {
  assert.ok(kindEnabled("*", "agent_error"));
  assert.ok(kindEnabled("agent_error,agent_finished", "agent_finished"));
  assert.ok(!kindEnabled("agent_error", "agent_finished"));
  assert.equal(parseEnabledEvents("agent_error, *"), "*");
  assert.ok(parseEnabledEvents("agent_done") instanceof Error);
  assert.match(topicOf("a session id"), /^[A-Za-z0-9_-]{32}$/);
});

Deno.test("a push service that never answers holds a bounded queue, newest per session kept", async () => {
  const hanging: (() => void)[] = [];
  const { n, sent } = notifier([sub("s")], {
    answer: () => new Promise((resolve) => hanging.push(() => resolve({ ok: true, status: 201 }))),
    maxQueued: 50,
  });
  for (let i = 0; i < 5000; i++) n.notify("u1", `session-${i}`, "agent_finished");
  await settled();
  // 4 in flight; of the rest only the newest 50 wait.
  assert.deepEqual(n.pending, { queued: 50, inFlight: 4, dropped: 5000 - 54 });
  // A newer notification of a waiting session replaces it instead of queueing twice.
  n.notify("u1", "session-4999", "agent_error", "boom");
  await settled();
  assert.equal(n.pending.queued, 50);
  for (let i = 0; hanging.length > 0 && i < 100; i++) {
    for (const r of hanging.splice(0)) r();
    await new Promise((r) => setTimeout(r, 0));
  }
  await n.idle();
  assert.equal(sent.length, 54);
  const last = sent.filter((s) => s.payload.sessionId === "session-4999");
  assert.deepEqual(last.map((s) => s.payload.kind), ["agent_error"]);
  assert.ok(MAX_QUEUED >= 50);
});

Deno.test("a 410 deletes the subscription, a 500 keeps it", async () => {
  const statuses = [410, 500];
  const subs = [sub("a"), sub("b")];
  const { n, deleted } = notifier(subs, {
    answer: () => {
      const status = statuses.shift()!;
      return Promise.resolve(
        status === 410
          ? { ok: false, gone: true, status }
          : { ok: false, gone: false, status, reason: "x" },
      );
    },
  });
  n.notify("u1", "s1", "agent_finished");
  await n.idle();
  assert.deepEqual(deleted, ["a"]);
});

Deno.test("endpoints: https to public names only; names are resolved before each send", async () => {
  const none = new Set<string>();
  assert.equal(endpointProblem("https://fcm.googleapis.com/fcm/send/abc", none), null);
  assert.equal(endpointProblem("https://[2606:4700::1111]/x", none), null);
  assert.match(endpointProblem("https://[fe80::1]/x", none)!, /private/);
  assert.match(endpointProblem("https://[64:ff9b::a9fe:a9fe]/x", none)!, /private/);
  assert.match(endpointProblem("https://100.64.0.1/x", none)!, /private/);
  assert.equal(endpointProblem("http://127.0.0.1:9/x", new Set(["http://127.0.0.1:9"])), null);
  assert.ok(isPublicAddress("8.8.8.8"));
  assert.ok(!isPublicAddress("::"));
  // A public-looking name pointed at the metadata address is refused when sending.
  const rebound = await sendProblem(
    "https://push.example.com/x",
    none,
    () => Promise.resolve(["93.184.215.14", "169.254.169.254"]),
  );
  assert.match(rebound!, /169\.254\.169\.254/);
  assert.match(
    (await sendProblem("https://push.example.com/x", none, () => Promise.resolve([])))!,
    /does not resolve/,
  );
  assert.equal(
    await sendProblem("https://push.example.com/x", none, () => Promise.resolve(["8.8.4.4"])),
    null,
  );
});

Deno.test("a send gives up at its time limit and does not follow redirects", async () => {
  const keys = { ...(await generateVapidKeys()), subject: "mailto:a@example.com" };
  const pending: (() => void)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    if (req.url.endsWith("/redirect")) {
      return new Response(null, { status: 307, headers: { location: "http://127.0.0.1:1/" } });
    }
    return new Promise((r) => pending.push(() => r(new Response(null, { status: 201 }))));
  });
  const origin = `http://127.0.0.1:${server.addr.port}`;
  try {
    const sender = new PushSender({ keys, allowedOrigins: new Set([origin]), timeoutMs: 300 });
    const target = {
      p256dh:
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
      auth: "BTBZMqHH6r4Tts7J_aSIgg",
    };
    const delivery = { ttl: 60, urgency: "normal" as const, topic: "t" };
    const t0 = Date.now();
    const slow = await sender.send({ ...target, endpoint: `${origin}/slow` }, "{}", delivery);
    assert.equal(slow.ok, false);
    assert.match((slow as { reason: string }).reason, /No answer within 300 ms/);
    assert.ok(Date.now() - t0 < 5000);
    const moved = await sender.send({ ...target, endpoint: `${origin}/redirect` }, "{}", delivery);
    assert.deepEqual(moved, {
      ok: false,
      gone: false,
      status: 307,
      reason: "Push service answered 307",
    });
  } finally {
    for (const r of pending.splice(0)) r();
    await server.shutdown();
  }
});

Deno.test("an answer arriving after close touches no closed database", async () => {
  let answer!: (o: SendOutcome) => void;
  const n = new PushNotifier({
    store: {
      push: {
        listOf: () => [sub("a")],
        countOf: () => 1,
        byEndpoint: () => {
          throw new Error("database is not open");
        },
        delete: () => {
          throw new Error("database is not open");
        },
      },
      sessions: { get: () => undefined },
    } as never,
    send: () => new Promise((r) => answer = r),
    onScreen: () => false,
  });
  n.notify("u1", "s1", "agent_finished");
  await settled();
  n.close();
  answer({ ok: false, gone: true, status: 410 });
  await n.idle();
});

Deno.test("notifications keep the order of their events when the store answers the older one later", async () => {
  let calls = 0;
  const sent: string[] = [];
  const n = new PushNotifier({
    store: {
      push: {
        listOf: () => Promise.resolve([sub("a")]),
        // The first lookup takes longer than the second, as a busy remote store may.
        countOf: () =>
          new Promise((resolve) => setTimeout(() => resolve(1), calls++ === 0 ? 30 : 0)),
      },
      sessions: { get: () => Promise.resolve(undefined) },
    } as never,
    send: (_t, payload) => {
      sent.push(JSON.parse(payload).kind);
      return Promise.resolve({ ok: true, status: 201 });
    },
    onScreen: () => false,
  });
  n.notify("u1", "s1", "agent_needs_input", "which branch?");
  n.notify("u1", "s1", "agent_finished");
  await n.idle();
  assert.deepEqual(sent, ["agent_needs_input", "agent_finished"]);
});

/** Commits one event of session `s1` to the notifier, as the pipeline does. */
function commit(n: PushNotifier, e: Record<string, unknown>, sessionId = "s1"): void {
  const json = JSON.stringify({ seq: 1, ts: Date.now(), e });
  n.committed({ sessionId, userId: "u1", runnerId: "r", events: [{ json }], patch: null } as never);
}

/** The event of the question `toolCallId` answered through `via`. */
const answered = (toolCallId: string, via: "session" | "push") => ({
  type: "question_answered",
  toolCallId,
  kind: "question",
  answer: "SQLite",
  via,
});

const ASK = {
  type: "question",
  toolCallId: "call_1",
  kind: "question",
  questions: [{ question: "Which database?", options: [{ label: "SQLite" }] }],
};

Deno.test("a question answered in a session view or cancelled withdraws its notification; one answered from it does not", async (t) => {
  await t.step("answered in a session view, even with the session on screen", async () => {
    let onScreen = false;
    const { n, sent } = notifier([sub("a")], { onScreen: () => onScreen });
    commit(n, ASK);
    await n.idle();
    onScreen = true;
    commit(n, answered("call_1", "session"));
    await n.idle();
    assert.equal(sent.length, 2);
    const [asked, withdrawn] = sent;
    assert.equal(
      withdrawn!.topic,
      asked!.topic,
      "the push service replaces an undelivered question",
    );
    assert.equal(withdrawn!.payload.tag, asked!.payload.tag);
    assert.equal(withdrawn!.payload.kind, "agent_needs_input");
    assert.equal(withdrawn!.payload.resolved, "answered");
    assert.equal(withdrawn!.payload.toolCallId, "call_1");
    assert.equal(withdrawn!.payload.actions, undefined);
    assert.equal(withdrawn!.payload.body, 'agent in "fix the tests": the question was answered');
  });
  await t.step("the agent stopped", async () => {
    const { n, sent } = notifier([sub("a")]);
    commit(n, ASK);
    await n.idle();
    commit(n, { type: "question_cancelled", toolCallId: "call_1", reason: "stopped" });
    await n.idle();
    assert.deepEqual(sent.map((s) => s.payload.resolved), [undefined, "cancelled"]);
    assert.match(String(sent[1]!.payload.body), /no longer waits for an answer/);
  });
  await t.step("answered from the notification: the device that answered closed it", async () => {
    const { n, sent } = notifier([sub("a")]);
    commit(n, ASK);
    await n.idle();
    commit(n, answered("call_1", "push"));
    await n.idle();
    assert.deepEqual(sent.map((s) => s.payload.resolved), [undefined]);
  });
  await t.step(
    "answered from one device's notification: withdrawn on the others only",
    async () => {
      const phone = sub("phone");
      const desk = sub("desk");
      const { n, sent } = notifier([
        phone,
        desk,
        sub("quiet", { enabledEvents: "agent_finished" }),
      ]);
      commit(n, ASK);
      await n.idle();
      assert.deepEqual(sent.map((s) => s.endpoint), [phone.endpoint, desk.endpoint]);
      // The node that took the answer says from where; the event itself withdraws nothing.
      n.answeredFrom("u1", "s1", "call_1", phone.endpoint);
      commit(n, answered("call_1", "push"));
      await n.idle();
      const withdrawals = sent.slice(2);
      assert.deepEqual(withdrawals.map((s) => s.endpoint), [desk.endpoint]);
      assert.equal(withdrawals[0]!.payload.resolved, "answered");
      assert.equal(withdrawals[0]!.payload.toolCallId, "call_1");
      assert.equal(withdrawals[0]!.topic, sent[1]!.topic);
    },
  );
  await t.step(
    "a withdrawal late from the answering request spares the next question",
    async () => {
      const release: (() => void)[] = [];
      let hold = false;
      const { n, sent } = notifier([sub("phone"), sub("desk")], {
        answer: () =>
          hold
            ? new Promise((r) => release.push(() => r({ ok: true, status: 201 })))
            : Promise.resolve({ ok: true, status: 201 }),
      });
      commit(n, ASK);
      await n.idle();
      // Four other sessions fill the deliveries in flight, so the next question waits.
      hold = true;
      for (let i = 0; i < 4; i++) n.notify("u1", `busy-${i}`, "agent_finished");
      await settled();
      commit(n, answered("call_1", "push"));
      commit(n, { ...ASK, toolCallId: "call_2" });
      await settled();
      n.answeredFrom("u1", "s1", "call_1", "https://push.example.com/phone");
      for (let i = 0; i < 50 && (release.length > 0 || n.pending.inFlight > 0); i++) {
        for (const r of release.splice(0)) r();
        await settled();
      }
      await n.idle();
      const s1 = sent.filter((s) => s.payload.sessionId === "s1").slice(2);
      assert.deepEqual(s1.map((s) => [s.payload.toolCallId, s.payload.resolved]), [
        ["call_2", undefined],
        ["call_2", undefined],
      ]);
    },
  );
  await t.step("another question, or a notification sent since, is not withdrawn", async () => {
    const { n, sent } = notifier([sub("a")]);
    commit(n, ASK);
    await n.idle();
    commit(n, answered("call_other", "session"));
    n.notify("u1", "s1", "agent_error", "boom");
    commit(n, { type: "question_cancelled", toolCallId: "call_1", reason: "stopped" });
    await n.idle();
    assert.deepEqual(sent.map((s) => s.payload.kind), ["agent_needs_input", "agent_error"]);
  });
  await t.step("still waiting here when answered: dropped, nothing sent", async () => {
    const release: (() => void)[] = [];
    const { n, sent } = notifier([sub("a")], {
      answer: () => new Promise((r) => release.push(() => r({ ok: true, status: 201 }))),
    });
    // Four other sessions fill the deliveries in flight, so the question waits.
    for (let i = 0; i < 4; i++) n.notify("u1", `busy-${i}`, "agent_finished");
    await settled();
    commit(n, ASK);
    await settled();
    assert.equal(n.pending.queued, 1);
    commit(n, answered("call_1", "session"));
    for (let i = 0; i < 50 && (release.length > 0 || n.pending.inFlight > 0); i++) {
      for (const r of release.splice(0)) r();
      await settled();
    }
    await n.idle();
    assert.deepEqual(sent.filter((s) => s.payload.sessionId === "s1"), []);
  });
});
