/**
 * Which names and origins a browser may reach the relay under: a page on a
 * name an attacker points at the relay's address (DNS rebinding) gets
 * nowhere, the relay's own names work, and https is pinned with HSTS.
 *
 * @module
 */
import assert from "node:assert/strict";
import { serveRelay } from "../relay/mod.ts";
import { webClient } from "../web/mod.ts";
import { signUp, type User } from "./harness/client.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { tempDir } from "./harness/procs.ts";
import { openRawWebSocket, rawRequest, type RawResponse } from "./harness/raw_http.ts";

const UPGRADE = {
  upgrade: "websocket",
  connection: "Upgrade",
  "sec-websocket-key": btoa("baton-test-key!!"),
  "sec-websocket-version": "13",
};

/** A browser on `origin` (whose name resolves to the relay) creating an API key with the cookie. */
function createKeyAs(port: number, user: User, host: string, origin: string) {
  return rawRequest(port, {
    method: "POST",
    target: "/api/keys",
    headers: { host, origin, cookie: user.cookie, "content-type": "application/json" },
    body: JSON.stringify({ name: "from a page" }),
  });
}

function errorOf(res: RawResponse): string {
  return JSON.parse(res.text).error.code;
}

async function keyCount(user: User): Promise<number> {
  return (await (await user.api("/api/keys")).json()).keys.length;
}

Deno.test("a relay on loopback answers only to its own names: a rebound name is 421, the loopback names and the base URL pass", async (t) => {
  await using relay = await startTestRelay({ baseUrl: "http://relay.example:8080" });
  const user = await signUp(relay.url);
  const port = relay.port;
  const evil = `evil.example:${port}`;

  await t.step(
    "a page on another name: cookie POST, viewer upgrade and sign-up refused",
    async () => {
      const before = await keyCount(user);
      const post = await createKeyAs(port, user, evil, `http://${evil}`);
      assert.equal(post.status, 421, post.text);
      assert.equal(errorOf(post), "bad_host");
      const ws = await rawRequest(port, {
        method: "GET",
        target: "/_viewer",
        headers: { host: evil, origin: `http://${evil}`, cookie: user.cookie, ...UPGRADE },
      });
      assert.equal(ws.status, 421, ws.text);
      const signup = await rawRequest(port, {
        method: "POST",
        target: "/api/auth/sign-up/email",
        headers: { host: evil, origin: `http://${evil}`, "content-type": "application/json" },
        body: JSON.stringify({ email: "x@example.com", password: "long enough pw", name: "x" }),
      });
      assert.equal(signup.status, 421, signup.text);
      assert.equal(await keyCount(user), before);
    },
  );

  for (const name of ["localhost", "127.0.0.1", "[::1]"]) {
    await t.step(`${name} on the relay's port passes the Host and Origin checks`, async () => {
      const res = await createKeyAs(port, user, `${name}:${port}`, `http://${name}:${port}`);
      assert.equal(res.status, 201, res.text);
      const ws = await openRawWebSocket(port, "/_viewer", {
        host: `${name}:${port}`,
        origin: `http://${name}:${port}`,
        cookie: user.cookie,
      });
      ws.close();
    });
  }

  await t.step("the base URL's name (as a proxy in front passes it) passes", async () => {
    const res = await createKeyAs(port, user, "relay.example:8080", "http://relay.example:8080");
    assert.equal(res.status, 201, res.text);
  });

  await t.step("a loopback name with another port is a foreign origin (403)", async () => {
    const other = `localhost:${port === 1 ? 2 : port - 1}`;
    const res = await createKeyAs(port, user, `localhost:${port}`, `http://${other}`);
    assert.equal(res.status, 403, res.text);
    assert.equal(errorOf(res), "bad_origin");
  });
});

Deno.test("a relay on all addresses answers any Host but takes cookie writes only from its own origins", async () => {
  const dataDir = await tempDir("baton-relay-any-");
  const relay = await serveRelay({ web: await webClient(), hostname: "0.0.0.0", port: 0, dataDir });
  try {
    const url = `http://127.0.0.1:${relay.port}`;
    const user = await signUp(url);
    const evil = `evil.example:${relay.port}`;
    const before = await keyCount(user);
    const post = await createKeyAs(relay.port, user, evil, `http://${evil}`);
    assert.equal(post.status, 403, post.text);
    assert.equal(errorOf(post), "bad_origin");
    const ws = await rawRequest(relay.port, {
      method: "GET",
      target: "/_viewer",
      headers: { host: evil, origin: `http://${evil}`, cookie: user.cookie, ...UPGRADE },
    });
    assert.equal(ws.status, 403, ws.text);
    // better-auth's own routes check the same origins: no password change from there.
    const change = await rawRequest(relay.port, {
      method: "POST",
      target: "/api/auth/change-password",
      headers: {
        host: evil,
        origin: `http://${evil}`,
        cookie: user.cookie,
        "content-type": "application/json",
      },
      body: JSON.stringify({ currentPassword: user.password, newPassword: "a new long password" }),
    });
    assert.equal(change.status, 403, change.text);
    assert.equal(await keyCount(user), before);
  } finally {
    await relay.shutdown();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("a name given in allowedHosts passes the Host and Origin checks", async () => {
  const dataDir = await tempDir("baton-relay-hosts-");
  const relay = await serveRelay({
    web: await webClient(),
    hostname: "127.0.0.1",
    port: 0,
    dataDir,
    allowedHosts: ["http://relay.lan", "box.tailnet:9000"],
  });
  try {
    const user = await signUp(`http://127.0.0.1:${relay.port}`);
    for (
      const [host, origin] of [["relay.lan", "http://relay.lan"], [
        "box.tailnet:9000",
        "https://box.tailnet:9000",
      ]]
    ) {
      const res = await createKeyAs(relay.port, user, host!, origin!);
      assert.equal(res.status, 201, `${host}: ${res.text}`);
    }
    const other = await createKeyAs(relay.port, user, "relay.lan.evil.example", "http://relay.lan");
    assert.equal(other.status, 421, other.text);
  } finally {
    await relay.shutdown();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
});

Deno.test("Strict-Transport-Security is sent when the base URL is https, and only then", async () => {
  await using secure = await startTestRelay({ baseUrl: "https://relay.example" });
  await using plain = await startTestRelay();
  for (const path of ["/health", "/api/setup-status", "/"]) {
    const s = await fetch(`${secure.url}${path}`, { headers: { accept: "text/html" } });
    await s.body?.cancel();
    assert.equal(s.headers.get("strict-transport-security"), "max-age=31536000", path);
    const p = await fetch(`${plain.url}${path}`);
    await p.body?.cancel();
    assert.equal(p.headers.get("strict-transport-security"), null, path);
  }
});
