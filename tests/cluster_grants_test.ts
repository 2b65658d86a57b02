/**
 * Preview grants and handoff tickets across relay nodes (issue 22): two
 * relay processes on one PostgreSQL and one nats-server, a runner on node A
 * with a service on its loopback. A preview opened on A is served by B (the
 * balancer sends a page's sub-requests anywhere), a tunnel origin's ticket
 * made on A is spent on B once, and a restarted node still knows its grants.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { User } from "./harness/client.ts";
import { withBusNodes } from "./harness/cluster.ts";
import { NATS_SERVER } from "./harness/nats.ts";
import { postgresAvailable } from "./harness/postgres.ts";
import { type RelayProcess, type RunnerProcess, startRunner } from "./harness/procs.ts";
import { navigateTunnel, runnerIdOf } from "./harness/tunnel_world.ts";
import { eventually } from "./harness/wait.ts";

const HAS_PG = postgresAvailable("the preview grants across relay nodes");
const IGNORE = !HAS_PG || !NATS_SERVER;

/** The tunnel origin's host: requests carry it as their Host, whichever node they reach. */
const TUNNEL_HOST = "tunnel.test";

interface Pair {
  a: RelayProcess;
  b: RelayProcess;
  owner: User;
  runner: RunnerProcess;
  runnerId: string;
  /** The service's port on the runner's machine. */
  port: number;
  /** Starts node A again (after a stop), on its port, on the same bus. */
  restartA(): Promise<void>;
}

/**
 * A private PostgreSQL and nats-server, two nodes on them (with `env`), the
 * owner's runner connected to node A with its tunnel up, and a service on
 * the loopback that says which path it served.
 */
async function withPair(env: Record<string, string>, fn: (p: Pair) => Promise<void>) {
  const service = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => new Response(`served ${new URL(req.url).pathname} from the runner's machine`),
  );
  try {
    await withBusNodes({
      env,
      startRunner: async (a, owner) => {
        const runner = await startRunner({ relayUrl: a.url, apiKey: owner.apiKey });
        await runner.proc.waitFor(/tunnel connected/, 20_000);
        return runner;
      },
    }, async ({ a, b, args, owner, runner }) =>
      await fn({
        a,
        b,
        owner,
        runner,
        runnerId: await runnerIdOf(owner),
        port: service.addr.port,
        restartA: () => a.restart(args),
      }));
  } finally {
    await service.shutdown();
  }
}

/** Where a navigation to the service's `path` on node A is sent (303). */
async function openOnA(p: Pair, path: string): Promise<string> {
  const res = await navigateTunnel(p.owner, p.runnerId, p.port, path);
  await res.body?.cancel();
  assert.equal(res.status, 303);
  return res.headers.get("location")!;
}

/** A GET without cookie; its status and text. */
async function get(url: string): Promise<[number, string]> {
  const res = await fetch(url);
  return [res.status, await res.text()];
}

/**
 * A GET addressed to the tunnel origin (its Host) that reaches `node`, as a
 * balancer in front of both nodes passes it (fetch() sends the URL's host
 * as Host whatever it is told, node:http what it is told).
 */
function onTunnelOrigin(
  node: RelayProcess,
  path: string,
  cookie?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host: TUNNEL_HOST, connection: "close" };
    if (cookie) headers.cookie = cookie;
    http.get({ host: "127.0.0.1", port: node.port, path, headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => text += c);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.on("error", reject);
    }).on("error", reject);
  });
}

Deno.test({
  name: "a preview opened on node A serves its page's requests on node B, and after A restarts",
  ignore: IGNORE,
  async fn() {
    await withPair({}, async (p) => {
      const at = await openOnA(p, "/index.html");
      const m = at.match(/^\/api\/tunnel\/g\/([A-Za-z0-9_-]{43})\/index\.html$/);
      assert.ok(m, at);
      const grant = m[1]!;
      // The page's sub-requests carry no cookie; the balancer sends them to B.
      assert.deepEqual(await get(`${p.b.url}/api/tunnel/g/${grant}/app.js`), [
        200,
        "served /app.js from the runner's machine",
      ]);
      assert.deepEqual(await get(`${p.a.url}/api/tunnel/g/${grant}/style.css`), [
        200,
        "served /style.css from the runner's machine",
      ]);
      // A made-up grant is refused on either node.
      const madeUp = `${grant.slice(0, -1)}${grant.endsWith("A") ? "B" : "A"}`;
      for (const node of [p.a, p.b]) {
        const res = await fetch(`${node.url}/api/tunnel/g/${madeUp}/app.js`);
        assert.equal(res.status, 401);
        assert.equal((await res.json()).error.code, "preview_expired");
      }

      // Node A, which made the grant, restarts: the grant is in the database, not in A.
      await p.a.stop();
      await p.restartA();
      await eventually(
        "the runner's tunnel back on A",
        () => p.runner.proc.count(/tunnel connected/) >= 2 || undefined,
      );
      for (const node of [p.a, p.b]) {
        assert.deepEqual(await get(`${node.url}/api/tunnel/g/${grant}/after-restart.js`), [
          200,
          "served /after-restart.js from the runner's machine",
        ]);
      }
    });
  },
});

Deno.test({
  name:
    "with a tunnel origin, a ticket made on node A is spent on node B once, and its grant works on both",
  ignore: IGNORE,
  async fn() {
    await withPair({ BATON_TUNNEL_ORIGIN: `http://${TUNNEL_HOST}` }, async (p) => {
      const handoff = new URL(await openOnA(p, "/index.html?x=1"));
      assert.equal(handoff.host, TUNNEL_HOST);
      const label = handoff.pathname.match(/^\/(p\d+-[0-9a-f]{16})\/__baton_tunnel\/handoff$/)?.[1];
      assert.ok(label, handoff.pathname);
      const ticketPath = handoff.pathname + handoff.search;

      // Spent on B: B knows the ticket, and gives the preview the same label as A did.
      const spent = await onTunnelOrigin(p.b, ticketPath);
      assert.equal(spent.status, 303, spent.text);
      assert.equal(spent.headers.location, `/${label}/index.html?x=1`);
      const setCookie = spent.headers["set-cookie"]?.[0] ?? "";
      assert.match(setCookie, new RegExp(`^baton_tunnel_${label.replace(/-/g, "_")}=`));
      assert.match(setCookie, /HttpOnly; SameSite=Lax/);
      const cookie = setCookie.split(";")[0]!;

      // Spent once: neither node takes it again.
      for (const node of [p.a, p.b]) {
        const again = await onTunnelOrigin(node, ticketPath);
        assert.equal(again.status, 401, again.text);
        assert.equal(again.headers["set-cookie"], undefined);
      }

      // The grant it handed over answers on either node.
      for (const node of [p.a, p.b]) {
        const page = await onTunnelOrigin(node, `/${label}/page.js`, cookie);
        assert.equal(page.status, 200, page.text);
        assert.equal(page.text, "served /page.js from the runner's machine");
      }
      const bare = await onTunnelOrigin(p.b, `/${label}/page.js`);
      assert.equal(bare.status, 401, "no grant cookie, no preview");
    });
  },
});
