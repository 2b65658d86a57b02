/**
 * One store suite for both dialects: the same behaviours run against the
 * embedded SQLite store (through `asyncStore`) and against PgStore on a
 * private PostgreSQL, and the two schemas are checked to be in step. When
 * PostgreSQL is not installed, its half is skipped with one printed line.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { getMigrations } from "better-auth/db/migration";
import { openDatabase } from "../relay/store/db.ts";
import { type AsyncStore, asyncStore, Store } from "../relay/store/mod.ts";
import { type CommitEvents, inlineCommit } from "../relay/store/event_writer.ts";
import type { SessionRecord, StoredEvent } from "../relay/store/mod.ts";
import { openPgStore, PG_MIGRATIONS, type PgStore } from "../relay/store/pg/mod.ts";
import { authConfig, type AuthConfigOptions, startBetterAuth } from "../relay/_better_auth.ts";
import { openRelayStore } from "../relay/relay_store.ts";
import { TunnelGrants } from "../relay/tunnel_grants.ts";
import { postgresAvailable, type PostgresServer, startPostgres } from "./harness/postgres.ts";

/** One store under test, with a way to reach its tables directly. */
interface Subject {
  store: AsyncStore;
  commit: CommitEvents;
  /** Runs SQL (`?` placeholders) on the database itself; its rows. */
  exec(sql: string, ...params: unknown[]): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

type Dialect = "sqlite" | "postgres";

const HAS_PG = postgresAvailable("the PostgreSQL half of the store conformance suite");

async function sqliteSubject(): Promise<Subject> {
  const dir = await Deno.makeTempDir({ prefix: "baton-conformance-" });
  const db = openDatabase(join(dir, "relay.db"));
  const store = new Store(db);
  return {
    store: asyncStore(store),
    commit: inlineCommit(store),
    exec: (sql, ...params) =>
      // deno-lint-ignore no-explicit-any
      Promise.resolve(db.prepare(sql).all(...params as any[]) as Record<string, unknown>[]),
    close: async () => {
      db.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** A database migrated once, copied for each behaviour (a copy is faster than migrating). */
let template: string | null = null;

async function pgSubject(server: PostgresServer): Promise<Subject> {
  if (!template) {
    await (await openPgStore(await server.createDatabase("baton_template"))).close();
    template = "baton_template";
  }
  const store = await openPgStore(await server.createDatabase(undefined, { template }), {
    poolSize: 4,
  });
  return pgWrap(store);
}

function pgWrap(store: PgStore): Subject {
  return {
    store,
    commit: store.commit,
    exec: async (sql, ...params) => {
      let n = 0;
      const text = sql.replace(/\?/g, () => `$${++n}`);
      return (await store.pool.query({ text, values: params })).rows;
    },
    close: () => store.close(),
  };
}

/** A user row in better-auth's table (its types differ between the dialects). */
async function addUser(s: Subject, d: Dialect, id: string, email: string, createdAt: string) {
  await s.exec(
    `INSERT INTO "user" (id, name, email, "emailVerified", "createdAt", "updatedAt")
     VALUES (?, ?, ?, ?, ?, ?)`,
    id,
    `name of ${id}`,
    email,
    d === "sqlite" ? 0 : false,
    createdAt,
    createdAt,
  );
}

function session(id: string, over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    sessionId: id,
    userId: "u1",
    runnerId: "r1",
    status: "running",
    activity: "idle",
    cwd: "/w",
    model: { provider: "p", id: "m" },
    prompt: `prompt of ${id}`,
    title: `title of ${id}`,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    endedAt: null,
    endReason: null,
    lastSeq: 0,
    isPinned: false,
    parentId: null,
    agent: null,
    ...over,
  };
}

const ev = (seq: number, text = "x"): StoredEvent => ({
  seq,
  json: JSON.stringify({ seq, ts: 0, e: { text } }),
});

/** Every event after `since`, read in pages of `limit`. */
async function readAll(store: AsyncStore, sid: string, since: number, limit: number) {
  const got: StoredEvent[] = [];
  for (let after = since;;) {
    const page = await store.events.after(sid, after, limit);
    if (page.length === 0) return got;
    assert.ok(page.length <= limit, `at most ${limit}`);
    got.push(...page);
    after = page[page.length - 1]!.seq;
  }
}

/** The behaviours every store shows, whatever its engine. */
const BEHAVIOURS: Record<string, (s: Subject, d: Dialect) => Promise<void>> = {
  "accounts are read from better-auth's tables": async (s, d) => {
    const { accounts } = s.store;
    assert.equal(await accounts.count(), 0);
    assert.equal(await accounts.first(), undefined);
    await addUser(s, d, "u1", "one@example.com", "2026-01-02T00:00:00.000Z");
    await addUser(s, d, "u2", "two@example.com", "2026-01-01T00:00:00.000Z");
    assert.equal(await accounts.count(), 2);
    assert.deepEqual({ ...await accounts.byId("u1") }, {
      id: "u1",
      email: "one@example.com",
      name: "name of u1",
    });
    assert.equal(await accounts.byId("nobody"), undefined);
    assert.equal(await accounts.idByEmail("TWO@example.com"), "u2", "compared lowercased");
    assert.equal(await accounts.idByEmail("three@example.com"), undefined);
    assert.deepEqual({ ...await accounts.first() }, { id: "u2", email: "two@example.com" });
    const expires = "2026-02-01T12:00:00.000Z";
    await s.exec(
      `INSERT INTO "session" (id, "expiresAt", token, "createdAt", "updatedAt", "userId")
       VALUES (?, ?, ?, ?, ?, ?)`,
      "bs1",
      expires,
      "tok",
      expires,
      expires,
      "u1",
    );
    assert.equal(await accounts.browserSessionExpiry("bs1"), Date.parse(expires));
    assert.equal(await accounts.browserSessionExpiry("gone"), undefined);
  },

  "keys: insert, look up, list, bind once, delete only one's own": async (s) => {
    const { keys } = s.store;
    const key = (id: string, over = {}) => ({
      id,
      userId: "u1",
      name: `key ${id}`,
      kind: "api" as const,
      scope: "full" as const,
      runnerId: null,
      prefix: "bk_",
      hash: `hash-${id}`,
      createdAt: `2026-01-0${id.length}T00:00:00.000Z`,
      expiresAt: null,
      lastUsedAt: null,
      ...over,
    });
    await keys.insert(key("k"));
    await keys.insert(key("kk", { kind: "runner", scope: "full" }));
    await keys.insert(key("kkk", { userId: "u2", scope: "read" }));
    assert.deepEqual(await keys.byHash("hash-k"), key("k"));
    assert.equal((await keys.byId("kk"))!.scope, "runner", "a runner token's scope is runner");
    assert.equal((await keys.byId("kkk"))!.scope, "read");
    assert.equal(await keys.byHash("nope"), undefined);
    assert.deepEqual((await keys.listForUser("u1")).map((k) => k.id), ["kk", "k"]);
    await assert.rejects(keys.insert(key("other", { hash: "hash-k" })), /UNIQUE constraint failed/);
    assert.equal(await keys.byId("other"), undefined, "the refused row was not stored");
    assert.equal(await keys.bindRunner("kk", "r1"), "r1");
    assert.equal(await keys.bindRunner("kk", "r2"), "r1", "bound once, to the first");
    await keys.touch("k", "2026-03-01T00:00:00.000Z");
    assert.equal((await keys.byId("k"))!.lastUsedAt, "2026-03-01T00:00:00.000Z");
    assert.equal(await keys.delete("u1", "kkk"), false, "a foreign key is not deleted");
    assert.ok(await keys.byId("kkk"));
    assert.equal(await keys.delete("u1", "k"), true);
    assert.equal(await keys.delete("u1", "k"), false);
  },

  "runners: upsert, ownership, listing by name byte order, trigger definitions": async (s) => {
    const { runners } = s.store;
    const runner = (id: string, name: string, userId = "u1") => ({
      id,
      userId,
      name,
      platform: "linux",
      version: "1",
      roots: ["/a", "/b"],
      createdAt: "2026-01-01T00:00:00.000Z",
      lastSeenAt: null,
    });
    await runners.upsert(runner("r1", "beta"));
    await runners.upsert(runner("r2", "alpha"));
    await runners.upsert(runner("r3", "Alpha"));
    await runners.upsert(runner("r4", "zed", "u2"));
    assert.deepEqual(await runners.get("r1"), runner("r1", "beta"));
    assert.equal(await runners.getOwned("u1", "r4"), undefined, "foreign looks missing");
    assert.equal(await runners.getOwned("u1", "nope"), undefined);
    assert.deepEqual((await runners.listForUser("u1")).map((r) => r.name), [
      "Alpha",
      "alpha",
      "beta",
    ]);
    // A hello again: new name and roots, the first creation time stays.
    await runners.upsert({ ...runner("r1", "gamma"), createdAt: "2027-01-01", roots: ["/c"] });
    const again = (await runners.get("r1"))!;
    assert.equal(again.name, "gamma");
    assert.deepEqual(again.roots, ["/c"]);
    assert.equal(again.createdAt, "2026-01-01T00:00:00.000Z");
    assert.deepEqual(await runners.triggerDefs("r1"), []);
    assert.deepEqual(await runners.triggerDefs("nope"), []);
    const defs = [{ type: "t", label: "T" }] as never;
    await runners.setTriggerDefs("r1", defs);
    assert.deepEqual(await runners.triggerDefs("r1"), defs);
    await runners.touch("r1", "2026-05-05T00:00:00.000Z");
    assert.equal((await runners.get("r1"))!.lastSeenAt, "2026-05-05T00:00:00.000Z");
  },

  "sessions: insert, read, list, patch, pins, last seq, children, delete": async (s) => {
    const { sessions } = s.store;
    await sessions.insert(session("a", { createdAt: "2026-01-01T00:00:01.000Z" }));
    await sessions.insert(session("b", { createdAt: "2026-01-01T00:00:02.000Z", parentId: "a" }));
    await sessions.insert(
      session("c", { createdAt: "2026-01-01T00:00:03.000Z", parentId: "a", agent: "scout" }),
    );
    await sessions.insert(session("d", { userId: "u2", status: "ended", runnerId: "r2" }));
    const a = (await sessions.get("a"))!;
    assert.deepEqual(a, {
      ...session("a", { createdAt: "2026-01-01T00:00:01.000Z" }),
      eventBytes: 0,
    });
    assert.equal(await sessions.getOwned("u1", "d"), undefined, "foreign looks missing");
    assert.equal(await sessions.getOwned("u1", "zz"), undefined);
    const list = await sessions.listForUser("u1");
    assert.deepEqual(list.map((x) => x.sessionId), ["c", "b", "a"], "newest first");
    assert.equal(list[0]!.prompt, "", "a listing leaves prompts out");
    assert.equal(list[0]!.eventBytes, undefined, "and sizes");
    assert.equal(list[0]!.agent, "scout");
    assert.deepEqual(
      (await sessions.listLiveForRunner("r1")).map((x) => x.sessionId).sort(),
      ["a", "b", "c"],
    );
    assert.deepEqual(await sessions.listLiveForRunner("r2"), [], "ended ones are not live");
    assert.equal(await sessions.setPinned("u2", "a", true), false, "not theirs");
    assert.equal(await sessions.setPinned("u1", "a", true), true);
    assert.deepEqual((await sessions.listPinned("u1")).map((x) => x.sessionId), ["a"]);
    await sessions.update(
      "a",
      { status: "ended", model: null, endedAt: "2026-01-02T00:00:00.000Z", endReason: "done" },
      "2026-01-02T00:00:01.000Z",
    );
    const ended = (await sessions.get("a"))!;
    assert.equal(ended.status, "ended");
    assert.equal(ended.model, null);
    assert.equal(ended.endReason, "done");
    assert.equal(ended.updatedAt, "2026-01-02T00:00:01.000Z");
    assert.equal(ended.title, "title of a", "what the patch leaves out stays");
    await sessions.update("a", {}, "2030-01-01");
    assert.equal((await sessions.get("a"))!.updatedAt, "2026-01-02T00:00:01.000Z");
    await sessions.setLastSeq("a", 10, 500);
    await sessions.setLastSeq("a", 5, 100);
    assert.deepEqual(
      [(await sessions.get("a"))!.lastSeq, (await sessions.get("a"))!.eventBytes],
      [10, 500],
      "the last seq only moves forward",
    );
    assert.deepEqual((await sessions.listChildren("a")).map((x) => x.sessionId), ["b", "c"]);
    assert.equal(await sessions.countChildren("a"), 2);
    assert.equal(await sessions.countChildren("b"), 0);
    await sessions.delete("b");
    assert.equal(await sessions.get("b"), undefined);
    assert.equal(await sessions.countChildren("a"), 1);
  },

  "sessions catch their last seq up with the stored log after a crash": async (s) => {
    const { sessions, events } = s.store;
    await sessions.insert(session("behind", { lastSeq: 2 }));
    await sessions.insert(session("current", { lastSeq: 7 }));
    await sessions.insert(session("empty"));
    const log = (sid: string, seqs: number[]) =>
      events.appendMany(sid, seqs.map((seq) => ({ seq, json: `{"seq":${seq}}` })));
    await log("behind", [1, 2]);
    await log("behind", [3, 4]);
    await log("behind", [5, 9]);
    await log("current", [6, 7]);
    assert.equal(await sessions.catchUpLastSeqs(), 1, "only the session that lagged changed");
    assert.equal((await sessions.get("behind"))!.lastSeq, 9);
    assert.equal((await sessions.get("behind"))!.eventBytes, 38, "two chunks of 19 characters");
    assert.equal((await sessions.get("current"))!.eventBytes, 0);
    assert.equal((await sessions.get("empty"))!.lastSeq, 0);
    assert.equal(await sessions.catchUpLastSeqs(), 0, "a second pass finds nothing to do");
  },

  "events: runs of mixed sizes come back whole, in order, once, across many chunks": async (s) => {
    const { events } = s.store;
    const sizes = [20, 4096, 32 * 1024, 150, 33 * 1024, 64 * 1024 + 1, 10];
    const all: StoredEvent[] = Array.from({ length: 300 }, (_, i) => ({
      seq: i + 1,
      json: JSON.stringify({ seq: i + 1, e: { text: "é".repeat(sizes[i % sizes.length]!) } }),
    }));
    assert.equal(await events.appendMany("s1", all.slice(0, 200)), 200);
    // A re-send overlapping what is stored: the stored copies win, nothing doubles.
    assert.equal(
      await events.appendMany(
        "s1",
        all.slice(150).map((e) => e.seq <= 200 ? { ...e, json: "{}" } : e),
      ),
      100,
    );
    assert.equal(await events.maxSeq("s1"), 300);
    assert.deepEqual(await readAll(s.store, "s1", 0, 64), all);
    assert.deepEqual(await events.after("s1", 0, 1000), all, "one read past many chunks");
    assert.deepEqual(await events.after("s2", 0, 10), [], "another session's log is its own");
  },

  "events: gaps, multi-line JSON and every starting point and page size": async (s) => {
    const { events } = s.store;
    assert.equal(await events.appendMany("s1", [ev(1), ev(2), ev(3), ev(6), ev(7)]), 5);
    const pretty = { seq: 8, json: JSON.stringify({ seq: 8, e: { text: "a\nb" } }, null, 2) };
    assert.equal(await events.appendMany("s1", [pretty, ev(9)]), 2);
    const run = Array.from({ length: 300 }, (_, i) => ev(10 + i, "y".repeat(i)));
    assert.equal(await events.appendMany("s1", run), 300);
    assert.equal(await events.append("s1", 309, "{}"), false, "a stored seq is not stored again");
    assert.equal(await events.append("s1", 5, "{}"), false, "nor one below the last");
    assert.equal(await events.append("s1", 310, ev(310).json), true);
    const all = [ev(1), ev(2), ev(3), ev(6), ev(7), pretty, ev(9), ...run, ev(310)];
    for (const limit of [1, 7, 64]) {
      // One event a page from the start would be 300 round trips on PostgreSQL: a few starts do.
      for (const since of limit === 1 ? [7, 150, 309] : [0, 4, 7, 8, 9, 150, 309, 310]) {
        assert.deepEqual(
          await readAll(s.store, "s1", since, limit),
          all.filter((e) => e.seq > since),
          `since ${since}, pages of ${limit}`,
        );
      }
    }
  },

  "events: a read stops at maxBytes but always returns a first event": async (s) => {
    const { events } = s.store;
    const sizes = [100, 100, 100, 5000, 100, 100];
    await events.appendMany("s1", sizes.map((n, i) => ({ seq: i + 1, json: "x".repeat(n) })));
    const seqs = async (after: number, limit: number, maxBytes: number) =>
      (await events.after("s1", after, limit, maxBytes)).map((e) => e.seq);
    assert.deepEqual(await seqs(0, 10, 250), [1, 2]);
    assert.deepEqual(await seqs(0, 10, 300), [1, 2, 3]);
    assert.deepEqual(await seqs(3, 10, 250), [4], "one bigger event alone");
    assert.deepEqual(await seqs(2, 10, 1000), [3]);
    assert.deepEqual(await seqs(0, 2, Infinity), [1, 2]);
    assert.deepEqual(await seqs(4, 10, 1e6), [5, 6]);
    assert.deepEqual(await events.after("s1", 0, 0), []);
  },

  "events: a log is deleted a few chunks at a time, oldest first": async (s) => {
    const { events } = s.store;
    for (let i = 0; i < 5; i++) await events.appendMany("s1", [ev(2 * i + 1), ev(2 * i + 2)]);
    await events.append("s2", 1, "{}");
    assert.equal(await events.deleteSome("s1", 2), 2);
    assert.deepEqual((await events.after("s1", 0, 100)).map((e) => e.seq), [5, 6, 7, 8, 9, 10]);
    assert.equal(await events.maxSeq("s1"), 10);
    await events.deleteSession("s1");
    assert.equal(await events.maxSeq("s1"), 0);
    assert.equal(await events.deleteSome("s1", 5), 0);
    assert.equal(await events.maxSeq("s2"), 1, "another session's log stays");
  },

  "settings: a fallback until set, then the stored JSON": async (s) => {
    const { settings } = s.store;
    assert.deepEqual(await settings.get("u1", "theme", { dark: false }), { dark: false });
    await settings.set("u1", "theme", { dark: true });
    await settings.set("u1", "theme", { dark: true, size: 2 });
    await settings.set("u2", "theme", "plain");
    assert.deepEqual(await settings.get("u1", "theme", null), { dark: true, size: 2 });
    assert.equal(await settings.get("u2", "theme", ""), "plain");
    assert.equal(await settings.get("u1", "other", 7), 7);
    // The first value wins; a later one is refused and changes nothing.
    assert.equal(await settings.setIfAbsent("", "relay.k", "first"), true);
    assert.equal(await settings.setIfAbsent("", "relay.k", "second"), false);
    assert.equal(await settings.get("", "relay.k", null), "first");
  },

  "triggers: subscriptions and listeners keep the order they were added in": async (s) => {
    const { triggers } = s.store;
    const at = "2026-01-01T00:00:00.000Z";
    const subOf = (id: string, sessionId = "s1", type = "git") => ({
      subscriptionId: id,
      sessionId,
      userId: "u1",
      runnerId: "r1",
      triggerType: type,
      params: { id },
      filters: [],
      filterMode: "and" as const,
      createdAt: at,
    });
    // Ids out of order, one creation time: the order added is what counts.
    for (const id of ["sc", "sa", "sb"]) await triggers.saveSubscription(subOf(id));
    await triggers.saveSubscription(subOf("sx", "s2", "timer"));
    await triggers.saveSubscription({ ...subOf("sc"), filterMode: "or" });
    const of = await triggers.subscriptionsOf("s1");
    assert.deepEqual(
      of.map((x) => x.subscriptionId),
      ["sc", "sa", "sb"],
      "an update keeps its place",
    );
    assert.equal(of[0]!.filterMode, "or");
    assert.deepEqual(of[1], subOf("sa"));
    assert.deepEqual((await triggers.subscriptionsFor("r1", "timer")).map((x) => x.sessionId), [
      "s2",
    ]);
    assert.equal(await triggers.deleteSubscriptions("s2", ["sa", "sb"]), 0, "another session's");
    assert.equal(await triggers.deleteSubscriptions("s1", ["sa", "sb", "nope"]), 2);
    await triggers.deleteSubscriptionsOfSession("s1");
    assert.deepEqual(await triggers.subscriptionsOf("s1"), []);
    assert.equal((await triggers.subscriptionsOf("s2")).length, 1);

    const listenerOf = (id: string, type = "git") => ({
      listenerId: id,
      userId: "u1",
      runnerId: "r1",
      triggerType: type,
      prompt: `on ${id}`,
      cwd: null,
      model: { provider: "p", id: "m" },
      params: {},
      createdAt: at,
      updatedAt: at,
    });
    for (const id of ["lc", "la"]) await triggers.saveListener(listenerOf(id));
    await triggers.saveListener(listenerOf("lb", "timer"));
    await triggers.saveListener({ ...listenerOf("lc"), prompt: "changed", updatedAt: "2027" });
    assert.deepEqual((await triggers.listenersOf("r1")).map((l) => l.listenerId), [
      "lc",
      "la",
      "lb",
    ]);
    assert.deepEqual(await triggers.listenersOf("r1", "timer"), [listenerOf("lb", "timer")]);
    assert.equal((await triggers.listenersOf("r1", "git"))[0]!.prompt, "changed");
    assert.equal(await triggers.deleteListeners("r2", ["la"]), 0, "another runner's");
    assert.equal(await triggers.deleteListeners("r1", ["la", "lb"]), 2);
    assert.deepEqual((await triggers.listenersOf("r1")).map((l) => l.listenerId), ["lc"]);
  },

  "triggers: history keeps the newest entries, their answers, and expires when idle": async (s) => {
    const { triggers } = s.store;
    const entry = (i: number, ts: string) => ({
      triggerId: `t${i}`,
      type: "git",
      source: "runner",
      payload: { i },
      deliverAs: "steer" as const,
      ts,
      direction: "inbound" as const,
      expectsResponse: i % 2 === 0,
    });
    for (let i = 1; i <= 205; i++) {
      await triggers.addHistory(
        "s1",
        entry(i, `2026-01-01T00:00:${String(i % 60).padStart(2, "0")}`),
      );
    }
    await triggers.addHistory("s2", { ...entry(1, "2020-01-01"), summary: "old" });
    const h = await triggers.history("s1", 1000);
    assert.equal(h.length, 200, "only the newest 200 stay");
    assert.equal(h[0]!.triggerId, "t205", "most recent first");
    assert.equal(h[199]!.triggerId, "t6");
    assert.deepEqual((await triggers.history("s1", 2)).map((e) => e.triggerId), ["t205", "t204"]);
    assert.equal(await triggers.lastActivity("s1"), "2026-01-01T00:00:59");
    assert.equal(await triggers.lastActivity("nope"), null);
    const response = { action: "ok", ts: "2026-01-02" };
    assert.equal(await triggers.setResponse("s1", "t204", response), true);
    assert.equal(await triggers.setResponse("s1", "nope", response), false);
    assert.deepEqual((await triggers.history("s1", 2))[1], { ...entry(204, h[1]!.ts), response });
    assert.deepEqual(await triggers.history("s2", 5), [{
      ...entry(1, "2020-01-01"),
      summary: "old",
    }]);
    await triggers.expireHistory("2025-01-01");
    assert.deepEqual(await triggers.history("s2", 5), [], "idle since before the cut");
    assert.equal((await triggers.history("s1", 5)).length, 5);
    await triggers.removeInbound("s1", "t205");
    await triggers.removeInbound("s1", "nope");
    assert.deepEqual(
      (await triggers.history("s1", 2)).map((e) => e.triggerId),
      ["t204", "t203"],
      "only that trigger's entry went",
    );
    await triggers.clearHistory("s1");
    assert.deepEqual(await triggers.history("s1", 5), []);
  },

  "webhooks: save, ownership, nonces and deliveries, deleted with their webhook": async (s) => {
    const { webhooks } = s.store;
    const hook = (id: string, userId = "u1", over = {}) => ({
      id,
      userId,
      name: `hook ${id}`,
      source: "github",
      secretEnc: "enc",
      runnerId: "r1",
      cwd: "/w",
      prompt: "go",
      model: null,
      eventFilter: ["push"],
      filters: [],
      filterMode: "and" as const,
      enabled: true,
      requireReplayProtection: true,
      createdAt: `2026-01-0${id.length}T00:00:00.000Z`,
      updatedAt: "2026-01-01T00:00:00.000Z",
      ...over,
    });
    await webhooks.save(hook("w"));
    await webhooks.save(hook("ww"));
    await webhooks.save(hook("www", "u2"));
    assert.deepEqual(await webhooks.get("w"), hook("w"));
    assert.equal(await webhooks.getOwned("u1", "www"), undefined, "foreign looks missing");
    assert.deepEqual((await webhooks.listForUser("u1")).map((w) => w.id), ["ww", "w"]);
    await webhooks.save(hook("w", "u1", { enabled: false, name: "renamed", secretEnc: "other" }));
    const saved = (await webhooks.get("w"))!;
    assert.deepEqual([saved.enabled, saved.name, saved.secretEnc], [false, "renamed", "enc"]);

    const big = Date.UTC(2026, 0, 1); // epoch ms outgrow 32 bits
    assert.equal(await webhooks.nonceUsedUntil("w", "n1"), 0);
    assert.equal(await webhooks.claimNonce("w", "n1", big + 1000, big), true);
    assert.equal(await webhooks.claimNonce("w", "n2", big + 10, big), true);
    assert.equal(await webhooks.claimNonce("w", "n1", big + 2000, big + 500), false, "in use");
    assert.equal(await webhooks.nonceUsedUntil("w", "n1"), big + 1000, "kept its first time");
    assert.equal(
      await webhooks.claimNonce("ww", "n1", big + 2000, big + 500),
      true,
      "another's own",
    );
    assert.equal(await webhooks.claimNonce("ww", "n1", big + 9000, big + 2000), true, "time up");
    assert.equal(await webhooks.nonceUsedUntil("ww", "n1"), big + 9000, "claimed for the new time");
    await webhooks.releaseNonce("ww", "n1", big + 2000);
    assert.equal(await webhooks.nonceUsedUntil("ww", "n1"), big + 9000, "a later holder's stays");
    await webhooks.releaseNonce("ww", "n1", big + 9000);
    assert.equal(await webhooks.nonceUsedUntil("ww", "n1"), 0, "its holder gives it back");
    await webhooks.releaseNonce("w", "n1");
    assert.equal(await webhooks.nonceUsedUntil("w", "n1"), 0, "given back");
    assert.equal(await webhooks.claimNonce("w", "n1", big + 1000, big), true, "claimed again");
    const racing = await Promise.all(
      [1, 2, 3, 4].map(() => webhooks.claimNonce("w", "n3", big + 1000, big)),
    );
    assert.equal(racing.filter(Boolean).length, 1, "one of four claims at once wins");
    await webhooks.pruneNonces(big + 10);
    assert.equal(await webhooks.nonceUsedUntil("w", "n2"), 0, "its time is up");
    assert.equal(await webhooks.nonceUsedUntil("w", "n1"), big + 1000);

    await webhooks.recordDelivery("w", "d1", "t1", null, big);
    assert.deepEqual(await webhooks.delivery("w", "d1", big - 1), {
      triggerId: "t1",
      sessionId: null,
    });
    assert.equal(await webhooks.delivery("w", "d1", big), undefined, "older than asked");
    await webhooks.recordDelivery("w", "d1", "t2", "s1", big + 5);
    assert.deepEqual(await webhooks.delivery("w", "d1", big), { triggerId: "t2", sessionId: "s1" });
    await webhooks.recordDelivery("ww", "d1", "t3", null, big);
    await webhooks.pruneDeliveries(big + 1);
    assert.equal(await webhooks.delivery("ww", "d1", 0), undefined);
    assert.ok(await webhooks.delivery("w", "d1", 0));

    assert.equal(await webhooks.delete("u2", "w"), false, "not theirs");
    assert.ok(await webhooks.get("w"));
    assert.equal(await webhooks.delete("u1", "w"), true);
    assert.equal(await webhooks.get("w"), undefined);
    assert.equal(await webhooks.nonceUsedUntil("w", "n1"), 0, "its nonces went with it");
    assert.equal(await webhooks.delivery("w", "d1", 0), undefined, "and its deliveries");
  },

  "attachments: read through their session, counted, swept when dead": async (s) => {
    const { attachments, sessions } = s.store;
    await sessions.insert(session("s1", { runnerId: "r9" }));
    await sessions.insert(session("s2"));
    const att = (id: string, over = {}) => ({
      attachmentId: id,
      sessionId: "s1",
      userId: "u1",
      sha256: `sha-${id}`,
      filename: `${id}.txt`,
      mimeType: "text/plain",
      size: 3_000_000_000, // past 32 bits
      createdAt: "2026-01-01T00:00:00.000Z",
      expiresAt: "2026-02-01T00:00:00.000Z",
      ...over,
    });
    await attachments.insert(att("a"));
    await attachments.insert(att("b", { expiresAt: "2026-01-10T00:00:00.000Z", size: 5 }));
    await attachments.insert(att("c", { sessionId: "s2", sha256: "sha-a", size: 7 }));
    await attachments.insert(att("d", { sessionId: "gone", size: 11 }));
    const now = "2026-01-05T00:00:00.000Z";
    assert.deepEqual(await attachments.get("a", now), { ...att("a"), runnerId: "r9" });
    assert.equal(await attachments.get("d", now), undefined, "its session is gone");
    assert.equal(await attachments.get("b", "2026-01-11T00:00:00.000Z"), undefined, "expired");
    assert.equal(await attachments.userBytes("u1", now), 3_000_000_000 + 5 + 7 + 11);
    await sessions.update("s2", { status: "ended" }, now);
    assert.ok(await attachments.get("c", now));
    assert.equal(
      await attachments.deleteDead("2026-01-11T00:00:00.000Z"),
      2,
      "b expired, d orphaned",
    );
    assert.equal(await attachments.referenced("sha-b"), false);
    assert.equal(await attachments.referenced("sha-a"), true);
    await attachments.deleteDead("2027-01-01T00:00:00.000Z");
    assert.equal(await attachments.referenced("sha-a"), false);
  },

  "push: one subscription per endpoint, owned by whoever saved it last": async (s) => {
    const { push } = s.store;
    const sub = (id: string, endpoint: string, userId = "u1", over = {}) => ({
      id,
      userId,
      endpoint,
      p256dh: "key",
      auth: "auth",
      enabledEvents: "*",
      suppressChildNotifications: false,
      createdAt: `2026-01-0${id.length}T00:00:00.000Z`,
      ...over,
    });
    await push.save(sub("pp", "https://push/2"));
    await push.save(sub("p", "https://push/1", "u1", { suppressChildNotifications: true }));
    await push.save(sub("ppp", "https://push/3", "u2"));
    assert.deepEqual((await push.listOf("u1")).map((x) => x.id), ["p", "pp"]);
    assert.equal(await push.countOf("u1"), 2);
    assert.deepEqual(
      await push.byEndpoint("https://push/1"),
      sub("p", "https://push/1", "u1", { suppressChildNotifications: true }),
    );
    assert.equal(await push.byEndpoint("https://push/none"), null);
    await push.save(sub("pp", "https://push/2", "u2", { enabledEvents: "done" }));
    assert.equal(await push.countOf("u1"), 1);
    assert.equal((await push.byEndpoint("https://push/2"))!.enabledEvents, "done");
    await assert.rejects(push.save(sub("other", "https://push/1")), /UNIQUE constraint failed/);
    assert.equal(await push.deleteOf("u1", "https://push/3"), false, "not theirs");
    assert.equal(await push.deleteOf("u2", "https://push/3"), true);
    await push.delete("p");
    assert.equal(await push.countOf("u1"), 0);
  },

  "retention: what may go, sizes per user, deletions remembered until finished": async (s) => {
    const { retention, sessions, triggers, attachments } = s.store;
    const ended = async (id: string, userId: string, endedAt: string, bytes: number, over = {}) => {
      await sessions.insert(session(id, { userId, status: "ended", endedAt, ...over }));
      await sessions.setLastSeq(id, 1, bytes);
    };
    await ended("old", "u1", "2026-01-01T00:00:00.000Z", 100);
    await ended("older", "u2", "2025-01-01T00:00:00.000Z", 4_000_000_000);
    await ended("pinned", "u1", "2024-01-01T00:00:00.000Z", 50, { isPinned: true });
    await ended("errored", "u1", "2026-06-01T00:00:00.000Z", 1, { status: "error" });
    await sessions.insert(session("live", { userId: "u1" }));
    await sessions.setLastSeq("live", 1, 7);
    assert.deepEqual(await retention.endedBefore("2026-02-01"), [
      { sessionId: "older", userId: "u2", eventBytes: 4_000_000_000 },
      { sessionId: "old", userId: "u1", eventBytes: 100 },
    ]);
    assert.deepEqual((await retention.oldestDeletable()).map((d) => d.sessionId), [
      "older",
      "old",
      "errored",
    ]);
    assert.deepEqual((await retention.oldestDeletable("u1")).map((d) => d.sessionId), [
      "old",
      "errored",
    ]);
    assert.deepEqual(await retention.usersOver(1000), [{
      userId: "u2",
      eventBytes: 4_000_000_000,
    }]);
    assert.equal(await retention.totalBytes(), 4_000_000_000 + 100 + 50 + 1 + 7);

    await triggers.addHistory("old", {
      triggerId: "t",
      type: "git",
      source: "x",
      payload: {},
      deliverAs: "steer",
      ts: "2026",
      direction: "inbound",
      expectsResponse: false,
    });
    await attachments.insert({
      attachmentId: "att",
      sessionId: "old",
      userId: "u1",
      sha256: "sha",
      filename: "f",
      mimeType: "text/plain",
      size: 1,
      createdAt: "2026",
      expiresAt: "2099",
    });
    await retention.beginDeletion("old", "u1", "2026-07-01T00:00:00.000Z");
    await retention.beginDeletion("old", "u1", "2026-07-01T00:00:01.000Z");
    await retention.beginDeletion("older", "u2", "2026-07-02T00:00:00.000Z");
    assert.equal(await sessions.get("old"), undefined);
    assert.deepEqual(await triggers.history("old", 10), []);
    assert.equal(await attachments.referenced("sha"), false);
    assert.deepEqual(await retention.pendingDeletions(), ["old", "older"]);
    await retention.finishDeletion("old");
    assert.deepEqual(await retention.pendingDeletions(), ["older"]);
  },

  "push subscribe: new, again, moved with its keys, taken without them, the cap": async (s) => {
    const { push } = s.store;
    const sub = (over: Record<string, unknown> = {}) => ({
      id: crypto.randomUUID(),
      userId: "u1",
      endpoint: "https://push.example.com/a",
      p256dh: "k1",
      auth: "a1",
      createdAt: "2030-01-01T00:00:00.000Z",
      ...over,
    });
    const first = await push.subscribe(sub({ enabledEvents: "agent_error" }), 2);
    assert.ok(first.ok);
    assert.deepEqual(await push.subscribe(sub({ p256dh: "k2" }), 2), first, "the same row");
    const again = await push.byEndpoint("https://push.example.com/a");
    assert.equal(again?.enabledEvents, "agent_error", "no kinds given: its own kept");
    assert.equal(again?.p256dh, "k2", "its new keys");
    assert.deepEqual(await push.subscribe(sub({ userId: "u2" }), 2), {
      ok: false,
      reason: "taken",
    });
    assert.deepEqual(await push.subscribe(sub({ userId: "u2", p256dh: "k2" }), 2), first, "moved");
    const moved = await push.byEndpoint("https://push.example.com/a");
    assert.equal(moved?.userId, "u2");
    assert.equal(moved?.enabledEvents, "*", "the new owner's kinds start at all");
    await push.subscribe(sub({ userId: "u2", endpoint: "https://push.example.com/b" }), 2);
    assert.deepEqual(
      await push.subscribe(sub({ userId: "u2", endpoint: "https://push.example.com/c" }), 2),
      { ok: false, reason: "full" },
    );
    assert.ok(
      (await push.subscribe(sub({ userId: "u2", p256dh: "k2" }), 2)).ok,
      "updating one of the user's own is not a new one",
    );
    // Racing for the last place: of three new endpoints at once, none passes the cap.
    await push.delete((await push.byEndpoint("https://push.example.com/b"))!.id);
    const racing = await Promise.all(
      ["d", "e", "f"].map((x) =>
        push.subscribe(sub({ userId: "u2", endpoint: `https://push.example.com/${x}` }), 2)
      ),
    );
    assert.equal(racing.filter((r) => r.ok).length, 1);
    assert.equal(await push.countOf("u2"), 2);
  },

  "atomic steps: an upload's rows all or none; a trigger's answer and reply together": async (
    s,
  ) => {
    const { attachments, triggers } = s.store;
    const row = (id: string) => ({
      attachmentId: id,
      sessionId: "s1",
      userId: "u1",
      sha256: "0".repeat(64),
      filename: `${id}.txt`,
      mimeType: "text/plain",
      size: 10,
      createdAt: "2030-01-01T00:00:00.000Z",
      expiresAt: "2030-01-02T00:00:00.000Z",
    });
    await s.store.sessions.insert(session("s1"));
    await assert.rejects(attachments.insertAll([row("a"), row("b"), row("a")]));
    assert.equal(await attachments.userBytes("u1", "2030-01-01T00:00:00.000Z"), 0);
    await attachments.insertAll([row("a"), row("b")]);
    assert.equal(await attachments.userBytes("u1", "2030-01-01T00:00:00.000Z"), 20);

    const base = {
      type: "ci:done",
      source: "ci",
      payload: {},
      deliverAs: "steer" as const,
      expectsResponse: true,
    };
    await triggers.addHistory("s1", {
      ...base,
      triggerId: "t1",
      ts: "2030-01-01T00:00:00.000Z",
      direction: "inbound",
    });
    const response = { action: "ok", ts: "2030-01-01T00:01:00.000Z" };
    await triggers.respond("s1", "t1", response, {
      ...base,
      triggerId: "t2",
      expectsResponse: false,
      ts: response.ts,
      direction: "outbound",
    });
    const [reply, inbound] = await triggers.history("s1", 10);
    assert.equal(reply?.triggerId, "t2");
    assert.equal(reply?.direction, "outbound");
    assert.deepEqual(inbound?.response, response);
  },

  "rate limits: a window's hits up to the limit, then refused until it ends; swept when ended":
    async (s) => {
      const { rateLimits } = s.store;
      const hits = [];
      for (let i = 0; i < 4; i++) hits.push(await rateLimits.hit("a", 3, 1000, 1000 + i));
      assert.deepEqual(hits, [
        { allowed: true, resetsAt: 2000 },
        { allowed: true, resetsAt: 2000 },
        { allowed: true, resetsAt: 2000 },
        { allowed: false, resetsAt: 2000 },
      ], "the window starts at the first hit");
      assert.deepEqual(await rateLimits.hit("a", 3, 1000, 1999), {
        allowed: false,
        resetsAt: 2000,
      });
      assert.deepEqual(await rateLimits.hit("b", 3, 1000, 1500), { allowed: true, resetsAt: 2500 });
      // The window ended: a new one starts with this hit, with its whole limit.
      assert.deepEqual(await rateLimits.hit("a", 3, 1000, 2000), { allowed: true, resetsAt: 3000 });
      assert.equal((await rateLimits.hit("a", 3, 1000, 2001)).allowed, true);
      assert.equal((await rateLimits.hit("a", 3, 1000, 2002)).allowed, true);
      assert.equal((await rateLimits.hit("a", 3, 1000, 2003)).allowed, false);
      // A refused hit does not count: a raised limit lets the next one through.
      assert.equal((await rateLimits.hit("a", 4, 1000, 2004)).allowed, true);
      await assert.rejects(rateLimits.hit("a", 0, 1000, 2005), RangeError);
      assert.equal(await rateLimits.sweep(2499), 0);
      assert.equal(await rateLimits.sweep(2500), 1, "b's window ended");
      const rows = await s.exec("SELECT key, hits FROM rate_limits");
      assert.deepEqual(rows.map((r) => [r.key, Number(r.hits)]), [["a", 4]]);
    },

  "tunnel grants: by hash, the least recently used beyond a user's bound go, touched, swept":
    async (s) => {
      const { tunnelGrants } = s.store;
      const grant = (hash: string, at: number, userId = "u1") => ({
        hash,
        userId,
        runnerId: "r1",
        port: 5173,
        authSessionId: userId === "u1" ? "bs1" : null,
        createdAt: at,
        lastUsed: at,
        expiresAt: at + 1000,
      });
      for (const [i, h] of ["g1", "g2", "g3"].entries()) await tunnelGrants.insert(grant(h, i), 2);
      await tunnelGrants.insert(grant("other", 0, "u2"), 2);
      assert.equal(await tunnelGrants.get("g1"), null, "u1 holds 2: the oldest went");
      assert.deepEqual(await tunnelGrants.get("g3"), grant("g3", 2));
      assert.deepEqual(await tunnelGrants.get("other"), grant("other", 0, "u2"));
      assert.equal(await tunnelGrants.count(), 3);
      // A use moves a grant up: the next insert evicts the other one.
      await tunnelGrants.touch("g2", { lastUsed: 10, expiresAt: 1010 });
      assert.deepEqual(await tunnelGrants.get("g2"), {
        ...grant("g2", 1),
        lastUsed: 10,
        expiresAt: 1010,
      });
      await tunnelGrants.insert(grant("g4", 5), 2);
      assert.deepEqual(
        (await Promise.all(["g2", "g3", "g4"].map((h) => tunnelGrants.get(h))))
          .map((g) => g?.hash ?? null),
        ["g2", null, "g4"],
      );
      await assert.rejects(tunnelGrants.insert(grant("g5", 6), 0), RangeError);
      await assert.rejects(tunnelGrants.insert(grant("g4", 6), 9), /UNIQUE constraint failed/);
      assert.equal(await tunnelGrants.delete("g4"), true);
      assert.equal(await tunnelGrants.delete("g4"), false);
      // Swept once expired (strictly before now): "other" ends at 1000, g2 at 1010.
      assert.equal(await tunnelGrants.sweep(1000), 0);
      assert.equal(await tunnelGrants.sweep(1001), 1);
      assert.deepEqual((await s.exec("SELECT hash FROM tunnel_grants")).map((r) => r.hash), ["g2"]);
    },

  "tunnel tickets: spent once, by one of many spending at once; bounded per user; swept": async (
    s,
  ) => {
    const { tunnelGrants } = s.store;
    const ticket = (hash: string, expiresAt: number, userId = "u1") => ({
      hash,
      userId,
      sealed: `sealed ${hash}`,
      expiresAt,
    });
    await tunnelGrants.insertTicket(ticket("t1", 100), 3);
    assert.deepEqual(await tunnelGrants.redeemTicket("t1"), {
      sealed: "sealed t1",
      expiresAt: 100,
    });
    assert.equal(await tunnelGrants.redeemTicket("t1"), null, "spent");
    assert.equal(await tunnelGrants.redeemTicket("nope"), null);
    // Eight nodes spending one ticket at once: exactly one gets it.
    await tunnelGrants.insertTicket(ticket("t2", 100), 3);
    const spent = await Promise.all(
      Array.from({ length: 8 }, () => tunnelGrants.redeemTicket("t2")),
    );
    assert.deepEqual(spent.filter((t) => t !== null), [{ sealed: "sealed t2", expiresAt: 100 }]);
    // A user's tickets beyond the bound: the soonest to expire go; others' stay.
    await tunnelGrants.insertTicket(ticket("x", 50, "u2"), 3);
    for (const [i, h] of ["a", "b", "c", "d"].entries()) {
      await tunnelGrants.insertTicket(ticket(h, 100 + i), 3);
    }
    const held = async () =>
      (await s.exec("SELECT hash FROM tunnel_tickets ORDER BY hash")).map((r) => r.hash);
    assert.deepEqual(await held(), ["b", "c", "d", "x"]);
    assert.equal(await tunnelGrants.sweep(101), 1, "x expired at 50");
    assert.equal(await tunnelGrants.sweep(104), 3);
    assert.deepEqual(await held(), []);
  },

  "preview grants across two nodes: made on one, checked on the other, a ticket spent once": async (
    s,
  ) => {
    const a = new TunnelGrants(s.store.tunnelGrants);
    const b = new TunnelGrants(s.store.tunnelGrants);
    const g = { userId: "u1", runnerId: "r1", port: 8080, authSessionId: "bs1" };
    const token = await a.mint(g);
    assert.deepEqual(await b.check(token), g);
    assert.equal(await b.check(token.replace(/^./, (c) => c === "A" ? "B" : "A")), null);
    // Both nodes spend one ticket at once (a replayed handoff): one wins.
    const ticket = await a.ticket(token, "/next");
    const spent = await Promise.all([a.redeem(ticket), b.redeem(ticket), b.redeem(ticket)]);
    assert.deepEqual(spent.filter((t) => t !== null), [{ grant: token, next: "/next" }]);
    await b.revoke(token);
    assert.equal(await b.check(token), null);
    assert.equal(await s.store.tunnelGrants.count(), 0);
  },

  "the event committer: one transaction per batch, re-sends skipped, state with it": async (s) => {
    const { sessions, events } = s.store;
    await sessions.insert(session("a"));
    await sessions.insert(session("b"));
    const at = "2026-01-03T00:00:00.000Z";
    await s.commit([
      { sessionId: "a", events: [ev(1), ev(2)], lastSeq: 2, eventBytes: 40, patch: null, at },
      {
        sessionId: "b",
        events: [ev(1)],
        lastSeq: 1,
        eventBytes: 20,
        patch: { activity: "working" },
        at,
      },
    ]);
    assert.equal(await events.maxSeq("a"), 2);
    assert.equal((await sessions.get("a"))!.lastSeq, 0, "no state change: the row waits");
    const b = (await sessions.get("b"))!;
    assert.deepEqual([b.activity, b.lastSeq, b.eventBytes, b.updatedAt], ["working", 1, 20, at]);
    // A re-send of 1–2 with 3 new: only 3 is stored, the stored copies win.
    await s.commit([{
      sessionId: "a",
      events: [{ seq: 1, json: "{}" }, { seq: 2, json: "{}" }, ev(3)],
      lastSeq: 3,
      eventBytes: 60,
      patch: { status: "ended" },
      at,
    }]);
    assert.deepEqual(await events.after("a", 0, 10), [ev(1), ev(2), ev(3)]);
    assert.deepEqual([(await sessions.get("a"))!.status, (await sessions.get("a"))!.lastSeq], [
      "ended",
      3,
    ]);
    // A batch that fails part way stores none of it.
    await assert.rejects(s.commit([
      { sessionId: "a", events: [ev(4)], lastSeq: 4, eventBytes: 80, patch: null, at },
      { sessionId: "b", events: [ev(3), ev(2)], lastSeq: 3, eventBytes: 0, patch: null, at },
    ]));
    assert.equal(await events.maxSeq("a"), 3, "the batch's first commit was rolled back");
  },
};

Deno.test("the store behaves alike on SQLite and PostgreSQL", async (t) => {
  const server = HAS_PG ? await startPostgres() : null;
  try {
    const dialects: [Dialect, () => Promise<Subject>][] = [["sqlite", sqliteSubject]];
    if (server) dialects.push(["postgres", () => pgSubject(server)]);
    for (const [dialect, open] of dialects) {
      for (const [name, behaviour] of Object.entries(BEHAVIOURS)) {
        await t.step(`${dialect}: ${name}`, async () => {
          const subject = await open();
          try {
            assert.equal(subject.store.dialect, dialect);
            await behaviour(subject, dialect);
          } finally {
            await subject.close();
          }
        });
      }
    }
    if (!server) return;

    await t.step("the PostgreSQL schema keeps step with SQLite's", async () => {
      const lite = await sqliteSubject();
      const pg = await pgSubject(server);
      try {
        const versions = async (s: Subject) =>
          (await s.exec("SELECT version, name FROM baton_migrations ORDER BY version")).map((r) =>
            `${r.version} ${r.name}`
          );
        assert.deepEqual(await versions(pg), await versions(lite), "same versions and names");
        assert.deepEqual(
          PG_MIGRATIONS.map((m) => `${m.version} ${m.name}`),
          await versions(lite),
        );
        assert.deepEqual(await pgColumns(pg), await sqliteColumns(lite));
        // The check sees a drift: a column one dialect has and the other lacks.
        await pg.exec("ALTER TABLE sessions ADD COLUMN drift TEXT");
        assert.notDeepEqual(await pgColumns(pg), await sqliteColumns(lite));
      } finally {
        await lite.close();
        await pg.close();
      }
    });

    await t.step("better-auth finds every table and column it needs on PostgreSQL", async () => {
      const pg = (await pgSubject(server)).store as PgStore;
      try {
        const config = authConfig(authOptions(pg));
        const { toBeCreated, toBeAdded } = await getMigrations(config);
        assert.deepEqual({ toBeCreated, toBeAdded }, { toBeCreated: [], toBeAdded: [] });
      } finally {
        await pg.close();
      }
    });

    await t.step(
      "better-auth signs up and in on PostgreSQL, and the store reads its rows",
      async () => {
        const pg = (await pgSubject(server)).store as PgStore;
        try {
          const auth = await startBetterAuth(authOptions(pg));
          const email = "Someone@Example.com";
          await auth.api.signUpEmail({ body: { email, password: "a long password", name: "S" } });
          const res = await auth.api.signInEmail({
            body: { email, password: "a long password" },
            returnHeaders: true,
          });
          const id = await pg.accounts.idByEmail(email);
          assert.ok(id, "the account is found by its email, lowercased");
          assert.equal(await pg.accounts.count(), 1);
          assert.deepEqual(await pg.accounts.byId(id), {
            id,
            email: email.toLowerCase(),
            name: "S",
          });
          const [row] = (await pg.pool.query({
            text: 'SELECT id FROM "session" WHERE "userId" = $1',
            values: [id],
          })).rows;
          const expiry = await pg.accounts.browserSessionExpiry(String(row!.id));
          assert.ok(expiry! > Date.now() + 29 * 86_400_000, "a browser session of 30 days");
          assert.ok(res.headers.get("set-cookie")?.includes("baton.session_token"));
        } finally {
          await pg.close();
        }
      },
    );

    await t.step("the relay opens PostgreSQL for a URL and SQLite in its folder", async () => {
      const dir = await Deno.makeTempDir({ prefix: "baton-conformance-" });
      const pg = await openRelayStore({ dataDir: dir, databaseUrl: await server.createDatabase() });
      const lite = await openRelayStore({ dataDir: dir });
      try {
        assert.equal(pg.store.dialect, "postgres");
        assert.equal(lite.store.dialect, "sqlite");
        for (const { store, commit } of [pg, lite]) {
          await commit([{
            sessionId: "s",
            events: [ev(1)],
            lastSeq: 1,
            eventBytes: 0,
            patch: null,
            at: "",
          }]);
          assert.deepEqual(await store.events.after("s", 0, 10), [ev(1)]);
        }
      } finally {
        await pg.close();
        await lite.close();
        await Deno.remove(dir, { recursive: true });
      }
    });

    await t.step(
      "a PostgreSQL restart loses no committed event, and the pool reconnects",
      async () => {
        const pg = (await pgSubject(server)).store as PgStore;
        try {
          await pg.sessions.insert(session("s"));
          await pg.commit([{
            sessionId: "s",
            events: [ev(1), ev(2)],
            lastSeq: 2,
            eventBytes: 0,
            patch: null,
            at: "",
          }]);
          // Every pooled connection is open, then the server goes away under them.
          await Promise.all([1, 2, 3, 4].map(() => pg.settings.get("u", "k", 0)));
          await server.stopServer();
          await server.startServer();
          assert.deepEqual(await pg.events.after("s", 0, 10), [ev(1), ev(2)]);
          await pg.commit([{
            sessionId: "s",
            events: [ev(3)],
            lastSeq: 3,
            eventBytes: 0,
            patch: null,
            at: "",
          }]);
          assert.equal(await pg.events.maxSeq("s"), 3);
        } finally {
          await pg.close();
        }
      },
    );

    await t.step(
      "two nodes appending one session's events at once store each seq once",
      async () => {
        // After a runner moves to another node, the old one may still be committing
        // the same events, cut into other chunks: the log must not hold a seq twice.
        const url = await server.createDatabase(undefined, { template: "baton_template" });
        const [a, b] = await Promise.all([openPgStore(url), openPgStore(url)]);
        try {
          const small = (seq: number) => ({ seq, json: JSON.stringify({ seq, t: "x" }) });
          const big = (seq: number) => ({
            seq,
            json: JSON.stringify({ seq, t: "y".repeat(40_000) }),
          });
          for (let round = 0; round < 20; round++) {
            const sid = `s${round}`;
            const seqs = [1, 2, 3, 4, 5, 6];
            // One node commits all six in one chunk, the other in three (their sizes differ).
            await Promise.all([
              a.commit([{
                sessionId: sid,
                events: seqs.map(small),
                lastSeq: 6,
                eventBytes: 0,
                patch: null,
                at: "",
              }]),
              b.events.appendMany(sid, seqs.map(big)),
            ]);
            const got = (await a.events.after(sid, 0, 100)).map((e) => e.seq);
            assert.deepEqual(got, seqs, `round ${round}`);
          }
          // Batches naming the same sessions in other orders wait for each other, never in a circle.
          const commitOf = (sid: string, seq: number) => ({
            sessionId: sid,
            events: [small(seq)],
            lastSeq: seq,
            eventBytes: 0,
            patch: null,
            at: "",
          });
          for (let seq = 1; seq <= 20; seq++) {
            await Promise.all([
              a.commit([commitOf("x", seq), commitOf("y", seq)]),
              b.commit([commitOf("y", seq), commitOf("x", seq)]),
            ]);
          }
          assert.equal(await a.events.maxSeq("x"), 20);
          assert.equal((await b.events.after("y", 0, 100)).length, 20);
        } finally {
          await a.close();
          await b.close();
        }
      },
    );

    await t.step("two nodes hitting one key at once pass exactly its limit", async () => {
      const url = await server.createDatabase(undefined, { template: "baton_template" });
      const [a, b] = await Promise.all([openPgStore(url), openPgStore(url)]);
      try {
        const now = Date.now();
        for (const round of [1, 2, 3]) {
          const hits = await Promise.all(
            Array.from(
              { length: 60 },
              (_, i) => (i % 2 ? a : b).rateLimits.hit(`k${round}`, 25, 60_000, now + i),
            ),
          );
          assert.equal(hits.filter((h) => h.allowed).length, 25, `round ${round}`);
          assert.ok(hits.every((h) => h.resetsAt === hits[0]!.resetsAt), "one window");
        }
      } finally {
        await a.close();
        await b.close();
      }
    });

    await t.step(
      "a PostgreSQL that cannot be reached is named in the error, without its password",
      async () => {
        const port = server.port;
        await server.stopServer();
        try {
          await assert.rejects(
            openPgStore(`postgres://baton:s3cret@127.0.0.1:${port}/nowhere`),
            (err: Error) => {
              assert.match(
                err.message,
                new RegExp(
                  `^PostgreSQL at postgres://baton:\\*\\*\\*@127\\.0\\.0\\.1:${port}/nowhere: `,
                ),
              );
              assert.doesNotMatch(err.message, /s3cret/);
              return true;
            },
          );
        } finally {
          await server.startServer();
        }
      },
    );

    await t.step("two nodes starting at once migrate the database once", async () => {
      const url = await server.createDatabase();
      const [a, b] = await Promise.all([openPgStore(url), openPgStore(url)]);
      try {
        const rows = await pgWrap(a).exec("SELECT COUNT(*) AS n FROM baton_migrations");
        assert.equal(rows[0]!.n, PG_MIGRATIONS.length);
        await b.settings.set("u", "k", 1);
        assert.equal(await a.settings.get("u", "k", 0), 1, "one database, two pools");
      } finally {
        await a.close();
        await b.close();
      }
    });
  } finally {
    await server?.stop();
  }
});

/** The relay's better-auth options on a PostgreSQL store. */
function authOptions(store: PgStore): AuthConfigOptions {
  return {
    db: undefined as never,
    pgPool: store.pool,
    baseUrl: "http://127.0.0.1",
    secret: "x".repeat(32),
    trustedOrigins: [],
    clientIpHeader: "x-ip",
    signupOpen: () => Promise.resolve(true),
  };
}

/** Columns that exist on PostgreSQL only: SQLite's rowid, made explicit (see pg/migrations.ts). */
const PG_ONLY = new Set(["trigger_subscriptions.ord", "trigger_listeners.ord"]);

/** SQLite's declared type as PostgreSQL spells it. */
function mapType(table: string, column: string, type: string): string {
  const t = type.toLowerCase();
  if (t === "date") return "timestamp with time zone";
  // better-auth's flag: an integer on SQLite, a boolean on PostgreSQL.
  if (table === "user" && column === "emailVerified") return "boolean";
  if (t === "integer") return "bigint";
  return t;
}

async function sqliteColumns(s: Subject): Promise<string[]> {
  const out: string[] = [];
  const tables = await s.exec(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
  );
  for (const { name } of tables) {
    const cols = await s.exec(`SELECT * FROM pragma_table_info(?)`, name);
    for (const c of cols) {
      const notNull = c.notnull === 1 || c.pk === 1;
      out.push(
        `${name}.${c.name} ${mapType(String(name), String(c.name), String(c.type))}${
          notNull ? " not null" : ""
        }`,
      );
    }
  }
  return out.sort();
}

async function pgColumns(s: Subject): Promise<string[]> {
  const rows = await s.exec(
    `SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns
     WHERE table_schema = current_schema()`,
  );
  return rows
    .filter((r) => !PG_ONLY.has(`${r.table_name}.${r.column_name}`))
    .map((r) =>
      `${r.table_name}.${r.column_name} ${r.data_type}${r.is_nullable === "NO" ? " not null" : ""}`
    )
    .sort();
}
