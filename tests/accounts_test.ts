import assert from "node:assert/strict";
import { errorCode, json, signIn, signUp, type User, Viewer } from "./harness/client.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";
import {
  baseEnv,
  BatonProcess,
  type RunnerProcess,
  startRunner,
  tempDir,
} from "./harness/procs.ts";
import { eventually, within } from "./harness/wait.ts";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";

const PASSWORD = "correct horse battery";

function register(relay: TestRelay, body: unknown, init: RequestInit = json("POST", body)) {
  return fetch(`${relay.url}/api/register`, init);
}

/** A GET with an API key header (by default `/api/runners`: 200 when the key is valid). */
function withKey(relay: TestRelay, key: string, path = "/api/runners"): Promise<Response> {
  return fetch(`${relay.url}${path}`, { headers: { "x-api-key": key } });
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function createKey(user: User, body: Record<string, unknown>) {
  const res = await user.api("/api/keys", json("POST", body));
  const created = await res.json();
  assert.equal(res.status, 201, JSON.stringify(created));
  return created as {
    ok: true;
    id: string;
    key: string;
    name: string;
    scope: string;
    prefix: string;
    expiresAt: string | null;
  };
}

async function deleteKey(user: User, id: string): Promise<Response> {
  return await user.api(`/api/keys/${id}`, { method: "DELETE" });
}

/** Starts `baton runner` without waiting for it to connect (for runners the relay refuses). */
function startRefusedRunner(relayUrl: string, apiKey: string, home: string): BatonProcess {
  return BatonProcess.start("runner", {
    args: ["runner"],
    env: baseEnv(home, {
      BATON_RELAY_URL: relayUrl,
      BATON_API_KEY: apiKey,
      BATON_WARM_WORKERS: "0",
    }),
  });
}

Deno.test("register creates the first account without --allow-signup and signs existing users in", async () => {
  await using relay = await startTestRelay();
  const email = "first@example.com";

  const first = await register(relay, { email, password: PASSWORD, name: "First" });
  const created = await first.json();
  assert.equal(first.status, 200, JSON.stringify(created));
  assert.equal(created.ok, true);
  assert.match(created.key, /^bk_/);
  assert.equal(await relay.relay.store.accounts.count(), 1);
  const firstUse = await withKey(relay, created.key);
  assert.equal(firstUse.status, 200);
  await firstUse.body?.cancel();

  // Registering again with the same credentials (and no name) signs in and mints a new key.
  const again = await register(relay, { email: "FIRST@example.com", password: PASSWORD });
  const second = await again.json();
  assert.equal(again.status, 200, JSON.stringify(second));
  assert.equal(second.ok, true);
  assert.match(second.key, /^bk_/);
  assert.notEqual(second.key, created.key);
  const res = await withKey(relay, second.key);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), []);

  assert.equal(
    await errorCode(await register(relay, { email, password: "wrong password" }), 401),
    "invalid_credentials",
  );
  assert.equal(
    await errorCode(
      await register(relay, { email: "nobody@example.com", password: PASSWORD }),
      401,
    ),
    "invalid_credentials",
  );
  assert.equal(
    await errorCode(
      await register(relay, { email: "second@example.com", password: PASSWORD, name: "Second" }),
      403,
    ),
    "signup_closed",
  );
  // The refused attempts stored nothing: one account with the two keys of the two sign-ins.
  assert.equal(await relay.relay.store.accounts.count(), 1);
  const keys = await withKey(relay, second.key, "/api/keys");
  assert.equal((await keys.json()).keys.length, 2);
});

Deno.test("concurrent first sign-ups, through either route, create one account and refuse the others with 403", async () => {
  for (let round = 0; round < 3; round++) {
    // Behind a trusted proxy, each attempt from its own address, so no rate
    // limit answers before the sign-up check does.
    await using relay = await startTestRelay({ trustProxy: true });
    const attempt = async (i: number) => {
      const path = i % 2 === 0 ? "/api/register" : "/api/auth/sign-up/email";
      const body = { email: `u${i}@example.com`, password: PASSWORD, name: `u${i}` };
      const res = await fetch(
        `${relay.url}${path}`,
        json("POST", body, { "x-forwarded-for": `10.0.0.${i}` }),
      );
      return { path, status: res.status, body: await res.json() };
    };
    // The relay shares this process: keep its loop busy in 40 ms stretches, as
    // on a loaded machine. Password hashes that finish meanwhile resume their
    // sign-ups in one turn, which is when a check-then-insert race shows.
    const busy = setInterval(() => {
      const until = performance.now() + 40;
      while (performance.now() < until) { /* busy */ }
    }, 1);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => attempt(i)))
      .finally(() => clearInterval(busy));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, ...Array(7).fill(403)], JSON.stringify(results));
    for (const r of results.filter((r) => r.status === 403)) {
      // Our route answers in the API's error shape, better-auth's in its own.
      const code = r.path === "/api/register" ? r.body.error.code : r.body.code;
      assert.equal(code.toLowerCase(), "signup_closed", JSON.stringify(r));
    }
    assert.equal(await relay.relay.store.accounts.count(), 1);
  }
});

Deno.test("register accepts further accounts only with allowSignup and never takes over an email", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  for (const email of ["one@example.com", "two@example.com"]) {
    const res = await register(relay, { email, password: PASSWORD, name: email });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.match(body.key, /^bk_/);
  }
  assert.equal(await relay.relay.store.accounts.count(), 2);
  // A name does not turn a wrong password into a new registration.
  assert.equal(
    await errorCode(
      await register(relay, { email: "one@example.com", password: "another password", name: "X" }),
      401,
    ),
    "invalid_credentials",
  );
  assert.equal(await relay.relay.store.accounts.count(), 2);
});

Deno.test("register rejects bad requests with JSON errors and stores nothing", async () => {
  await using relay = await startTestRelay();
  const good = { email: "new@example.com", password: PASSWORD, name: "New" };
  const cases: [string, RequestInit, number, string][] = [
    [
      "malformed JSON",
      { method: "POST", headers: { "content-type": "application/json" }, body: '{"email":' },
      400,
      "bad_json",
    ],
    ["a missing email", json("POST", { password: PASSWORD, name: "New" }), 400, "invalid_body"],
    [
      "a wrong content-type",
      { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify(good) },
      415,
      "unsupported_media_type",
    ],
    [
      "a body over 1 MB",
      json("POST", { ...good, name: "x".repeat(1024 * 1024) }),
      413,
      "body_too_large",
    ],
    [
      "a password that is too short",
      json("POST", { ...good, password: "short" }),
      400,
      "password_too_short",
    ],
  ];
  for (const [what, init, status, code] of cases) {
    const res = await register(relay, null, init);
    assert.equal(await errorCode(res, status), code, what);
    assert.equal(await relay.relay.store.accounts.count(), 0, `${what} created an account`);
  }
});

Deno.test("register allows 5 attempts per 15 minutes per IP, then answers 429 with Retry-After", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const email = "limited@example.com";
  for (let i = 0; i < 5; i++) {
    const res = await register(relay, { email, password: PASSWORD, name: "Limited" });
    const body = await res.json();
    assert.equal(res.status, 200, `attempt ${i + 1}: ${JSON.stringify(body)}`);
  }
  const res = await register(relay, {
    email: "other@example.com",
    password: PASSWORD,
    name: "Other",
  });
  const retryAfter = res.headers.get("retry-after");
  assert.equal(await errorCode(res, 429), "rate_limited");
  assert.match(retryAfter ?? "", /^\d+$/);
  assert.ok(Number(retryAfter) > 0 && Number(retryAfter) <= 15 * 60, `retry-after ${retryAfter}`);
  // The refused request did nothing.
  assert.equal(await relay.relay.store.accounts.count(), 1);
});

Deno.test("a browser session cookie authenticates the API until sign-out", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url, { password: PASSWORD });

  const signedIn = await fetch(
    `${relay.url}/api/auth/sign-in/email`,
    json("POST", { email: user.email, password: PASSWORD }),
  );
  const signedInBody = await signedIn.json();
  assert.equal(signedIn.status, 200, JSON.stringify(signedInBody));
  assert.equal(signedInBody.user.email, user.email);
  assert.ok(signedIn.headers.getSetCookie().some((c) => c.startsWith("baton")));

  const session = await fetch(`${relay.url}/api/auth/get-session`, {
    headers: { cookie: user.cookie },
  });
  const s = await session.json();
  assert.equal(session.status, 200);
  assert.equal(s.user.email, user.email);

  const runners = await user.web("/api/runners");
  assert.equal(runners.status, 200);
  assert.deepEqual(await runners.json(), []);

  assert.equal(await errorCode(await fetch(`${relay.url}/api/runners`), 401), "unauthorized");
  assert.equal(await errorCode(await withKey(relay, "bk_not-a-real-key"), 401), "unauthorized");
  assert.equal(
    await errorCode(await user.web("/api/runners", { headers: { cookie: "baton.x=1" } }), 401),
    "unauthorized",
  );

  // A sign-out posted by another site is refused and leaves the cookie working.
  const forged = await fetch(
    `${relay.url}/api/auth/sign-out`,
    json("POST", {}, { cookie: user.cookie, origin: "https://evil.example" }),
  );
  assert.equal(forged.status, 403);
  await forged.body?.cancel();
  const still = await user.web("/api/runners");
  assert.equal(still.status, 200);
  await still.body?.cancel();

  // A viewer socket opened with the cookie is closed by the sign-out.
  const viewer = await Viewer.connect(relay.url, { cookie: user.cookie });
  try {
    const out = await fetch(
      `${relay.url}/api/auth/sign-out`,
      json("POST", {}, { cookie: user.cookie, origin: relay.url }),
    );
    const body = await out.json();
    assert.equal(out.status, 200, JSON.stringify(body));
    const closed = await within(viewer.closed, 10_000, "viewer socket closed by sign-out");
    assert.equal(closed.code, 4401);
  } finally {
    await viewer.close();
  }

  assert.equal(await errorCode(await user.web("/api/runners"), 401), "unauthorized");
  const after = await fetch(`${relay.url}/api/auth/get-session`, {
    headers: { cookie: user.cookie },
  });
  assert.equal(after.status, 200);
  assert.equal(await after.json(), null);
  // Signing in again gives a working cookie.
  const cookie = await signIn(relay.url, user.email, PASSWORD);
  const again = await fetch(`${relay.url}/api/runners`, { headers: { cookie } });
  assert.equal(again.status, 200);
  await again.body?.cancel();
});

Deno.test("API keys: created once, listed without the secret, usable, and revocable", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);

  await t.step("a new key answers 201 with its id, secret, name, prefix and expiry", async () => {
    const res = await user.api("/api/keys", json("POST", { name: "laptop" }));
    const body = await res.json();
    assert.equal(res.status, 201);
    assert.equal(body.ok, true);
    assert.equal(typeof body.id, "string");
    assert.equal(body.name, "laptop");
    assert.match(body.key, /^bk_/);
    assert.equal(typeof body.prefix, "string");
    assert.ok(body.key.startsWith(body.prefix) && body.prefix.length < body.key.length);
    assert.equal(body.expiresAt, null);
  });

  await t.step(
    "names runner, runner:* and runner-* make runner tokens, others API keys",
    async () => {
      const expected: [string | undefined, RegExp][] = [
        ["runner", /^brt_/],
        ["runner:x", /^brt_/],
        ["runner-x", /^brt_/],
        ["runners", /^bk_/],
        ["my-runner", /^bk_/],
        ["ci", /^bk_/],
        [undefined, /^bk_/],
      ];
      for (const [name, re] of expected) {
        const created = await createKey(user, name === undefined ? {} : { name });
        assert.match(created.key, re, `name ${name}`);
        // A runner token authenticates, then finds the account's routes out
        // of its scope (403, not 401); see scopes_test.ts.
        const runner = re.source.includes("brt_");
        assert.equal(created.scope, runner ? "runner" : "full", `name ${name}`);
        const res = await withKey(relay, created.key);
        assert.equal(res.status, runner ? 403 : 200, `key named ${name} does not authenticate`);
        await res.body?.cancel();
      }
    },
  );

  await t.step("the list shows each key's metadata but never its secret or hash", async () => {
    const created = await createKey(user, { name: "listed", expiresInDays: 30 });
    const res = await user.api("/api/keys");
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.ok(!text.includes(created.key), "the list contains a full key");
    assert.ok(!text.includes(created.key.slice(created.prefix.length)), "the list leaks a secret");
    assert.ok(!text.includes(await sha256Hex(created.key)), "the list contains a key hash");
    assert.ok(!text.includes(user.apiKey), "the list contains the CLI key");
    const { keys } = JSON.parse(text);
    const listed = keys.find((k: { id: string }) => k.id === created.id);
    assert.ok(listed, "the new key is not listed");
    assert.equal(listed.name, "listed");
    assert.equal(listed.prefix, created.prefix);
    assert.equal(listed.expiresAt, created.expiresAt);
    assert.equal(listed.expired, false);
    const days = (Date.parse(listed.expiresAt) - Date.now()) / 86_400_000;
    assert.ok(days > 29.9 && days <= 30, `expires in ${days} days`);
    for (const k of keys) {
      assert.equal(typeof k.id, "string");
      assert.equal(typeof k.name, "string");
      assert.equal(typeof k.prefix, "string");
      assert.equal(typeof k.expired, "boolean");
      assert.ok(!("key" in k) && !("hash" in k), JSON.stringify(k));
    }
  });

  await t.step("a key works as x-api-key and as Authorization: Bearer", async () => {
    const created = await createKey(user, { name: "headers" });
    const viaHeader = await withKey(relay, created.key);
    assert.equal(viaHeader.status, 200);
    assert.deepEqual(await viaHeader.json(), []);
    const viaBearer = await fetch(`${relay.url}/api/runners`, {
      headers: { authorization: `Bearer ${created.key}` },
    });
    assert.equal(viaBearer.status, 200);
    assert.deepEqual(await viaBearer.json(), []);
  });

  await t.step("a deleted key is refused at once and cannot be deleted twice", async () => {
    const created = await createKey(user, { name: "doomed" });
    const del = await deleteKey(user, created.id);
    assert.equal(del.status, 200);
    assert.deepEqual(await del.json(), { ok: true });
    assert.equal(await errorCode(await withKey(relay, created.key), 401), "unauthorized");
    const bearer = await fetch(`${relay.url}/api/runners`, {
      headers: { authorization: `Bearer ${created.key}` },
    });
    assert.equal(await errorCode(bearer, 401), "unauthorized");
    const { keys } = await (await user.api("/api/keys")).json();
    assert.ok(!keys.some((k: { id: string }) => k.id === created.id), "deleted key still listed");
    assert.equal(await errorCode(await deleteKey(user, created.id), 404), "not_found");
  });

  await t.step("expiresInDays must be a whole number of days from 1 to 3650", async () => {
    const before = await (await user.api("/api/keys")).json();
    for (const expiresInDays of [0, -1, 5000, 1.5, "7"]) {
      const res = await user.api("/api/keys", json("POST", { name: "bad", expiresInDays }));
      assert.equal(await errorCode(res, 400), "invalid_body", `expiresInDays ${expiresInDays}`);
    }
    assert.deepEqual(await (await user.api("/api/keys")).json(), before);
    for (const expiresInDays of [1, 3650]) {
      const created = await createKey(user, { name: "edge", expiresInDays });
      assert.ok(created.expiresAt !== null);
    }
  });
});

Deno.test("a key revoked while a request made with it is still sending its body cannot act", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const doomed = await createKey(user, { name: "doomed" });
  // A POST /api/keys with the doomed key whose body arrives in two parts.
  let body!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({ start: (c) => void (body = c) });
  const minting = fetch(`${relay.url}/api/keys`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": doomed.key },
    body: stream,
  });
  body.enqueue(new TextEncoder().encode('{"name":'));
  // The relay has checked the key once it marks it used.
  await eventually(
    "the relay to authenticate the request",
    async () => (await relay.relay.store.keys.byId(doomed.id))?.lastUsedAt ?? undefined,
  );
  const del = await user.web(`/api/keys/${doomed.id}`, { method: "DELETE" });
  assert.equal(del.status, 200, await del.text());
  body.enqueue(new TextEncoder().encode('"minted-after-revocation"}'));
  body.close();
  const res = await minting;
  assert.equal(await errorCode(res, 401), "unauthorized");
  const { keys } = await (await user.web("/api/keys")).json();
  assert.ok(
    !keys.some((k: { name: string }) => k.name === "minted-after-revocation"),
    "a revoked key minted a new key",
  );
});

Deno.test("revoking a key closes the sockets opened with it", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);

  await t.step("a viewer authenticated by an x-api-key header closes with 4401", async () => {
    const created = await createKey(user, { name: "viewer" });
    const other = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    const viewer = await Viewer.connect(relay.url, { apiKey: created.key });
    try {
      const res = await deleteKey(user, created.id);
      assert.equal(res.status, 200);
      await res.body?.cancel();
      const closed = await within(viewer.closed, 10_000, "the viewer socket to close");
      assert.equal(closed.code, 4401);
      // The key cannot open a new socket either.
      await assert.rejects(Viewer.connect(relay.url, { apiKey: created.key }));
      // A socket opened with another key stays open.
      other.send({ t: "ping" });
      await other.waitFor((m) => m.t === "pong", 10_000);
      assert.equal(other.closeEvent, null);
    } finally {
      await viewer.close();
      await other.close();
    }
  });

  await t.step("a viewer authenticated by an auth message closes with 4401", async () => {
    const created = await createKey(user, { name: "viewer-message" });
    const viewer = new Viewer(new WebSocket(`${relay.url.replace(/^http/, "ws")}/_viewer`));
    try {
      await viewer.opened;
      viewer.send({ t: "auth", apiKey: created.key });
      await viewer.waitFor((m) => m.t === "hello", 10_000);
      const res = await deleteKey(user, created.id);
      assert.equal(res.status, 200);
      await res.body?.cancel();
      const closed = await within(viewer.closed, 10_000, "the viewer socket to close");
      assert.equal(closed.code, 4401);
    } finally {
      await viewer.close();
    }
  });

  await t.step("a runner connected with a revoked token stops with exit code 1", async () => {
    const token = await createKey(user, { name: "runner" });
    assert.match(token.key, /^brt_/);
    const home = await tempDir("baton-runner-home-");
    let runner: RunnerProcess | undefined;
    let ok = false;
    try {
      runner = await startRunner({
        relayUrl: relay.url,
        apiKey: token.key,
        home,
        env: { BATON_WARM_WORKERS: "0" },
      });
      const [listed] = await (await user.api("/api/runners")).json();
      assert.equal(listed.connected, true);

      const res = await deleteKey(user, token.id);
      assert.equal(res.status, 200);
      await res.body?.cancel();
      const status = await within(runner.proc.status, 30_000, "the runner to exit");
      assert.equal(status.code, 1, runner.proc.output());
      assert.ok(runner.proc.count(/refused.*revoked/i) > 0, runner.proc.output());

      const runners = await (await user.api("/api/runners")).json();
      assert.equal(runners.length, 1);
      assert.equal(runners[0].id, listed.id);
      assert.equal(runners[0].connected, false);
      ok = true;
    } finally {
      if (runner && !ok) console.error(runner.proc.output());
      await runner?.stop();
      await Deno.remove(home, { recursive: true });
    }
  });
});

Deno.test("the relay refuses a runner hello with an unknown or revoked key", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const revoked = await createKey(user, { name: "runner-revoked" });
  const res = await deleteKey(user, revoked.id);
  assert.equal(res.status, 200);
  await res.body?.cancel();

  const cases: [string, string][] = [
    ["an unknown runner token", `brt_${crypto.randomUUID().replaceAll("-", "")}`],
    ["an unknown API key", `bk_${crypto.randomUUID().replaceAll("-", "")}`],
    ["a revoked runner token", revoked.key],
  ];
  for (const [what, key] of cases) {
    await t.step(
      `${what} makes the runner exit with code 1 and say the key was rejected`,
      async () => {
        const home = await tempDir("baton-runner-home-");
        const proc = startRefusedRunner(relay.url, key, home);
        let ok = false;
        try {
          const status = await within(proc.status, 30_000, "the refused runner to exit");
          assert.equal(status.code, 1, proc.output());
          assert.ok(proc.count(/refused.*(invalid|revoked).*key/i) > 0, proc.output());
          assert.equal(proc.count(/connected to relay as runner/), 0, proc.output());
          ok = true;
        } finally {
          if (!ok) console.error(proc.output());
          await proc.stop();
          await Deno.remove(home, { recursive: true });
        }
      },
    );
  }
  const runners = await (await user.api("/api/runners")).json();
  assert.deepEqual(runners, []);
});

Deno.test("a password change that signs out the other browsers closes their viewer sockets and keeps this browser's", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url, { password: PASSWORD });
  const otherCookie = await signIn(relay.url, user.email, PASSWORD);
  const here = await Viewer.connect(relay.url, { cookie: user.cookie });
  const there = await Viewer.connect(relay.url, { cookie: otherCookie });
  const byKey = await Viewer.connect(relay.url, { apiKey: user.apiKey });
  let fresh: Viewer | null = null;
  const served = async (v: Viewer, id: string) => {
    v.subscribe(id);
    const err = await v.waitFor((m) => m.t === "error" && m.sessionId === id);
    assert.equal((err as { code?: string }).code, "not_found");
  };
  try {
    // A change through /api/auth that ends no session closes nothing.
    const renamed = await fetch(
      `${relay.url}/api/auth/update-user`,
      json("POST", { name: "Renamed" }, { cookie: user.cookie, origin: relay.url }),
    );
    assert.equal(renamed.status, 200, await renamed.text());
    await served(here, "no-such-session-1");
    await served(there, "no-such-session-1");

    const res = await fetch(
      `${relay.url}/api/auth/change-password`,
      json("POST", {
        currentPassword: PASSWORD,
        newPassword: "a new correct horse",
        revokeOtherSessions: true,
      }, { cookie: user.cookie, origin: relay.url }),
    );
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    // better-auth ends every session of the user and hands this browser a new one.
    const newCookie = res.headers.getSetCookie().map((c) => c.split(";")[0]).join("; ");
    assert.ok(newCookie.startsWith("baton"), "a new session cookie");

    const closed = await within(there.closed, 10_000, "the other browser's viewer socket closed");
    assert.equal(closed.code, 4401, "closed as a revoked key's sockets are");
    for (const cookie of [otherCookie, user.cookie]) {
      const r = await fetch(`${relay.url}/api/runners`, { headers: { cookie } });
      assert.equal(await errorCode(r, 401), "unauthorized");
    }
    // This browser's socket carried over to the session it was handed: it stays
    // open, also through the next check of every socket of the account.
    const again = await fetch(
      `${relay.url}/api/auth/update-user`,
      json("POST", { name: "Renamed again" }, { cookie: newCookie, origin: relay.url }),
    );
    assert.equal(again.status, 200, await again.text());
    // API keys keep their sockets, and the new cookie opens one.
    fresh = await Viewer.connect(relay.url, { cookie: newCookie });
    for (const v of [here, byKey, fresh]) await served(v, "no-such-session-2");
    assert.equal(here.closeEvent, null, "this browser's socket stays open");
  } finally {
    for (const v of [here, there, byKey, fresh]) await v?.close();
  }
});

Deno.test("sockets close by themselves once their key or browser session expires", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const user = await signUp(relay.url);
  const viewerKey = await createKey(user, { name: "viewer", expiresInDays: 1 });
  const runnerToken = await createKey(user, { name: "runner", expiresInDays: 1 });
  const other = await signUp(relay.url);
  const home = await tempDir("baton-runner-home-");
  const keyViewer = await Viewer.connect(relay.url, { apiKey: viewerKey.key });
  const cookieViewer = await Viewer.connect(relay.url, { cookie: user.cookie });
  const lasting = await Viewer.connect(relay.url, { cookie: other.cookie });
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: runnerToken.key,
      home,
      env: { BATON_WARM_WORKERS: "0" },
    });
    // A day passes for the two keys and the first user's browser session: the
    // relay only learns it from its database, as with any real expiry.
    const past = new Date(Date.now() - 1000).toISOString();
    const db = new DatabaseSync(join(relay.dataDir, "relay.db"));
    try {
      db.exec("PRAGMA busy_timeout = 5000");
      db.prepare("UPDATE api_keys SET expires_at = ? WHERE id IN (?, ?)").run(
        past,
        viewerKey.id,
        runnerToken.id,
      );
      db.prepare(
        'UPDATE "session" SET "expiresAt" = ? WHERE "userId" = (SELECT id FROM "user" WHERE email = ?)',
      ).run(past, user.email.toLowerCase());
    } finally {
      db.close();
    }
    const [byKey, byCookie] = await Promise.all([
      within(keyViewer.closed, 20_000, "the key's viewer socket to close"),
      within(cookieViewer.closed, 20_000, "the cookie's viewer socket to close"),
    ]);
    assert.equal(byKey.code, 4401);
    assert.equal(byCookie.code, 4401);
    const status = await within(runner.proc.status, 20_000, "the runner to exit");
    assert.equal(status.code, 1, runner.proc.output());
    assert.ok(runner.proc.count(/expired/i) > 0, runner.proc.output());
    // Another account's socket, whose session did not expire, stays open.
    lasting.send({ t: "ping" });
    await lasting.waitFor((m) => m.t === "pong", 10_000);
    assert.equal(lasting.closeEvent, null);
    ok = true;
  } finally {
    if (runner && !ok) console.error(runner.proc.output());
    await runner?.stop();
    await Promise.all([keyViewer.close(), cookieViewer.close(), lasting.close()]);
    await Deno.remove(home, { recursive: true });
  }
});
