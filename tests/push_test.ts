/**
 * Push notifications end to end: the `/api/push/*` routes, and messages a
 * real relay sends to a push service written in the test, which checks the
 * VAPID JWT and decrypts each payload (tests/harness/push_service.ts).
 * Session events come from a fake runner, so each rule is driven exactly.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { PushPayload, PushSubscriptionsResponse } from "../shared/api.ts";
import type { SessionEventBody } from "../shared/protocol.ts";
import { errorCode, json, signUp, type User, Viewer } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";
import { baseEnv, baton, RelayProcess, tempDir } from "./harness/procs.ts";
import { b64urlDecode, PushService } from "./harness/push_service.ts";

/** A relay that may call the test push service, a user with a fake runner and a session. */
async function world(service: PushService, dataDir?: string) {
  const relay = await startTestRelay({
    pushAllowedOrigins: [service.origin],
    ...(dataDir ? { dataDir } : {}),
  });
  const user = await signUp(relay.url);
  const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
  return { relay, user, fake };
}

async function subscribe(user: User, service: PushService, enabledEvents?: string) {
  const s = await service.subscribe();
  const res = await user.web(
    "/api/push/subscribe",
    json("POST", {
      endpoint: s.endpoint,
      keys: s.keys,
      ...(enabledEvents ? { enabledEvents } : {}),
    }),
  );
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return { ...s, subscriptionId: (JSON.parse(text) as { id: string }).id };
}

/** Sends one event of a session, numbered after the last one. */
let seqs = new Map<string, number>();
async function emit(fake: FakeRunner, sessionId: string, e: SessionEventBody, ts = Date.now()) {
  const seq = (seqs.get(sessionId) ?? 0) + 1;
  seqs.set(sessionId, seq);
  fake.sendEvents(sessionId, [{ seq, ts, e }]);
  await fake.waitForAck(sessionId, seq);
}

/** Resolves once the relay sent every notification it queued. */
async function settled(relay: TestRelay): Promise<void> {
  await relay.relay.hub.push!.idle();
}

async function listOf(user: User): Promise<PushSubscriptionsResponse["subscriptions"]> {
  const res = await user.web("/api/push/subscriptions");
  assert.equal(res.status, 200);
  return ((await res.json()) as PushSubscriptionsResponse).subscriptions;
}

Deno.test("the VAPID key is public; subscriptions need a browser session", async () => {
  await using relay = await startTestRelay();
  const res = await fetch(`${relay.url}/api/push/vapid-public-key`);
  assert.equal(res.status, 200);
  const { publicKey } = await res.json();
  const raw = b64urlDecode(publicKey);
  assert.equal(raw.length, 65);
  assert.equal(raw[0], 4);

  assert.equal(
    await errorCode(await fetch(`${relay.url}/api/push/subscriptions`), 401),
    "unauthorized",
  );
  const user = await signUp(relay.url);
  assert.equal(await errorCode(await user.api("/api/push/subscriptions"), 403), "cookie_required");
  assert.deepEqual(await listOf(user), []);
});

Deno.test("subscribe refuses endpoints the relay must not call, and bad keys or kinds", async (t) => {
  await using service = new PushService();
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const good = await service.subscribe();
  const post = (body: unknown) => user.web("/api/push/subscribe", json("POST", body));
  for (
    const endpoint of [
      // Not allowed by BATON_PUSH_ALLOW_ORIGINS here: plain http on loopback.
      good.endpoint,
      "http://push.example.com/x",
      "https://127.0.0.1/x",
      "https://localhost/x",
      "https://api.localhost/x",
      "https://10.1.2.3/x",
      "https://192.168.1.1/x",
      "https://169.254.169.254/latest/meta-data",
      "https://[::1]/x",
      "https://[fd00::1]/x",
      "https://[::ffff:127.0.0.1]/x",
      "https://2130706433/x",
      "https://0x7f.1/x",
      "https://intranet/x",
      "https://user:pw@push.example.com/x",
      "file:///etc/passwd",
    ]
  ) {
    await t.step(endpoint, async () => {
      const code = await errorCode(await post({ endpoint, keys: good.keys }), 400, endpoint);
      assert.match(code, /invalid_endpoint|invalid_body/);
    });
  }
  const endpoint = "https://push.example.com/send/abc";
  await t.step("bad keys", async () => {
    for (
      const keys of [
        { p256dh: good.keys.p256dh.slice(0, 20), auth: good.keys.auth },
        { p256dh: good.keys.p256dh, auth: "short" },
        { p256dh: "not base64 !!", auth: good.keys.auth },
      ]
    ) {
      assert.equal(await errorCode(await post({ endpoint, keys }), 400), "invalid_body");
    }
  });
  await t.step("unknown kinds", async () => {
    for (const enabledEvents of ["agent_done", "", " , "]) {
      assert.equal(
        await errorCode(await post({ endpoint, keys: good.keys, enabledEvents }), 400),
        "invalid_body",
      );
    }
  });
  assert.deepEqual(await listOf(user), []);
  await t.step("a public https endpoint is taken, its kinds normalised", async () => {
    const res = await post({
      endpoint,
      keys: good.keys,
      enabledEvents: " agent_error,agent_finished,agent_error ",
    });
    assert.equal(res.status, 200);
    const [s] = await listOf(user);
    assert.equal(s?.endpoint, endpoint);
    assert.equal(s?.enabledEvents, "agent_error,agent_finished");
    assert.equal(s?.suppressChildNotifications, false);
  });
});

Deno.test("subscriptions are each user's own; another's endpoint answers as a missing one", async () => {
  await using service = new PushService();
  await using relay = await startTestRelay({
    allowSignup: true,
    pushAllowedOrigins: [service.origin],
  });
  const alice = await signUp(relay.url);
  const bob = await signUp(relay.url);
  const a = await subscribe(alice, service);
  assert.deepEqual(await listOf(bob), []);
  for (
    const [path, body] of [
      ["/api/push/events", { endpoint: a.endpoint, enabledEvents: "agent_error" }],
      ["/api/push/child-notifications", { endpoint: a.endpoint, suppress: true }],
    ] as const
  ) {
    const foreign = await bob.web(path, json("PUT", body));
    const missing = await bob.web(path, json("PUT", { ...body, endpoint: a.endpoint + "x" }));
    assert.equal(await errorCode(foreign, 404), "not_found");
    assert.equal(await errorCode(missing, 404), "not_found");
  }
  // Bob's unsubscribe of Alice's endpoint changes nothing; taking it with other keys is refused.
  const un = await bob.web("/api/push/unsubscribe", json("POST", { endpoint: a.endpoint }));
  assert.equal(un.status, 200);
  const other = await service.subscribe();
  const take = await bob.web(
    "/api/push/subscribe",
    json("POST", { endpoint: a.endpoint, keys: other.keys }),
  );
  assert.equal(await errorCode(take, 409), "endpoint_taken");
  const [mine] = await listOf(alice);
  assert.equal(mine?.id, a.subscriptionId);
  assert.equal(mine?.enabledEvents, "*");

  // Alice's own changes take; her unsubscribe removes it.
  const ev = await alice.web(
    "/api/push/events",
    json("PUT", { endpoint: a.endpoint, enabledEvents: "agent_error" }),
  );
  assert.equal(ev.status, 200);
  const ch = await alice.web(
    "/api/push/child-notifications",
    json("PUT", { endpoint: a.endpoint, suppress: true }),
  );
  assert.equal(ch.status, 200);
  const [changed] = await listOf(alice);
  assert.equal(changed?.enabledEvents, "agent_error");
  assert.equal(changed?.suppressChildNotifications, true);
  await alice.web("/api/push/unsubscribe", json("POST", { endpoint: a.endpoint }));
  assert.deepEqual(await listOf(alice), []);
});

Deno.test("an account holds at most 20 subscriptions", async () => {
  await using service = new PushService();
  await using relay = await startTestRelay({ pushAllowedOrigins: [service.origin] });
  const user = await signUp(relay.url);
  for (let i = 0; i < 20; i++) await subscribe(user, service);
  const s = await service.subscribe();
  const res = await user.web(
    "/api/push/subscribe",
    json("POST", { endpoint: s.endpoint, keys: s.keys }),
  );
  assert.equal(await errorCode(res, 409), "too_many_subscriptions");
  assert.equal((await listOf(user)).length, 20);
});

Deno.test("subscriptions and the generated VAPID key survive a restart", async () => {
  await using service = new PushService();
  const dataDir = await tempDir("baton-push-");
  try {
    let key: string;
    let user: User;
    {
      const w = await world(service, dataDir);
      user = w.user;
      await subscribe(user, service);
      key = (await (await fetch(`${w.relay.url}/api/push/vapid-public-key`)).json()).publicKey;
      await w.fake.close();
      await w.relay[Symbol.asyncDispose]();
    }
    const info = await Deno.stat(`${dataDir}/vapid.json`);
    assert.equal(info.mode! & 0o777, 0o600);
    await using relay = await startTestRelay({ dataDir, pushAllowedOrigins: [service.origin] });
    const again = (await (await fetch(`${relay.url}/api/push/vapid-public-key`)).json()).publicKey;
    assert.equal(again, key);
    const res = await fetch(`${relay.url}/api/push/subscriptions`, {
      headers: { cookie: user.cookie },
    });
    assert.equal(((await res.json()) as PushSubscriptionsResponse).subscriptions.length, 1);
  } finally {
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("an agent's end reaches the push service encrypted and signed, with TTL, Urgency and Topic", async () => {
  await using service = new PushService();
  const { relay, user, fake } = await world(service);
  try {
    const sub = await subscribe(user, service);
    const one = await spawnSession(user, fake.runnerId);
    const two = await spawnSession(user, fake.runnerId);
    await emit(fake, one, { type: "agent_start" });
    await emit(fake, one, { type: "agent_end" });
    await service.until(() => service.of(sub.id).length === 1, "the first push");
    const [first] = service.of(sub.id);
    const p = first!.payload as unknown as PushPayload;
    assert.equal(p.kind, "agent_finished");
    assert.equal(p.sessionId, one);
    assert.equal(p.url, `/session/${one}`);
    assert.match(p.body, /^agent in .+ finished its task$/);
    // VAPID (RFC 8292): audience is the push service's origin, the relay's key, a near expiry.
    const key = (await (await fetch(`${relay.url}/api/push/vapid-public-key`)).json()).publicKey;
    assert.equal(first!.claims.k, key);
    assert.equal(first!.claims.aud, service.origin);
    assert.equal(first!.claims.sub, "mailto:baton@example.com");
    const exp = first!.claims.exp * 1000 - Date.now();
    assert.ok(exp > 0 && exp <= 24 * 3600_000, `exp in ${exp} ms`);
    // RFC 8030 headers.
    assert.equal(first!.headers.get("ttl"), "86400");
    assert.equal(first!.headers.get("urgency"), "normal");
    const topic = first!.headers.get("topic")!;
    assert.match(topic, /^[A-Za-z0-9_-]{32}$/);

    // An error is urgent; same session, same topic (it replaces the older one).
    await emit(fake, one, { type: "session_error", message: "Model quota exceeded" });
    await service.until(() => service.of(sub.id).length === 2, "the error push");
    const second = service.of(sub.id)[1]!;
    assert.equal((second.payload as unknown as PushPayload).kind, "agent_error");
    assert.match(String(second.payload.body), /^error in .+: Model quota exceeded$/);
    assert.equal(second.headers.get("urgency"), "high");
    assert.equal(second.headers.get("topic"), topic);
    // Another session, another topic.
    await emit(fake, two, { type: "agent_end" });
    await service.until(() => service.of(sub.id).length === 3, "the other session's push");
    assert.notEqual(service.of(sub.id)[2]!.headers.get("topic"), topic);
    assert.deepEqual(service.failures, []);
  } finally {
    await fake.close();
    await relay[Symbol.asyncDispose]();
  }
});

Deno.test("rule 1: a subscription receives only the kinds it enabled", async () => {
  await using service = new PushService();
  const { relay, user, fake } = await world(service);
  try {
    const errorsOnly = await subscribe(user, service, "agent_error");
    const all = await subscribe(user, service);
    const id = await spawnSession(user, fake.runnerId);
    await emit(fake, id, { type: "agent_end" });
    await service.until(() => service.of(all.id).length === 1, "agent_finished to '*'");
    await emit(fake, id, { type: "session_end", reason: "crashed", message: "Worker died" });
    await service.until(() => service.of(errorsOnly.id).length === 1, "agent_error");
    await settled(relay);
    assert.equal(service.of(all.id).length, 2);
    assert.deepEqual(service.of(errorsOnly.id).map((r) => r.payload.kind), ["agent_error"]);
    // A model error ends the turn: the end of that turn is an error, not "finished".
    await emit(fake, id, {
      type: "message_end",
      message: { role: "assistant", stopReason: "error", errorMessage: "401 Unauthorized" },
    });
    await emit(fake, id, { type: "agent_end" });
    await service.until(() => service.of(errorsOnly.id).length === 2, "the turn's error");
    assert.match(String(service.of(errorsOnly.id)[1]!.payload.body), /401 Unauthorized/);
  } finally {
    await fake.close();
    await relay[Symbol.asyncDispose]();
  }
});

Deno.test("rule 4: a subscription the push service says is gone (410, 404) is removed", async () => {
  await using service = new PushService();
  const { relay, user, fake } = await world(service);
  try {
    const gone = await subscribe(user, service);
    const missing = await subscribe(user, service);
    const failing = await subscribe(user, service);
    service.statusOf.set(gone.id, 410);
    service.statusOf.set(missing.id, 404);
    service.statusOf.set(failing.id, 500);
    const id = await spawnSession(user, fake.runnerId);
    await emit(fake, id, { type: "agent_end" });
    await service.until(() => service.received.length === 3, "three pushes");
    await settled(relay);
    // A 500 is the push service's trouble, not a reason to forget the browser.
    assert.deepEqual((await listOf(user)).map((s) => s.endpoint), [failing.endpoint]);
  } finally {
    await fake.close();
    await relay[Symbol.asyncDispose]();
  }
});

Deno.test("no push while the session is on a screen; old events never notify again", async () => {
  await using service = new PushService();
  const { relay, user, fake } = await world(service);
  const viewer = await Viewer.connect(relay.url, { cookie: user.cookie });
  try {
    const sub = await subscribe(user, service);
    const id = await spawnSession(user, fake.runnerId);
    viewer.subscribe(id);
    await viewer.waitFor((m) => m.t === "subscribed");
    viewer.send({ t: "visibility", sessionId: id, visible: true });
    // A ping's answer proves the visibility message was handled before the event.
    viewer.send({ t: "ping" });
    await viewer.waitFor((m) => m.t === "pong");
    await emit(fake, id, { type: "agent_end" });
    await settled(relay);
    assert.equal(service.requests, 0, "pushed while the session was on screen");

    // The tab is hidden (phone locked): the next end is pushed.
    viewer.send({ t: "visibility", sessionId: id, visible: false });
    viewer.send({ t: "ping" });
    await viewer.waitFor((m) =>
      m.t === "pong" && viewer.messages.filter((x) => x.t === "pong").length === 2
    );
    await emit(fake, id, { type: "agent_end" });
    await service.until(() => service.of(sub.id).length === 1, "the push once hidden");

    // Catch-up is not news: a viewer reading the log from the start, the
    // runner re-sending what the relay has, and an event from long ago.
    const late = await Viewer.connect(relay.url, { cookie: user.cookie });
    late.subscribe(id, 0);
    await late.waitFor((m) => m.t === "caught_up");
    await late.close();
    fake.sendEvents(id, [{ seq: 1, ts: Date.now(), e: { type: "agent_end" } }]);
    await fake.barrier();
    await emit(fake, id, { type: "agent_end" }, Date.now() - 2 * 3600_000);
    await settled(relay);
    assert.equal(service.requests, 1);

    // A visibility message for a session the viewer has not subscribed to is refused.
    viewer.send({ t: "visibility", sessionId: "nope", visible: true });
    await viewer.waitFor((m) =>
      m.t === "error" && (m as { code?: string }).code === "not_subscribed"
    );
  } finally {
    await viewer.close();
    await fake.close();
    await relay[Symbol.asyncDispose]();
    seqs = new Map();
  }
});

Deno.test("a wrong VAPID key stops the relay at start with one line and exit code 2", async (t) => {
  const home = await tempDir("baton-vapid-");
  try {
    const env = (extra: Record<string, string>) =>
      baseEnv(home, { BATON_PORT: "0", BATON_DATA_DIR: `${home}/relay`, ...extra });
    const pair = {
      VAPID_PUBLIC_KEY:
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8",
      VAPID_PRIVATE_KEY: "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw",
    };
    for (
      const [name, extra, pattern] of [
        ["a 31-byte private key", {
          ...pair,
          VAPID_PRIVATE_KEY: pair.VAPID_PRIVATE_KEY.slice(0, 42),
        }, /VAPID_PRIVATE_KEY.*exactly 32 bytes/],
        ["a private key that is not base64url", {
          ...pair,
          VAPID_PRIVATE_KEY: "not/base64+at all",
        }, /VAPID_PRIVATE_KEY/],
        ["keys of two pairs", {
          ...pair,
          VAPID_PUBLIC_KEY:
            "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
        }, /not the public key/],
        ["only one key", { VAPID_PRIVATE_KEY: pair.VAPID_PRIVATE_KEY }, /both/],
        ["a subject that is no URI", { ...pair, VAPID_SUBJECT: "me" }, /VAPID_SUBJECT/],
      ] as const
    ) {
      await t.step(name, async () => {
        const r = await baton(["relay"], env(extra));
        assert.equal(r.code, 2, r.stderr + r.stdout);
        const lines = r.stderr.trim().split("\n");
        assert.equal(lines.length, 1, r.stderr);
        assert.match(lines[0]!, pattern);
      });
    }
  } finally {
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
});

/** The resident set size of a process, in bytes. */
function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  return m ? Number(m[1]) * 1024 : 0;
}

Deno.test("a push service that never answers costs the relay bounded memory", async () => {
  await using service = new PushService();
  const relay = await RelayProcess.start({ env: { BATON_PUSH_ALLOW_ORIGINS: service.origin } });
  const user = await signUp(relay.url);
  const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
  try {
    // 20 devices (the most an account may have), none of whose push service ever answers.
    for (let i = 0; i < 20; i++) service.hang.add((await subscribe(user, service)).id);
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push(await spawnSession(user, fake.runnerId));
    const round = async (r: number) => {
      for (const id of ids) {
        fake.sendEvents(id, [{ seq: r, ts: Date.now(), e: { type: "agent_end" } }]);
      }
      await fake.waitForAck(ids.at(-1)!, r);
    };
    await round(1);
    await service.until(() => service.requests >= 4, "the first deliveries");
    // The relay's own memory for 100 live sessions settles over the first rounds.
    for (let r = 2; r <= 21; r++) await round(r);
    const t0 = Date.now();
    const before = rssOf(relay.proc.pid);
    // 40 more ends of each session: 80,000 notifications, each for a device
    // whose push service holds the request open. (Queued per device, they
    // grew the relay by 40 MB here; queued per session, as much as the events
    // alone: about 17 MB.)
    for (let r = 22; r <= 61; r++) await round(r);
    const grown = rssOf(relay.proc.pid) - before;
    assert.ok(grown < 28 * 1024 * 1024, `the relay grew ${(grown / 1048576).toFixed(1)} MB`);
    // At most 4 requests open at once, each given up after 10 s.
    const windows = Math.floor((Date.now() - t0) / 10_000) + 2;
    assert.ok(service.requests <= 4 * windows, `${service.requests} requests`);
  } finally {
    await fake.close();
    await relay.stop();
    await Deno.remove(relay.home, { recursive: true }).catch(() => {});
  }
});
