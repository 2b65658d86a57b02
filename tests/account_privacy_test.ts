/**
 * What the account routes give away to someone who is not signed in: which
 * emails have accounts (by answer or by time), and what a failed attempt
 * leaves behind.
 *
 * @module
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { json, signIn, signUp } from "./harness/client.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";

const PASSWORD = "correct horse battery";

/** Each call from its own address (the relay trusts X-Forwarded-For here), so no limit answers. */
let nextAddress = 1;
function from(): Record<string, string> {
  const n = nextAddress++;
  return { "x-forwarded-for": `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}` };
}

async function post(relay: TestRelay, path: string, body: unknown) {
  const t0 = performance.now();
  const res = await fetch(`${relay.url}${path}`, json("POST", body, from()));
  const text = await res.text();
  return {
    status: res.status,
    body: text,
    cookies: res.headers.getSetCookie().length,
    ms: performance.now() - t0,
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Rows of better-auth's `session` table: the browser sessions the relay keeps. */
function browserSessions(relay: TestRelay): number {
  const db = new DatabaseSync(join(relay.dataDir, "relay.db"), { readOnly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM "session"').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

Deno.test("register and sign-up answer alike, in the same time, for an email with an account and one without", async (t) => {
  await using relay = await startTestRelay({ trustProxy: true });
  const owner = await signUp(relay.url, { email: "owner@example.com", password: PASSWORD });
  const unknown = "nobody@example.com";

  await t.step(
    "register, without and with a name, on a relay whose sign-up is closed",
    async () => {
      for (const extra of [{}, { name: "Someone" }]) {
        const known = await post(relay, "/api/register", {
          email: owner.email,
          password: "wrong password",
          ...extra,
        });
        const other = await post(relay, "/api/register", {
          email: unknown,
          password: "wrong password",
          ...extra,
        });
        assert.ok(known.status >= 400, known.body);
        assert.deepEqual(
          { status: other.status, body: other.body },
          { status: known.status, body: known.body },
        );
      }
    },
  );

  await t.step("better-auth's sign-up on a relay whose sign-up is closed", async () => {
    const known = await post(relay, "/api/auth/sign-up/email", {
      email: owner.email,
      password: PASSWORD,
      name: "X",
    });
    const other = await post(relay, "/api/auth/sign-up/email", {
      email: unknown,
      password: PASSWORD,
      name: "X",
    });
    assert.equal(known.status, 403, known.body);
    assert.deepEqual(
      { status: other.status, body: other.body },
      { status: known.status, body: known.body },
    );
    assert.equal(await relay.relay.store.accounts.count(), 1);
  });

  await t.step(
    "a wrong password costs the same time whether the email has an account",
    async () => {
      const known: number[] = [];
      const other: number[] = [];
      for (let i = 0; i < 7; i++) {
        known.push(
          (await post(relay, "/api/register", { email: owner.email, password: "nope" })).ms,
        );
        other.push((await post(relay, "/api/register", { email: unknown, password: "nope" })).ms);
      }
      // A password hash takes tens of milliseconds; an answer without one, about one.
      const ratio = median(known) / median(other);
      assert.ok(
        ratio < 3 && ratio > 1 / 3,
        `medians ${median(known).toFixed(1)} ms (account) and ${
          median(other).toFixed(1)
        } ms (none)`,
      );
    },
  );
});

Deno.test("sign-up open to all answers alike for an email with an account, and the new account signs in next", async () => {
  await using relay = await startTestRelay({ allowSignup: true, trustProxy: true });
  const owner = await signUp(relay.url, { email: "owner@example.com", password: PASSWORD });
  const shape = (r: { status: number; body: string; cookies: number }) => {
    const body = JSON.parse(r.body);
    return {
      status: r.status,
      cookies: r.cookies,
      token: body.token,
      keys: Object.keys(body.user),
    };
  };
  const known = await post(relay, "/api/auth/sign-up/email", {
    email: owner.email,
    password: "another password",
    name: "Mallory",
  });
  const fresh = await post(relay, "/api/auth/sign-up/email", {
    email: "new@example.com",
    password: PASSWORD,
    name: "New",
  });
  assert.equal(known.status, 200, known.body);
  assert.deepEqual(shape(known), shape(fresh));
  assert.equal(JSON.parse(known.body).user.email, owner.email);
  // The sign-up took nothing over: the owner's password still opens the account, not the new one.
  await signIn(relay.url, owner.email, PASSWORD);
  await assert.rejects(signIn(relay.url, owner.email, "another password"), /401/);
  // The new account exists and signs in, as the web client does right after.
  const cookie = await signIn(relay.url, "new@example.com", PASSWORD);
  const me = await fetch(`${relay.url}/api/auth/get-session`, { headers: { cookie } });
  assert.equal((await me.json()).user.email, "new@example.com");
  assert.equal(await relay.relay.store.accounts.count(), 2);
});

Deno.test("register with an existing account's password mints a key and leaves no browser session", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url, { password: PASSWORD });
  const before = browserSessions(relay);
  for (let i = 0; i < 3; i++) {
    const res = await fetch(
      `${relay.url}/api/register`,
      json("POST", { email: user.email, password: PASSWORD }),
    );
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.match(body.key, /^bk_/);
    assert.equal(res.headers.getSetCookie().length, 0);
  }
  assert.equal(browserSessions(relay), before);
});

Deno.test("a failed sign-in and another user's sign-out leave a browser's cached session alone; its own sign-out ends it at once", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const a = await signUp(relay.url);
  const b = await signUp(relay.url);
  const runners = (cookie: string) =>
    fetch(`${relay.url}/api/runners`, { headers: { cookie } }).then(async (r) => {
      await r.body?.cancel();
      return r.status;
    });
  // A's browser is seen, so the relay keeps its session for up to 10 s without
  // asking the database. Its row then goes some way the relay is not told of:
  // while the cache is kept, A goes on working; once it is emptied, A is out.
  assert.equal(await runners(a.cookie), 200);
  const db = new DatabaseSync(join(relay.dataDir, "relay.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    db.prepare('DELETE FROM "session" WHERE "userId" = (SELECT id FROM "user" WHERE email = ?)')
      .run(a.email.toLowerCase());
  } finally {
    db.close();
  }
  const failed = await fetch(
    `${relay.url}/api/auth/sign-in/email`,
    json("POST", { email: b.email, password: "wrong password" }),
  );
  assert.equal(failed.status, 401, await failed.text());
  assert.equal(await runners(a.cookie), 200, "a failed sign-in emptied the cache");

  // B signs out: B's session ends at once, A's cached one stays.
  assert.equal(await runners(b.cookie), 200);
  const out = await fetch(
    `${relay.url}/api/auth/sign-out`,
    json("POST", {}, { cookie: b.cookie, origin: relay.url }),
  );
  assert.equal(out.status, 200, await out.text());
  assert.equal(await runners(b.cookie), 401);
  assert.equal(await runners(a.cookie), 200, "another user's sign-out emptied the cache");
});
