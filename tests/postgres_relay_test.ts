/**
 * A relay on PostgreSQL (`BATON_DATABASE_URL` / `--store`, issue 22): the
 * whole path from a spawn through the mock model to the stored log, a crash
 * that loses no acknowledged event, a second relay node on the same
 * database that reads the same accounts, keys and sessions, a pooled
 * connection cut while idle, and a socket flooded while the store stalls.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { signIn, signUp, storedEvents } from "./harness/client.ts";
import {
  crashMidStream,
  type RelayStore,
  startRelayOn,
  type TwoNodes,
  twoNodes,
  withRunner,
} from "./harness/cluster.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import { postgresAvailable, startPostgres } from "./harness/postgres.ts";
import { eventually, within } from "./harness/wait.ts";
import { clientFrame, openRawWebSocket, writeAll } from "./harness/raw_http.ts";
import { rssOf } from "./harness/rss.ts";
import { VIEWER_WS_PATH } from "../shared/protocol.ts";
import { openPgStore } from "../relay/store/pg/mod.ts";
import pgClient from "pg";
import { baseEnv, baton, type RunnerProcess, tempDir } from "./harness/procs.ts";

const HAS_PG = postgresAvailable("the relay-on-PostgreSQL tests");

Deno.test({
  name:
    "a relay on PostgreSQL streams a session, survives SIGKILL with every acked event, and a second node reads the same data",
  ignore: !HAS_PG,
  async fn() {
    const pg = await startPostgres();
    const llm = MockLlm.start();
    let nodes: TwoNodes | undefined;
    let runner: RunnerProcess | undefined;
    try {
      nodes = await twoNodes(pg);
      const { a: relay, b: nodeB } = nodes;
      const world = await withRunner(relay, llm);
      runner = world.runner;
      const { user } = world;
      const id = await crashMidStream(relay, world, llm, {
        pieces: 80,
        killAfter: 15,
        // Nothing of the relay's data is in its folder: it is all in PostgreSQL.
        whileDown: () =>
          assert.rejects(Deno.stat(join(relay.dataDir, "relay.db")), Deno.errors.NotFound),
      });

      // The second node on the same database (its own data folder): the same
      // key, the same sessions and log, and the account signs in there.
      const onB = (path: string) =>
        fetch(`${nodeB.url}${path}`, { headers: { "x-api-key": user.apiKey } });
      const listed = await (await onB("/api/sessions")).json();
      assert.ok(listed.sessions.some((s: { sessionId: string }) => s.sessionId === id));
      const res = await onB(`/api/sessions/${id}/events?since=0&limit=5000`);
      assert.equal(res.status, 200);
      const fromB = (await res.json()).events;
      assert.deepEqual(fromB, await storedEvents(user, id));
      const cookie = await signIn(nodeB.url, user.email, user.password);
      const me = await fetch(`${nodeB.url}/api/sessions`, { headers: { cookie } });
      assert.equal(me.status, 200, "signed in on the second node");
      await me.body?.cancel();
    } finally {
      await runner?.stop();
      await nodes?.stop();
      await llm.close();
      await pg.stop();
    }
  },
});

Deno.test({
  name:
    "a node whose signing secret or push keys differ from the other nodes' stops at start, saying what to copy",
  ignore: !HAS_PG,
  async fn() {
    const pg = await startPostgres();
    try {
      const url = await pg.createDatabase() as RelayStore;
      const a = await startRelayOn(url);
      try {
        // Its own data folder, so its own new secret.
        await assert.rejects(startRelayOn(url), /keys differ.*copy the signing secret '.*secret'/s);
        // The first node's secret, but push keys of its own.
        const home = await tempDir();
        const dataDir = join(home, "relay-data");
        await Deno.mkdir(dataDir, { mode: 0o700 });
        await Deno.copyFile(join(a.dataDir, "secret"), join(dataDir, "secret"));
        await assert.rejects(startRelayOn(url, { home, dataDir }), /keys differ.*push keys/s);
        // Both shared (what twoNodes does): it starts, and the first node still serves.
        await Deno.copyFile(join(a.dataDir, "vapid.json"), join(dataDir, "vapid.json"));
        const b = await startRelayOn(url, { home, dataDir });
        await b.stop();
        assert.equal(await fetch(`${a.url}/ready`).then((r) => (r.body?.cancel(), r.status)), 200);
      } finally {
        await a.stop();
      }
    } finally {
      await pg.stop();
    }
  },
});

Deno.test("--store refuses a URL with a password (it would show in ps) and what is not PostgreSQL", async () => {
  const home = await tempDir();
  const withPassword = await baton(
    ["relay", "--port", "0", "--store", "postgres://baton:secret@127.0.0.1:5432/baton"],
    baseEnv(home),
  );
  assert.equal(withPassword.code, 2);
  assert.match(withPassword.stderr, /PGPASSWORD|BATON_DATABASE_URL/);
  assert.doesNotMatch(withPassword.stderr + withPassword.stdout, /secret/);
  const notPg = await baton(
    ["relay", "--port", "0", "--store", "mysql://127.0.0.1/x"],
    baseEnv(home),
  );
  assert.equal(notPg.code, 2);
  assert.match(notPg.stderr, /Invalid --store/);
  const envPassword = await baton(
    ["relay", "--port", "0"],
    baseEnv(home, { BATON_DATABASE_URL: "mysql://u:hunter2@host/x" }),
  );
  assert.equal(envPassword.code, 2);
  assert.match(envPassword.stderr, /Invalid BATON_DATABASE_URL/);
  assert.doesNotMatch(envPassword.stderr, /hunter2/);
});

Deno.test({
  name:
    "a pooled PostgreSQL connection cut while idle is said in the log, and the store goes on with a new one",
  ignore: !HAS_PG,
  async fn() {
    const pg = await startPostgres();
    const lines: string[] = [];
    let store: Awaited<ReturnType<typeof openPgStore>> | undefined;
    try {
      const url = await pg.createDatabase();
      store = await openPgStore(url, { log: (l) => lines.push(l) });
      // A query leaves its connection idle in the pool.
      assert.equal(await store.accounts.count(), 0);
      const admin = new pgClient.Client({ connectionString: url });
      await admin.connect();
      try {
        const { rows } = await admin.query(
          "SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity " +
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        );
        assert.ok(rows.length >= 1, "the pool's idle connection was there to cut");
      } finally {
        await admin.end();
      }
      await eventually(
        "the log line of the cut connection",
        () =>
          lines.some((l) => /^PostgreSQL: a pooled connection broke while idle: /.test(l))
            ? true
            : undefined,
      );
      // The relay did not fall over, and the store answers on a fresh connection.
      assert.equal(await store.accounts.count(), 0);
    } finally {
      await store?.close();
      await pg.stop();
    }
  },
});

Deno.test({
  name:
    "a viewer flooding its socket while the store is stalled stops being read: the relay's memory stays flat, and all is handled once the store answers",
  ignore: !HAS_PG,
  async fn() {
    const MB = 1024 * 1024;
    const pg = await startPostgres();
    const url = await pg.createDatabase();
    const relay = await startRelayOn(url as RelayStore, { args: ["--allow-signup"] });
    const admin = new pgClient.Client({ connectionString: url });
    await admin.connect();
    const ws = await openRawWebSocket(relay.port, VIEWER_WS_PATH, {
      "x-api-key": (await signUp(relay.url)).apiKey,
    });
    /** What the relay sent, as text (its frames are unmasked: the JSON is in the bytes). */
    let heard = "";
    const reading = (async () => {
      const buf = new Uint8Array(64 * 1024);
      for (;;) {
        const n = await ws.conn.read(buf).catch(() => null);
        if (n === null) return;
        heard += new TextDecoder("latin1").decode(buf.subarray(0, n));
      }
    })();
    try {
      await eventually("the viewer's hello", () => heard.includes('"t":"hello"') || undefined);
      // Warm the path the flood takes before measuring.
      const pad = "x".repeat(512 * 1024);
      const junk = clientFrame(
        new TextEncoder().encode(JSON.stringify({ t: "unsubscribe", sessionId: "s", pad })),
      );
      for (let i = 0; i < 8; i++) await writeAll(ws.conn, junk);
      await new Promise((r) => setTimeout(r, 300));
      const before = rssOf(relay.proc.pid);

      // The store stalls: a subscription waits on the sessions table, and every
      // message after it waits for that subscription (they are handled in order).
      await admin.query("BEGIN");
      await admin.query("LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE");
      await ws.sendText(JSON.stringify({ t: "subscribe", sessionId: "stalled" }));
      let written = 0;
      let blocked: Promise<void> | null = null;
      while (written < 512 * MB) {
        const write = writeAll(ws.conn, junk);
        const done = await Promise.race([
          write.then(() => true),
          new Promise<false>((r) => setTimeout(() => r(false), 2000)),
        ]);
        if (!done) {
          blocked = write;
          break;
        }
        written += junk.byteLength;
      }
      const grew = (rssOf(relay.proc.pid) - before) / MB;
      assert.ok(blocked, `the relay read all ${written / MB} MB sent while its store stalled`);
      // Past the queue's cap (4 MiB waiting), not a slow relay's hiccup before it...
      assert.ok(written > 4 * MB, `the writes stalled after only ${written / MB} MB`);
      assert.ok(written < 96 * MB, `the relay read ${written / MB} MB before it stopped reading`);
      assert.ok(grew < 64, `the relay grew ${grew.toFixed(1)} MB while the store stalled`);
      // ...and it stays stopped while the store does.
      const stillBlocked = await Promise.race([
        blocked.then(() => false),
        new Promise<true>((r) => setTimeout(() => r(true), 3000)),
      ]);
      assert.ok(stillBlocked, "the relay read on while its store was still stalled");

      // The store answers again: the relay reads on, handles everything in order
      // (the subscription's answer first), and the socket is still open.
      await admin.query("COMMIT");
      await within(blocked, 30_000, "the blocked write to go through");
      await eventually(
        "the stalled subscription's answer",
        () => heard.includes('"sessionId":"stalled"') || undefined,
      );
      await ws.sendText(JSON.stringify({ t: "subscribe", sessionId: "after" }));
      await eventually(
        "an answer to a message after the flood",
        () => heard.includes('"sessionId":"after"') || undefined,
      );
    } finally {
      ws.close();
      await reading;
      await admin.end().catch(() => {});
      await relay.stop();
      await pg.stop();
    }
  },
});
