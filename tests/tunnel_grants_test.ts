/** Preview grants and handoff tickets (relay/tunnel_grants.ts), on a fake clock. */
import assert from "node:assert/strict";
import {
  GRANT_IDLE_MS,
  GRANT_MAX_MS,
  MAX_GRANTS_PER_USER,
  TICKET_MS,
  TunnelGrants,
} from "../relay/tunnel_grants.ts";

const G = { userId: "u1", runnerId: "r1", port: 5173, authSessionId: "s1" };

Deno.test("a grant answers for its user, runner and port until it idles or ages out", async () => {
  let now = 0;
  const grants = new TunnelGrants({ now: () => now });
  const token = await grants.mint(G);
  assert.match(token, /^[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(await grants.check(token), G);
  // Used within the idle hour, it lives on, up to a day.
  for (now = GRANT_IDLE_MS - 1; now < GRANT_MAX_MS; now += GRANT_IDLE_MS - 1) {
    assert.deepEqual(await grants.check(token), G, `at ${now}`);
  }
  now = GRANT_MAX_MS + 1;
  assert.equal(await grants.check(token), null);
  // Idle for an hour: gone.
  const other = await grants.mint(G);
  now += GRANT_IDLE_MS + 1;
  assert.equal(await grants.check(other), null);
  // A made-up, altered or revoked token: nothing.
  const third = await grants.mint(G);
  assert.equal(await grants.check(third.slice(0, -1) + (third.endsWith("A") ? "B" : "A")), null);
  assert.equal(await grants.check("not a token"), null);
  await grants.revoke(third);
  assert.equal(await grants.check(third), null);
});

Deno.test("a user holds a bounded number of grants, the oldest going first", async () => {
  let now = 0;
  const grants = new TunnelGrants({ now: () => now });
  const tokens: string[] = [];
  for (let i = 0; i <= MAX_GRANTS_PER_USER; i++) {
    now++;
    tokens.push(await grants.mint(G));
  }
  assert.equal(grants.size, MAX_GRANTS_PER_USER);
  assert.equal(await grants.check(tokens[0]!), null);
  assert.deepEqual(await grants.check(tokens.at(-1)!), G);
  // Another user's grants are not counted against this one.
  await grants.mint({ ...G, userId: "u2" });
  assert.equal(grants.size, MAX_GRANTS_PER_USER + 1);
});

Deno.test("a handoff ticket is spent once, within a minute", async () => {
  let now = 0;
  const grants = new TunnelGrants({ now: () => now });
  const token = await grants.mint(G);
  const ticket = await grants.ticket(token, "/page?x=1");
  assert.deepEqual(await grants.redeem(ticket), { grant: token, next: "/page?x=1" });
  assert.equal(await grants.redeem(ticket), null);
  const late = await grants.ticket(token, "/");
  now += TICKET_MS + 1;
  assert.equal(await grants.redeem(late), null);
  // The ticket is not the grant, nor the grant a ticket.
  assert.equal(await grants.check(await grants.ticket(token, "/")), null);
  assert.equal(await grants.redeem(token), null);
});

Deno.test("a path logged by the relay shows no grant token", async () => {
  const { redactGrants } = await import("../relay/tunnel_grants.ts");
  const token = await new TunnelGrants().mint(G);
  const logged = redactGrants(`/api/tunnel/g/${token}/src/main.js`);
  assert.ok(!logged.includes(token), logged);
  assert.equal(logged, "/api/tunnel/g/…/src/main.js");
  assert.equal(redactGrants("/api/sessions/abc"), "/api/sessions/abc");
});
