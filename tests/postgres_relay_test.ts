/**
 * A relay on PostgreSQL (`BATON_DATABASE_URL` / `--store`, issue 22): the
 * whole path from a spawn through the mock model to the stored log, a crash
 * that loses no acknowledged event, and a second relay node on the same
 * database that reads the same accounts, keys and sessions.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { signIn, storedEvents } from "./harness/client.ts";
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
