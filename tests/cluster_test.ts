/**
 * Two relay nodes on one PostgreSQL and one nats-server (issue 22): a
 * runner connected to node A is used entirely through node B (spawn, the
 * live stream, input, files, git, the feed), and a bus outage costs B's
 * viewers nothing: they catch up from the store by `seq` once it is back.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { RelayToViewer } from "../shared/protocol.ts";
import { assertContiguous, json, storedEvents, type User, Viewer } from "./harness/client.ts";
import { Balancer } from "./harness/balancer.ts";
import { onNode, streamedText, twoNodes, withRunner } from "./harness/cluster.ts";
import { git, makeRepo } from "./harness/git_repo.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { NATS_SERVER, NatsServer } from "./harness/nats.ts";
import { postgresAvailable, startPostgres } from "./harness/postgres.ts";
import type { RelayProcess, RunnerProcess } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";

const HAS_PG = postgresAvailable("the two-node cluster tests");
if (!NATS_SERVER) {
  console.log("nats-server is not installed: the two-node cluster tests are ignored");
}

/** Two relay nodes on one database and one bus, a runner on node A, a user of both. */
interface Cluster {
  nats: NatsServer;
  llm: MockLlm;
  a: RelayProcess;
  b: RelayProcess;
  runner: RunnerProcess;
  user: User;
  runnerId: string;
  /** The runner's home (a workspace root). */
  home: string;
  /** `user.api` on node B. */
  onB(path: string, init?: RequestInit): Promise<Response>;
  /** A viewer socket of the user on `node`, closed with the cluster. */
  viewerOn(node: RelayProcess): Promise<Viewer>;
  close(): Promise<void>;
}

/** Starts the cluster; the runner dials node A, or `balancer` when given (set to A, then B). */
async function cluster(balancer?: Balancer): Promise<Cluster> {
  const pg = await startPostgres();
  const nats = await NatsServer.start();
  const llm = MockLlm.start();
  const env: Record<string, string> = { BATON_BUS_URL: nats.url };
  if (balancer) env.BATON_ALLOWED_HOSTS = balancer.host;
  const nodes = await twoNodes(pg, { env });
  const { a, b } = nodes;
  if (balancer) balancer.targets = [a, b].map((n) => Number(new URL(n.url).port));
  const world = await withRunner(a, llm, balancer ? { relayUrl: balancer.url } : {});
  const onB = onNode(b, world.user).api;
  // B learns from A's announcement that A holds the runner.
  await eventually("node B sees the runner connected", async () => {
    const list = await (await onB("/api/runners")).json();
    return list.find((x: { id: string; connected: boolean }) => x.id === world.runnerId)
      ?.connected || undefined;
  }, 10_000);
  const viewers: Viewer[] = [];
  return {
    ...world,
    nats,
    llm,
    a,
    b,
    onB,
    async viewerOn(node) {
      const v = await Viewer.connect(node.url, { apiKey: world.user.apiKey });
      viewers.push(v);
      return v;
    },
    async close() {
      for (const v of viewers) await v.close();
      await world.runner.stop().catch(() => {});
      await nodes.stop();
      await llm.close();
      await nats.stop();
      await pg.stop();
    },
  };
}

/** Runs `fn` on a new cluster; prints what the processes said if it fails; stops it all. */
async function onCluster(fn: (c: Cluster) => Promise<void>, balancer?: Balancer): Promise<void> {
  const c = await cluster(balancer);
  try {
    await fn(c);
  } catch (err) {
    console.error(c.a.proc.output(), c.b.proc.output(), c.runner.proc.output());
    throw err;
  } finally {
    await c.close();
  }
}

type ServiceReply = Extract<RelayToViewer, { t: "service_message" }> & {
  ok?: boolean;
  data?: unknown;
  code?: string;
  message?: string;
};

Deno.test({
  name:
    "a runner on node A is driven through node B: spawn, every event live and in order, input, files, git with its live notices, and the feed",
  ignore: !HAS_PG || !NATS_SERVER,
  async fn() {
    await onCluster(async (c) => {
      const { repo } = await makeRepo(c.home);

      const pieces = Array.from({ length: 60 }, (_, i) => `b${i} `);
      c.llm.enqueue({ text: pieces, chunkDelayMs: 15 });
      const spawned = await c.onB(
        "/api/runners/spawn",
        json("POST", { runnerId: c.runnerId, cwd: repo, model: MODEL, prompt: "stream to B" }),
      );
      assert.equal(spawned.status, 200, await spawned.clone().text());
      const { sessionId: id } = await spawned.json();

      const v = await c.viewerOn(c.b);
      v.send({ t: "watch" });
      v.subscribe(id);
      await v.waitForEvent(id, "agent_end", 30_000);
      const first = v.eventsOf(id);
      assertContiguous(first);
      assert.equal(streamedText(first), pieces.join(""), "every piece arrived at B once, in order");

      // Input from B reaches the agent on A's runner; its answer streams to B.
      c.llm.enqueue({ text: ["second ", "turn ", "via ", "B"], chunkDelayMs: 10 });
      const input = await c.onB(
        `/api/sessions/${id}/input`,
        json("POST", { kind: "prompt", text: "again, from B" }),
      );
      assert.equal(input.status, 200, await input.clone().text());
      await v.until(
        () => v.eventsOf(id).filter((e) => e.e.type === "agent_end").length === 2,
        "the second turn's end at B",
      );
      const all = v.eventsOf(id);
      assertContiguous(all);
      assert.deepEqual(all, await storedEvents(c.user, id), "B's viewer saw exactly the log");
      assert.ok(streamedText(all).endsWith("second turn via B"));
      assert.ok(
        c.llm.requests.some((r) => JSON.stringify(r).includes("again, from B")),
        "the model was asked with B's input",
      );

      // The feed on B heard of the session's state changes made on A.
      assert.ok(
        v.messages.some((m) => m.t === "session" && m.session.sessionId === id),
        "a session notice reached B's feed",
      );

      // Files through B: a listing, a search and a read (the read comes in pieces).
      const listed = await c.onB(`/api/runners/${c.runnerId}/files`, json("POST", { path: repo }));
      assert.equal(listed.status, 200, await listed.clone().text());
      const names = (await listed.json()).files.map((f: { name: string }) => f.name);
      assert.ok(names.includes("a.txt"), names.join(","));
      const big = "0123456789abcdef".repeat(40_000); // 640 KB: many pieces
      await Deno.writeTextFile(join(repo, "big.txt"), big);
      const read = await c.onB(
        `/api/runners/${c.runnerId}/read-file`,
        json("POST", { path: join(repo, "big.txt"), encoding: "base64" }),
      );
      assert.equal(read.status, 200, await read.clone().text());
      const body = await read.json();
      const bytes = Uint8Array.from(atob(body.content), (ch) => ch.charCodeAt(0));
      assert.equal(new TextDecoder().decode(bytes), big);

      // Git through B (service_message over B's viewer socket).
      await Deno.writeTextFile(join(repo, "a.txt"), "changed through B\n");
      v.send({
        t: "service_message",
        serviceId: "git",
        requestId: "g1",
        sessionId: id,
        op: "status",
        data: {},
      });
      const status = await v.waitFor<ServiceReply>(
        (m) => m.t === "service_message" && m.requestId === "g1" && "ok" in m,
        30_000,
      );
      assert.equal(status.ok, true, `${status.code}: ${status.message}`);
      assert.match(JSON.stringify(status.data), /a\.txt/);
      assert.ok((await git(repo, "status", "--porcelain")).includes("a.txt"));
      // The runner's own notice (a file changed) reaches B's viewer through the bus.
      await Deno.writeTextFile(join(repo, "live.txt"), "new\n");
      const pushed = await v.waitFor<ServiceReply>(
        (m) =>
          m.t === "service_message" && m.requestId === undefined &&
          JSON.stringify((m as ServiceReply).data ?? null).includes("live.txt"),
        15_000,
      );
      assert.equal(pushed.sessionId, id);

      // B's metrics count what crossed the bus (B is scraped from loopback: allowed).
      const metrics = await (await fetch(`${c.b.url}/metrics`)).text();
      const sample = (name: string) =>
        Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1] ?? NaN);
      assert.equal(sample("baton_bus_connected"), 1, metrics);
      // (Events committed before B's viewer subscribed came from the log, not the bus.)
      assert.ok(sample("baton_bus_events_received_total") > 0, metrics);
      const metricsA = await (await fetch(`${c.a.url}/metrics`)).text();
      const published = Number(/^baton_bus_events_published_total (\S+)$/m.exec(metricsA)?.[1]);
      assert.ok(published >= all.length, `A published ${published} of ${all.length}`);
      assert.ok(sample("baton_bus_request_duration_seconds_count") > 3, metrics);
      assert.equal(sample("baton_runners"), 0, "the runner's link is on A, not B");

      // Deleted through B: a viewer on A hears of it through the bus, and A no longer lists it.
      const viewerA = await c.viewerOn(c.a);
      viewerA.send({ t: "watch" });
      await viewerA.waitFor((m) => m.t === "runners");
      const del = await c.onB(`/api/sessions/${id}`, { method: "DELETE" });
      assert.ok(del.status < 300, `delete answered ${del.status}`);
      await del.body?.cancel();
      await viewerA.waitFor((m) => m.t === "session_deleted" && m.sessionId === id, 10_000);
      const onA = await (await c.user.api("/api/sessions")).json();
      assert.ok(!onA.sessions.some((s: { sessionId: string }) => s.sessionId === id));

      // A runner no node holds is offline on B, as on one node.
      await c.runner.stop();
      await eventually("node B sees the runner gone", async () => {
        const list = await (await c.onB("/api/runners")).json();
        return list.find((x: { id: string }) => x.id === c.runnerId)?.connected === false ||
          undefined;
      }, 15_000);
      const offline = await c.onB(`/api/runners/${c.runnerId}/files`, json("POST", { path: repo }));
      assert.equal(offline.status, 503);
      await offline.body?.cancel();
    });
  },
});

Deno.test({
  name:
    "with the bus down mid-stream, node B is not ready, and its viewer catches up from PostgreSQL once the bus is back: every event once, in order",
  ignore: !HAS_PG || !NATS_SERVER,
  async fn() {
    await onCluster(async (c) => {
      const pieces = Array.from({ length: 120 }, (_, i) => `o${i} `);
      c.llm.enqueue({ text: pieces, chunkDelayMs: 25 });
      const { sessionId: id } = await (await c.user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: c.runnerId, cwd: c.home, model: MODEL, prompt: "outage" }),
      )).json();
      const v = await c.viewerOn(c.b);
      v.subscribe(id);
      await v.until(() => v.eventsOf(id).length > 10, "the first events at B");

      // The bus goes away: A keeps serving its runner and storing its events.
      await c.nats.stop();
      const during = v.eventsOf(id).length;
      await eventually("A stored more while the bus was down", async () => {
        const stored = await storedEvents(c.user, id);
        return stored.length > during + 20 || undefined;
      }, 20_000);
      // Cut off, B tells a balancer it is not ready, naming the bus.
      await eventually("B not ready without the bus", async () => {
        const res = await fetch(`${c.b.url}/ready`);
        const body = await res.text();
        return (res.status === 503 && body.includes('"bus"')) || undefined;
      }, 15_000);
      await c.nats.restart();
      await eventually("B ready again", async () => {
        const res = await fetch(`${c.b.url}/ready`);
        await res.body?.cancel();
        return res.status === 200 || undefined;
      }, 15_000);

      await v.waitForEvent(id, "agent_end", 60_000);
      const all = v.eventsOf(id);
      assertContiguous(all);
      assert.deepEqual(all, await storedEvents(c.user, id), "nothing missed, nothing twice");
      assert.equal(streamedText(all), pieces.join(""));
    });
  },
});

Deno.test({
  name:
    "node A killed with SIGKILL mid-stream: its runner reconnects to B through the balancer, and B's viewer sees every acknowledged event once",
  ignore: !HAS_PG || !NATS_SERVER,
  async fn() {
    await using balancer = Balancer.start();
    await onCluster(async (c) => {
      const pieces = Array.from({ length: 120 }, (_, i) => `k${i} `);
      c.llm.enqueue({ text: pieces, chunkDelayMs: 30 });
      const spawned = await c.onB(
        "/api/runners/spawn",
        json("POST", { runnerId: c.runnerId, cwd: c.home, model: MODEL, prompt: "survive A" }),
      );
      assert.equal(spawned.status, 200, await spawned.clone().text());
      const { sessionId: id } = await spawned.json();
      const v = await c.viewerOn(c.b);
      v.subscribe(id);
      await v.until(() => v.eventsOf(id).length > 20, "the first events at B");
      const throughB = onNode(c.b, c.user);
      const ackedBefore = (await storedEvents(throughB, id)).length;

      await c.a.kill("SIGKILL");
      await c.runner.connected(2);
      await v.waitForEvent(id, "agent_end", 60_000);
      const all = v.eventsOf(id);
      assertContiguous(all);
      const stored = await storedEvents(throughB, id);
      assert.ok(stored.length >= ackedBefore, "no acknowledged event was lost");
      assert.deepEqual(all, stored, "B's viewer saw exactly the stored log");
      assert.equal(streamedText(all), pieces.join(""), "every piece once, none twice");
    }, balancer);
  },
});
