/**
 * A relay on PostgreSQL (`BATON_DATABASE_URL` / `--store`, issue 22): the
 * whole path from a spawn through the mock model to the stored log, a crash
 * that loses no acknowledged event, and a second relay node on the same
 * database that reads the same accounts, keys and sessions.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertContiguous, json, signIn, signUp, storedEvents, Viewer } from "./harness/client.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { postgresAvailable, startPostgres } from "./harness/postgres.ts";
import {
  baseEnv,
  baton,
  RelayProcess,
  type RunnerProcess,
  startRunner,
  tempDir,
} from "./harness/procs.ts";

const HAS_PG = postgresAvailable("the relay-on-PostgreSQL tests");

Deno.test({
  name:
    "a relay on PostgreSQL streams a session, survives SIGKILL with every acked event, and a second node reads the same data",
  ignore: !HAS_PG,
  async fn() {
    const pg = await startPostgres();
    const llm = MockLlm.start();
    const url = await pg.createDatabase("baton_relay");
    const relay = await RelayProcess.start({ env: { BATON_DATABASE_URL: url } });
    let runner: RunnerProcess | undefined;
    let nodeB: RelayProcess | undefined;
    try {
      const user = await signUp(relay.url);
      const home = await tempDir();
      await llm.writeModelsJson(home);
      runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
      const [r] = await (await user.api("/api/runners")).json();

      const pieces = Array.from({ length: 80 }, (_, i) => `p${i} `);
      llm.enqueue({ text: pieces, chunkDelayMs: 25 });
      const { sessionId: id } = await (await user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: "stream on postgres" }),
      )).json();
      const v1 = await Viewer.connect(relay.url, { apiKey: user.apiKey });
      v1.subscribe(id);
      await v1.until(() => v1.eventsOf(id).length > 15, "some streamed events");
      const ackedBefore = (await storedEvents(user, id)).length;
      await relay.kill("SIGKILL");
      await v1.closed;
      const seen = v1.eventsOf(id);

      // Nothing of the relay's data is in its folder: it is all in PostgreSQL.
      await assert.rejects(Deno.stat(join(relay.dataDir, "relay.db")), Deno.errors.NotFound);

      await relay.restart();
      await runner.connected(2);
      const v2 = await Viewer.connect(relay.url, { apiKey: user.apiKey });
      try {
        v2.subscribe(id, seen[seen.length - 1]!.seq);
        await v2.waitForEvent(id, "agent_end", 30_000);
        const all = [...seen, ...v2.eventsOf(id)];
        assertContiguous(all);
        const stored = await storedEvents(user, id);
        assert.ok(stored.length >= ackedBefore, "no acknowledged event was lost");
        assert.deepEqual(all, stored, "the viewer saw exactly the stored log");
        const text = all
          .filter((e) => e.e.type === "message_update")
          .map((e) => (e.e.assistantMessageEvent as { delta?: string }).delta ?? "")
          .join("");
        assert.equal(text, pieces.join(""), "every streamed piece arrived exactly once");
      } finally {
        await v2.close();
      }

      // A second node on the same database (its own data folder): the same
      // key, the same sessions and log, and the account signs in there.
      nodeB = await RelayProcess.start({ env: { BATON_DATABASE_URL: url } });
      const onB = (path: string) =>
        fetch(`${nodeB!.url}${path}`, { headers: { "x-api-key": user.apiKey } });
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
      await nodeB?.stop();
      await relay.stop().catch(() => {});
      await llm.close();
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
