import assert from "node:assert/strict";
import { CloseCode } from "../shared/protocol.ts";
import type { Credential } from "./auth.ts";
import { CREDENTIAL_SWEEP_MS, CredentialSweeps } from "./credential_sweeps.ts";
import { FakeClock } from "./testdata/fakes.ts";

/** Lets the sweep's lookups (promises) settle. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

function socket(userId: string, principal: Credential) {
  const closed: string[] = [];
  return {
    userId,
    keyId: principal.keyId,
    principal: { ...principal, userId },
    closed,
    close: (code: number, reason: string) => closed.push(`${code} ${reason}`),
  };
}

Deno.test("the sweep closes sockets whose key or browser session lapsed, looking each up once", async () => {
  const clock = new FakeClock();
  const lapsed = new Set(["key:k2", "cookie:b2"]);
  const lookups: string[] = [];
  const live = (c: Credential) => {
    const id = `${c.via}:${c.via === "key" ? c.keyId : c.authSessionId}`;
    lookups.push(id);
    return Promise.resolve(!lapsed.has(id));
  };
  const key = (keyId: string): Credential => ({ via: "key", keyId, authSessionId: null });
  const cookie = (id: string): Credential => ({ via: "cookie", keyId: null, authSessionId: id });
  const links = [socket("u1", key("k1")), socket("u1", key("k2"))];
  const viewers = [
    socket("u1", cookie("b1")),
    socket("u1", cookie("b2")),
    socket("u2", key("k2")),
    socket("u2", cookie("b2")),
  ];
  const sweeps = new CredentialSweeps({
    links: () => links,
    viewers: (userId) => viewers.filter((v) => userId === undefined || v.userId === userId),
    principalLive: live,
    clock,
  });
  sweeps.start();
  clock.advance(CREDENTIAL_SWEEP_MS - 1);
  assert.deepEqual(links.flatMap((l) => l.closed), [], "nothing before the first sweep");
  clock.advance(1);
  await settled();
  const revoked = CloseCode.revoked;
  assert.deepEqual(links.map((l) => l.closed), [[], [`${revoked} API key expired or revoked`]]);
  assert.deepEqual(viewers.map((v) => v.closed), [
    [],
    [`${revoked} Signed out or session expired`],
    [`${revoked} API key expired or revoked`],
    [`${revoked} Signed out or session expired`],
  ]);
  assert.deepEqual(lookups.sort(), ["cookie:b1", "cookie:b2", "key:k1", "key:k2"]);
  sweeps.close();
  assert.equal(clock.pendingTimers, 0);
});

Deno.test("revoking a key closes its runner and viewer sockets at once; a user's sweep spares others", async () => {
  const key = (keyId: string): Credential => ({ via: "key", keyId, authSessionId: null });
  const links = [socket("u1", key("k1")), socket("u2", key("k2"))];
  const viewers = [socket("u1", key("k1")), socket("u2", key("k2"))];
  const sweeps = new CredentialSweeps({
    links: () => links,
    viewers: (userId) => viewers.filter((v) => userId === undefined || v.userId === userId),
  });
  sweeps.start();
  sweeps.revokeKey("k1");
  assert.deepEqual(links.map((l) => l.closed.length), [1, 0]);
  assert.deepEqual(viewers.map((v) => v.closed), [[`${CloseCode.revoked} API key revoked`], []]);
  await sweeps.closeLapsed(() => Promise.resolve(false), "u2");
  assert.deepEqual(links.map((l) => l.closed.length), [1, 1]);
  assert.deepEqual(viewers.map((v) => v.closed.length), [1, 1]);
});

Deno.test("a browser session carried over keeps its user's sockets open under the new one; others close", async () => {
  const cookie = (id: string): Credential => ({ via: "cookie", keyId: null, authSessionId: id });
  const viewers = [
    socket("u1", cookie("old")),
    socket("u1", cookie("other")),
    socket("u2", cookie("old")),
  ];
  const sweeps = new CredentialSweeps({
    links: () => [],
    viewers: (userId) => viewers.filter((v) => userId === undefined || v.userId === userId),
  });
  sweeps.carryOver("u1", "old", "new");
  assert.deepEqual(viewers.map((v) => v.principal.authSessionId), ["new", "other", "old"]);
  const live = new Set(["new"]);
  await sweeps.closeLapsed((c) => Promise.resolve(live.has(c.authSessionId ?? "")), "u1");
  assert.deepEqual(viewers.map((v) => v.closed.length), [0, 1, 0]);
});
