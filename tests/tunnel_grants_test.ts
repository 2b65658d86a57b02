/**
 * Preview grants and handoff tickets (relay/tunnel_grants.ts) on a real
 * SQLite store, on a fake clock. Two TunnelGrants over one store are two
 * relay nodes (or one node before and after a restart).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { openDatabase } from "../relay/store/db.ts";
import { type Async, asyncStore, Store } from "../relay/store/mod.ts";
import type { TunnelGrantsRepo } from "../relay/store/tunnel_grants.ts";
import {
  CHECK_CACHE_MS,
  GRANT_IDLE_MS,
  GRANT_MAX_MS,
  MAX_GRANTS_PER_USER,
  MAX_TICKETS_PER_USER,
  TICKET_MS,
  TOUCH_EVERY_MS,
  TunnelGrants,
  type TunnelGrantsOptions,
} from "../relay/tunnel_grants.ts";

const G = { userId: "u1", runnerId: "r1", port: 5173, authSessionId: "s1" };

interface Rig {
  /** A node's grants over the shared store. */
  node(options?: TunnelGrantsOptions): TunnelGrants;
  /** How many times the nodes read a grant from the store. */
  reads(): number;
  /** The store's repository itself. */
  repo: Async<TunnelGrantsRepo>;
  /** Rows of the store's database. */
  rows(sql: string): Record<string, unknown>[];
}

async function withGrants(fn: (rig: Rig) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "baton-grants-" });
  const db = openDatabase(join(dir, "relay.db"));
  try {
    const repo = asyncStore(new Store(db)).tunnelGrants;
    let reads = 0;
    const counted = { ...repo, get: (hash: string) => (reads++, repo.get(hash)) };
    await fn({
      node: (options) => new TunnelGrants(counted, options),
      reads: () => reads,
      repo,
      rows: (sql) => db.prepare(sql).all() as Record<string, unknown>[],
    });
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a grant answers for its user, runner and port until it idles or ages out", async () => {
  await withGrants(async ({ node }) => {
    let now = 0;
    const grants = node({ now: () => now });
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
    assert.equal(
      await grants.check(third.slice(0, -1) + (third.endsWith("A") ? "B" : "A")),
      null,
    );
    assert.equal(await grants.check("not a token"), null);
    await grants.revoke(third);
    assert.equal(await grants.check(third), null);
  });
});

Deno.test("a user holds a bounded number of grants, the oldest going first", async () => {
  await withGrants(async ({ node }) => {
    let now = 0;
    const grants = node({ now: () => now });
    const tokens: string[] = [];
    for (let i = 0; i <= MAX_GRANTS_PER_USER; i++) {
      now++;
      tokens.push(await grants.mint(G));
    }
    assert.equal(await grants.size(), MAX_GRANTS_PER_USER);
    now += CHECK_CACHE_MS + 1; // past what this node believes without the store
    assert.equal(await grants.check(tokens[0]!), null);
    assert.deepEqual(await grants.check(tokens[1]!), G);
    assert.deepEqual(await grants.check(tokens.at(-1)!), G);
    // Another user's grants are not counted against this one.
    await grants.mint({ ...G, userId: "u2" });
    assert.equal(await grants.size(), MAX_GRANTS_PER_USER + 1);
  });
});

Deno.test("a handoff ticket is spent once, within a minute", async () => {
  await withGrants(async ({ node }) => {
    let now = 0;
    const grants = node({ now: () => now });
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
    // A ticket hands over a live grant only.
    await grants.revoke(token);
    await assert.rejects(grants.ticket(token, "/"), RangeError);
  });
});

Deno.test("a path logged by the relay shows no grant token", async () => {
  const { redactGrants } = await import("../relay/tunnel_grants.ts");
  await withGrants(async ({ node }) => {
    const token = await node().mint(G);
    const logged = redactGrants(`/api/tunnel/g/${token}/src/main.js`);
    assert.ok(!logged.includes(token), logged);
    assert.equal(logged, "/api/tunnel/g/…/src/main.js");
    assert.equal(redactGrants("/api/sessions/abc"), "/api/sessions/abc");
  });
});

Deno.test("a grant made on one node is answered by another, and by a node started after", async () => {
  await withGrants(async ({ node }) => {
    let now = 0;
    const clock = { now: () => now };
    const a = node(clock);
    const b = node(clock);
    const token = await a.mint(G);
    assert.deepEqual(await b.check(token), G);
    // A ticket made on A is spent on B, once: A cannot spend it after.
    const ticket = await a.ticket(token, "/x");
    assert.deepEqual(await b.redeem(ticket), { grant: token, next: "/x" });
    assert.equal(await a.redeem(ticket), null);
    // A restart (a new TunnelGrants over the same store) keeps the grant.
    assert.deepEqual(await node(clock).check(token), G);
    // Revoked on A: A forgets it at once, B once it stops believing what it found.
    await a.revoke(token);
    assert.equal(await a.check(token), null);
    now += CHECK_CACHE_MS + 1;
    assert.equal(await b.check(token), null);
  });
});

Deno.test("the store holds hashes and sealed tickets, never a token", async () => {
  await withGrants(async ({ node, rows }) => {
    const grants = node();
    const token = await grants.mint(G);
    const ticket = await grants.ticket(token, "/secret-path");
    const stored = JSON.stringify([
      rows("SELECT * FROM tunnel_grants"),
      rows("SELECT * FROM tunnel_tickets"),
    ]);
    for (const t of [token, ticket, "/secret-path"]) assert.ok(!stored.includes(t), stored);
    // The sealed row opens with its ticket only: the grant comes out, and the row is gone.
    assert.equal((await grants.redeem(ticket))?.grant, token);
    assert.deepEqual(rows("SELECT * FROM tunnel_tickets"), []);
  });
});

Deno.test("a node reads a grant once per burst and every few seconds, writes a use once a minute, and a revoke beats a read under way", async () => {
  await withGrants(async ({ node, rows, reads, repo }) => {
    let now = 1_000;
    const grants = node({ now: () => now });
    const token = await grants.mint(G);
    const lastUsed = () => Number(rows("SELECT last_used FROM tunnel_grants")[0]!.last_used);
    // Revoked behind this node's back (another node): believed for CHECK_CACHE_MS still.
    rows("DELETE FROM tunnel_grants RETURNING hash");
    now += CHECK_CACHE_MS;
    assert.deepEqual(await grants.check(token), G, "believed");
    now += 1;
    assert.equal(await grants.check(token), null, "asked the store again");

    // A page's requests arriving together on a node that does not believe the grant: one read.
    const burst = await node({ now: () => now }).mint(G);
    const other = node({ now: () => now });
    const before = reads();
    const seen = await Promise.all(Array.from({ length: 20 }, () => other.check(burst)));
    assert.deepEqual(seen, Array(20).fill(G));
    assert.equal(reads() - before, 1);
    // Revoked while a read is under way: what the read found is not believed after.
    let read!: () => void;
    const wasRead = new Promise<void>((r) => read = r);
    let release!: () => void;
    const released = new Promise<void>((r) => release = r);
    const slow = new TunnelGrants({
      ...repo,
      get: async (hash) => {
        const g = await repo.get(hash);
        read();
        await released;
        return g;
      },
    }, { now: () => now });
    const reading = slow.check(burst);
    await wasRead;
    await slow.revoke(burst);
    release();
    assert.deepEqual(await reading, G, "found before the revoke");
    assert.equal(await slow.check(burst), null);

    const kept = await grants.mint(G);
    const made = now;
    for (let i = 0; i < 20; i++) {
      now += CHECK_CACHE_MS + 1; // each check past the cache: a read, not a write
      assert.deepEqual(await grants.check(kept), G);
      const expect = now - made >= TOUCH_EVERY_MS ? "written" : "not yet";
      assert.equal(lastUsed() === made ? "not yet" : "written", expect, `after ${now - made} ms`);
    }
  });
});

Deno.test("a user's unspent tickets are bounded, and expired rows are swept", async () => {
  await withGrants(async ({ node, rows }) => {
    let now = 0;
    const grants = node({ now: () => now });
    const token = await grants.mint(G);
    const tickets: string[] = [];
    for (let i = 0; i <= MAX_TICKETS_PER_USER; i++) {
      now++;
      tickets.push(await grants.ticket(token, `/${i}`));
    }
    const count = (t: string) => Number(rows(`SELECT COUNT(*) AS n FROM ${t}`)[0]!.n);
    assert.equal(count("tunnel_tickets"), MAX_TICKETS_PER_USER);
    assert.equal(await grants.redeem(tickets[0]!), null, "the oldest went");
    assert.equal((await grants.redeem(tickets.at(-1)!))?.next, `/${MAX_TICKETS_PER_USER}`);
    // A day later the next mint sweeps what expired (the old grant and its tickets).
    now += GRANT_MAX_MS + 1;
    await grants.mint({ ...G, userId: "u2" });
    assert.equal(count("tunnel_tickets"), 0);
    assert.equal(count("tunnel_grants"), 1);
  });
});
