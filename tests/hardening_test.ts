/**
 * Security behaviours an operator relies on, end to end against a real
 * relay: cookie flags, the sign-in and register limits (and who counts as a
 * client behind a proxy), secrets at rest in the data folder, and key expiry.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { errorCode, json, signUp, type User } from "./harness/client.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";

const PASSWORD = "correct horse battery";
const THIRTY_DAYS_S = 30 * 24 * 60 * 60;

/** One Set-Cookie line: the cookie and its attributes (names lower-cased). */
interface SetCookie {
  name: string;
  value: string;
  attributes: Map<string, string>;
}

function parseSetCookie(line: string): SetCookie {
  const [pair = "", ...rest] = line.split(";").map((part) => part.trim());
  const eq = pair.indexOf("=");
  const attributes = new Map<string, string>();
  for (const attr of rest) {
    const i = attr.indexOf("=");
    attributes.set((i < 0 ? attr : attr.slice(0, i)).toLowerCase(), i < 0 ? "" : attr.slice(i + 1));
  }
  return { name: pair.slice(0, eq), value: pair.slice(eq + 1), attributes };
}

/** `POST /api/auth/sign-in/email` as a browser (or a client behind a proxy) sends it. */
function signInRequest(
  relay: TestRelay,
  email: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${relay.url}/api/auth/sign-in/email`, json("POST", { email, password }, headers));
}

/** The session cookie a successful sign-in sets, with every cookie line it set. */
async function sessionCookieOf(res: Response): Promise<{ session: SetCookie; all: SetCookie[] }> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const all = res.headers.getSetCookie().map(parseSetCookie);
  const session = all.find((c) => c.name.endsWith("session_token"));
  assert.ok(session, `no session cookie in ${JSON.stringify(res.headers.getSetCookie())}`);
  assert.ok(session.value.length > 0, "the session cookie is empty");
  return { session, all };
}

function assertBrowserSafe(cookie: SetCookie): void {
  const a = cookie.attributes;
  assert.ok(a.has("httponly"), `${cookie.name} is readable by page scripts (no HttpOnly)`);
  assert.match(a.get("samesite") ?? "", /^(lax|strict)$/i, `${cookie.name} SameSite`);
  assert.equal(a.get("path"), "/", `${cookie.name} Path`);
  assert.equal(a.get("max-age"), String(THIRTY_DAYS_S), `${cookie.name} Max-Age`);
}

Deno.test("the session cookie is HttpOnly, SameSite and Path=/; Secure and __Secure- behind https", async (t) => {
  await t.step(
    "plain http base URL: not Secure, or a browser would never send it back",
    async () => {
      await using relay = await startTestRelay();
      const user = await signUp(relay.url, { password: PASSWORD });
      const res = await signInRequest(relay, user.email, PASSWORD, {
        origin: new URL(relay.baseUrl).origin,
      });
      const { session } = await sessionCookieOf(res);
      assert.equal(session.name, "baton.session_token");
      assertBrowserSafe(session);
      assert.equal(session.attributes.has("secure"), false, "Secure cookie on a plain http relay");
    },
  );

  await t.step("https base URL: Secure, with the __Secure- name, and it signs in", async () => {
    const baseUrl = "https://baton.example.test";
    await using relay = await startTestRelay({ baseUrl });
    assert.equal(relay.baseUrl, baseUrl);
    const user = await signUp(relay.url, { password: PASSWORD });
    // The browser, talking to the TLS proxy, sends the public origin.
    const res = await signInRequest(relay, user.email, PASSWORD, { origin: baseUrl });
    const { session, all } = await sessionCookieOf(res);
    assert.equal(session.name, "__Secure-baton.session_token");
    assertBrowserSafe(session);
    for (const c of all) assert.ok(c.attributes.has("secure"), `${c.name} is not Secure`);
    // The relay reads back the prefixed cookie it set.
    const listed = await fetch(`${relay.url}/api/keys`, {
      headers: { cookie: `${session.name}=${session.value}` },
    });
    assert.equal(listed.status, 200, await listed.text());
  });
});

Deno.test("sign-in allows 20 attempts per minute per client, whatever headers it forges", async () => {
  await using relay = await startTestRelay({ trustProxy: true });
  const user = await signUp(relay.url, { password: PASSWORD });
  // Addresses the proxy appends to X-Forwarded-For. better-auth's counters are
  // module-wide (shared by every relay of this file): no other test uses these.
  const attacker = "203.0.113.66";
  const neighbour = "203.0.113.67";
  let n = 0;
  /** A sign-in from the attacker, with a forged first hop and a forged relay header each time. */
  const fromAttacker = (password: string) => {
    n++;
    return signInRequest(relay, user.email, password, {
      "x-forwarded-for": `198.51.100.${n}, ${attacker}`,
      "x-baton-client-ip": `192.0.2.${n}`,
    });
  };

  for (let i = 1; i <= 20; i++) {
    const res = await fromAttacker("wrong password");
    const body = await res.json();
    assert.equal(res.status, 401, `attempt ${i}: ${JSON.stringify(body)}`);
    assert.equal(body.code, "INVALID_EMAIL_OR_PASSWORD", `attempt ${i}`);
  }
  const limited = await fromAttacker("wrong password");
  assert.equal(limited.status, 429, await limited.clone().text());
  assert.deepEqual(await limited.json(), {
    message: "Too many requests. Please try again later.",
  });
  const retryAfter = Number(limited.headers.get("x-retry-after"));
  assert.ok(retryAfter > 0 && retryAfter <= 60, `X-Retry-After ${retryAfter}`);

  // Guessing right does not help the attacker while the window lasts…
  const right = await fromAttacker(PASSWORD);
  assert.equal(right.status, 429, await right.clone().text());
  assert.deepEqual(right.headers.getSetCookie(), []);
  await right.body?.cancel();

  // …but the account is not locked: another client signs in at once.
  const other = await signInRequest(relay, user.email, PASSWORD, {
    "x-forwarded-for": neighbour,
  });
  const { session } = await sessionCookieOf(other);
  assert.equal(session.name, "baton.session_token");
});

/** A register attempt that fails fast (unknown email, no name) and counts against the limit. */
function registerAttempt(relay: TestRelay, headers: Record<string, string>): Promise<Response> {
  return fetch(
    `${relay.url}/api/register`,
    json("POST", { email: "nobody@example.com", password: PASSWORD }, headers),
  );
}

/** Asserts an attempt was let through the limit (and refused for its credentials). */
async function assertNotLimited(res: Response, what: string): Promise<void> {
  assert.equal(await errorCode(res, 401, what), "invalid_credentials", what);
}

/** Asserts the limit refused an attempt, with baton's JSON error and a Retry-After. */
async function assertLimited(res: Response, what: string): Promise<void> {
  const retryAfter = Number(res.headers.get("retry-after"));
  assert.equal(await errorCode(res, 429, what), "rate_limited", what);
  assert.ok(retryAfter > 0 && retryAfter <= 15 * 60, `${what}: Retry-After ${retryAfter}`);
}

Deno.test("register's per-IP limit ignores X-Forwarded-For unless trustProxy, then counts its last entry", async (t) => {
  await t.step(
    "without trustProxy, forged X-Forwarded-For values share the socket's budget",
    async () => {
      await using relay = await startTestRelay();
      for (let i = 1; i <= 5; i++) {
        const res = await registerAttempt(relay, {
          "x-forwarded-for": `203.0.113.${i}`,
          "x-baton-client-ip": `192.0.2.${i}`,
        });
        await assertNotLimited(res, `attempt ${i}`);
      }
      await assertLimited(
        await registerAttempt(relay, { "x-forwarded-for": "203.0.113.6" }),
        "6th attempt, new forwarded address",
      );
      await assertLimited(await registerAttempt(relay, {}), "7th attempt, no forwarded address");
    },
  );

  await t.step(
    "with trustProxy, the last entry is the client and a forged first one is ignored",
    async () => {
      await using relay = await startTestRelay({ trustProxy: true });
      const client = "198.51.100.7";
      const other = "198.51.100.8";
      for (let i = 1; i <= 5; i++) {
        const res = await registerAttempt(relay, { "x-forwarded-for": client });
        await assertNotLimited(res, `attempt ${i}`);
      }
      await assertLimited(
        await registerAttempt(relay, { "x-forwarded-for": client }),
        "6th attempt from the client",
      );
      // The client forges a first hop; its proxy appends the real address.
      await assertLimited(
        await registerAttempt(relay, { "x-forwarded-for": `${other}, ${client}` }),
        "forged first entry",
      );
      // Another client (whose proxy appended its own address) has a budget of its
      // own, even when it forges the limited client's address first.
      for (let i = 1; i <= 5; i++) {
        const res = await registerAttempt(relay, { "x-forwarded-for": `${client}, ${other}` });
        await assertNotLimited(res, `other client, attempt ${i}`);
      }
      await assertLimited(
        await registerAttempt(relay, { "x-forwarded-for": other }),
        "other client, 6th attempt",
      );
      // A request the proxy did not mark counts as the socket's peer.
      await assertNotLimited(await registerAttempt(relay, {}), "no X-Forwarded-For");
    },
  );

  await t.step("with trustProxy, a port the proxy adds does not make a new client", async () => {
    await using relay = await startTestRelay({ trustProxy: true });
    for (let i = 1; i <= 5; i++) {
      const res = await registerAttempt(relay, { "x-forwarded-for": `198.51.100.20:${1000 + i}` });
      await assertNotLimited(res, `attempt ${i}`);
    }
    await assertLimited(
      await registerAttempt(relay, { "x-forwarded-for": "198.51.100.20" }),
      "same address without a port",
    );
    for (let i = 1; i <= 5; i++) {
      const res = await registerAttempt(relay, { "x-forwarded-for": `[2001:db8:7:7::1]:${i}` });
      await assertNotLimited(res, `IPv6 attempt ${i}`);
    }
    await assertLimited(
      await registerAttempt(relay, { "x-forwarded-for": "2001:db8:7:7::99" }),
      "same /64 without brackets or port",
    );
  });

  await t.step("with trustProxy, IPv6 clients count by their /64", async () => {
    await using relay = await startTestRelay({ trustProxy: true });
    for (let i = 1; i <= 5; i++) {
      const res = await registerAttempt(relay, { "x-forwarded-for": `2001:db8:1:2::${i}` });
      await assertNotLimited(res, `attempt ${i}`);
    }
    await assertLimited(
      await registerAttempt(relay, { "x-forwarded-for": "2001:db8:1:2:ffff:ffff:ffff:ffff" }),
      "another address of the same /64",
    );
    await assertNotLimited(
      await registerAttempt(relay, { "x-forwarded-for": "2001:db8:1:3::1" }),
      "the next /64",
    );
  });
});

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function createKey(
  user: User,
  body: Record<string, unknown>,
): Promise<{ id: string; key: string; expiresAt: string | null }> {
  const res = await user.api("/api/keys", json("POST", body));
  const created = await res.json();
  assert.equal(res.status, 201, JSON.stringify(created));
  return created;
}

/** Every file under `dir` (recursively), by path, with its bytes. */
async function readAll(dir: string): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) {
      for (const [p, bytes] of await readAll(path)) files.set(p, bytes);
    } else if (entry.isFile) {
      files.set(path, await Deno.readFile(path));
    }
  }
  return files;
}

function indexOfBytes(haystack: Uint8Array, needle: Uint8Array): number {
  const first = needle[0];
  if (first === undefined) return 0;
  let at = haystack.indexOf(first);
  while (at >= 0 && at + needle.length <= haystack.length) {
    let i = 1;
    while (i < needle.length && haystack[at + i] === needle[i]) i++;
    if (i === needle.length) return at;
    at = haystack.indexOf(first, at + 1);
  }
  return -1;
}

/** The files (of `files`) that contain `needle`. */
function filesWith(files: Map<string, Uint8Array>, needle: string | Uint8Array): string[] {
  const bytes = typeof needle === "string" ? new TextEncoder().encode(needle) : needle;
  return [...files].filter(([, data]) => indexOfBytes(data, bytes) >= 0).map(([path]) => path);
}

function hexToBytes(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g) ?? [], (h) => parseInt(h, 16));
}

Deno.test("the data folder holds key hashes and sealed webhook secrets, never the secrets themselves", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url, { password: PASSWORD });
  const apiKey = await createKey(user, { name: "ci" });
  const runnerToken = await createKey(user, { name: "runner" });
  const res = await user.api("/api/webhooks", json("POST", { name: "CI", source: "ci" }));
  const body = await res.json();
  assert.equal(res.status, 201, JSON.stringify(body));
  const { id: webhookId, secret } = body.webhook as { id: string; secret: string };
  assert.match(secret, /^[0-9a-f]{64}$/);
  const sealed = (await relay.relay.store.webhooks.get(webhookId))?.secretEnc;
  assert.ok(sealed, "the webhook was not stored");

  const keys: Record<string, string> = {
    "register's CLI key": user.apiKey,
    "API key": apiKey.key,
    "runner token": runnerToken.key,
  };
  /** What must never be on disk: each key, its random part alone, and the webhook secret. */
  const forbidden: [string, string | Uint8Array][] = [
    ...Object.entries(keys).flatMap(([what, key]): [string, string][] => [
      [what, key],
      [`${what} without its prefix`, key.slice(key.indexOf("_") + 1)],
    ]),
    ["webhook secret", secret],
    ["webhook secret in upper case", secret.toUpperCase()],
    ["webhook secret as bytes", hexToBytes(secret)],
  ];
  const hashes = await Promise.all(
    Object.entries(keys).map(async ([what, key]) => [what, await sha256Hex(key)] as const),
  );

  const check = async (when: string) => {
    const files = await readAll(relay.dataDir);
    assert.ok([...files.keys()].some((p) => p.endsWith("relay.db")), `${when}: no relay.db`);
    for (const [what, needle] of forbidden) {
      assert.deepEqual(filesWith(files, needle), [], `${when}: the ${what} is stored in clear`);
    }
    // The scan does find what is stored: each key's hash and the sealed secret.
    for (const [what, hash] of hashes) {
      assert.notDeepEqual(filesWith(files, hash), [], `${when}: the ${what}'s hash is not found`);
    }
    assert.notDeepEqual(filesWith(files, sealed), [], `${when}: the sealed secret is not found`);
  };
  // As a copy of the live folder (database and WAL) would be…
  await check("while running");
  // …and as a backup of the stopped relay is.
  await relay.shutdown();
  await check("after shutdown");
});

Deno.test("an expired API key is refused with 401 and still listed, as expired", async () => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url, { password: PASSWORD });
  const key = await createKey(user, { name: "short-lived", expiresInDays: 1 });
  const withKey = (headers: Record<string, string>) =>
    fetch(`${relay.url}/api/runners`, { headers });

  const before = await withKey({ "x-api-key": key.key });
  assert.equal(before.status, 200, await before.text());

  // A day passes: the relay only learns it from its database.
  const past = new Date(Date.now() - 60_000).toISOString();
  const db = new DatabaseSync(join(relay.dataDir, "relay.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    const changed = db.prepare("UPDATE api_keys SET expires_at = ? WHERE id = ?").run(past, key.id);
    assert.equal(changed.changes, 1);
  } finally {
    db.close();
  }

  const sent = { "x-api-key": key.key, authorization: `Bearer ${key.key}` };
  for (const [header, value] of Object.entries(sent)) {
    const what = `expired key in ${header}`;
    assert.equal(await errorCode(await withKey({ [header]: value }), 401, what), "unauthorized");
  }

  // The owner still sees it (by key and by cookie), marked expired, until deleting it.
  for (const [what, get] of [["API key", user.api], ["cookie", user.web]] as const) {
    const res = await get("/api/keys");
    const text = await res.text();
    assert.equal(res.status, 200, `${what}: ${text}`);
    const listed = JSON.parse(text).keys.find((k: { id: string }) => k.id === key.id);
    assert.ok(listed, `${what}: the expired key is not listed`);
    assert.equal(listed.expired, true, what);
    assert.equal(listed.expiresAt, past, what);
    const fresh = JSON.parse(text).keys.find((k: { name: string }) => k.name === "cli");
    assert.equal(fresh?.expired, false, `${what}: the key that did not expire`);
  }
});
