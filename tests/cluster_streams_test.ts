/**
 * The tunnel and the terminal across relay nodes (issue 22): two relay
 * processes on one PostgreSQL and one nats-server, a runner connected to
 * node A only, and a browser (cookie requests, WebSockets) on node B. B
 * reaches the runner's machine through a channel over the bus to A
 * (relay/bus/_nats_streams.ts) with credit end to end: a big download keeps
 * both relays' RSS bounded, a stalled reader on B holds the service back,
 * and killing A closes B's streams promptly instead of leaving them hanging.
 *
 * The terminal is created, listed and attached through B: its creation
 * asks the runner over the control channel (relay/remote_runner.ts), its
 * bytes flow over the channel above.
 */
import assert from "node:assert/strict";
import WebSocket from "ws";
import { json, signIn, signUp, type User } from "./harness/client.ts";
import { withBusNodes } from "./harness/cluster.ts";
import { NATS_SERVER } from "./harness/nats.ts";
import { postgresAvailable } from "./harness/postgres.ts";
import type { RelayProcess } from "./harness/procs.ts";
import { RssWatch } from "./harness/rss.ts";
import { madeAsRead, runnerIdOf, startTerminalRunner } from "./harness/tunnel_world.ts";
import { within } from "./harness/wait.ts";

const MB = 1024 * 1024;
const HAS_PG = postgresAvailable("the tunnel-across-nodes tests");
const IGNORE = !HAS_PG || !NATS_SERVER;

/** The service on the runner's machine: a page, downloads of any size made as read, a WS echo. */
function startService(made: Map<string, number>) {
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const url = new URL(req.url);
    if (url.pathname === "/hello") {
      return new Response(`hello from the runner's machine: ${req.method} ${url.search}`);
    }
    if (url.pathname === "/ws") {
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onmessage = (ev) => socket.send(ev.data);
      return response;
    }
    return madeAsRead(url, made);
  });
}

interface Cluster {
  a: RelayProcess;
  b: RelayProcess;
  /** The runner's owner, signed in on A. */
  ownerA: User;
  /** The same owner's browser on B (its own cookie from B). */
  webB: (path: string, init?: RequestInit) => Promise<Response>;
  cookieB: string;
  stranger: User;
  runnerId: string;
  port: number;
  made: Map<string, number>;
}

async function withCluster(fn: (c: Cluster) => Promise<void>): Promise<void> {
  const made = new Map<string, number>();
  const service = startService(made);
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "baton-xs-root-" }));
  try {
    // As a deployment runs them (twoNodes): one database, the same secret and push keys.
    await withBusNodes({
      startRunner: (a, owner) => startTerminalRunner(a.url, owner, root),
    }, async ({ a, b, owner: ownerA }) => {
      const stranger = await signUp(b.url);
      const cookieB = await signIn(b.url, ownerA.email, ownerA.password);
      const bUrl = b.url;
      await fn({
        a,
        b,
        ownerA,
        cookieB,
        webB: (path, init = {}) =>
          fetch(`${bUrl}${path}`, {
            ...init,
            headers: {
              cookie: cookieB,
              origin: bUrl,
              ...(init.headers as Record<string, string> | undefined),
            },
          }),
        stranger,
        runnerId: await runnerIdOf(ownerA),
        port: service.addr.port,
        made,
      });
    });
  } finally {
    await service.shutdown();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

/** Reads a body to its end; its byte count. */
async function drain(res: Response): Promise<number> {
  let total = 0;
  for await (const c of res.body!) total += c.byteLength;
  return total;
}

/** A browser's terminal socket on `relayUrl`. */
function attachTerminal(relayUrl: string, cookie: string, runnerId: string, terminalId: string) {
  const url = `${relayUrl.replace(/^http/, "ws")}/_terminal?runnerId=${runnerId}` +
    `&terminalId=${terminalId}`;
  const ws = new WebSocket(url, { headers: { cookie, origin: relayUrl } });
  let out = "";
  const dec = new TextDecoder();
  ws.on("message", (data, isBinary) => {
    if (isBinary) out += dec.decode(data as Uint8Array, { stream: true });
  });
  const closed = new Promise<number>((r) => ws.on("close", (code) => r(code)));
  return {
    ws,
    closed,
    get out() {
      return out;
    },
    opened: new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("unexpected-response", (_q, res) => reject(new Error(`status ${res.statusCode}`)));
      ws.once("error", reject);
    }),
    async waitFor(re: RegExp, ms = 15_000) {
      const end = Date.now() + ms;
      while (!re.test(out)) {
        if (Date.now() > end) throw new Error(`no ${re} in ${JSON.stringify(out.slice(-300))}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
  };
}

Deno.test({
  name:
    "tunnel and terminal through node B to a runner on node A: HTTP, 200 MB and a stalled reader with both relays' RSS bounded, WebSocket echo, terminal, and A's death closes B's streams",
  ignore: IGNORE,
  async fn(t) {
    await withCluster(async (c) => {
      const base = `/api/tunnel/runner/${c.runnerId}/${c.port}`;

      await t.step("an HTTP request through B reaches the runner's machine", async () => {
        const res = await c.webB(`${base}/hello?x=1`);
        assert.equal(res.status, 200);
        assert.equal(await res.text(), "hello from the runner's machine: GET ?x=1");
        const post = await c.webB(`${base}/hello?y=2`, { method: "POST", body: "body" });
        assert.equal(await post.text(), "hello from the runner's machine: POST ?y=2");
        // Another user's view through B: the runner does not exist for them.
        const foreign = await c.stranger.web(`${base}/hello`);
        assert.equal(foreign.status, 404);
        await foreign.body?.cancel();
        const unknown = await c.webB(`/api/tunnel/runner/nosuchrunner/${c.port}/hello`);
        assert.equal(unknown.status, 404);
        await unknown.body?.cancel();
      });

      await t.step("200 MB through B: both relays' RSS stay bounded", async () => {
        // Warm both processes (first request, JIT) so growth is the stream's.
        assert.equal(await drain(await c.webB(`${base}/big?mb=20&id=warm`)), 20 * MB);
        const watch = new RssWatch([c.a.proc.pid, c.b.proc.pid]);
        const started = performance.now();
        let total = 0;
        try {
          const res = await c.webB(`${base}/big?mb=200&id=big`);
          assert.equal(res.status, 200);
          total = await drain(res);
        } finally {
          const [a, b] = watch.stop();
          const secs = (performance.now() - started) / 1000;
          console.log(
            `200 MB through B in ${secs.toFixed(1)} s; A grew ${a!.toFixed(1)} MB, B ${
              b!.toFixed(1)
            } MB`,
          );
          // A relay that buffered the body would take the 200 MB (on either node).
          assert.ok(a! < 120, `relay A grew ${a} MB`);
          assert.ok(b! < 120, `relay B grew ${b} MB`);
        }
        assert.equal(total, 200 * MB);
      });

      await t.step(
        "a reader that stalls on B holds the service back; A and B grow nothing",
        async () => {
          const res = await c.webB(`${base}/big?mb=1024&id=stalled`);
          const reader = res.body!.getReader();
          await reader.read();
          await new Promise((r) => setTimeout(r, 1000));
          const madeAtStall = c.made.get("stalled")!;
          const watch = new RssWatch([c.a.proc.pid, c.b.proc.pid]);
          await new Promise((r) => setTimeout(r, 3000));
          const [a, b] = watch.stop();
          const madeAfter = c.made.get("stalled")!;
          console.log(
            `stalled on B: the service made ${(madeAfter / MB).toFixed(2)} MB; ` +
              `A grew ${a!.toFixed(1)} MB, B ${b!.toFixed(1)} MB while stalled`,
          );
          // A window per hop (runner, A, B) plus the kernel's loopback buffers on the
          // browser's and the service's sockets; the gigabyte would be made if anything buffered.
          assert.ok(madeAfter < 40 * MB, `the stalled stream made ${madeAfter / MB} MB`);
          assert.ok(madeAfter - madeAtStall < 4 * MB, "the stalled stream kept moving");
          assert.ok(a! < 30 && b! < 30, `A grew ${a} MB, B ${b} MB while stalled`);
          await reader.cancel();
        },
      );

      await t.step("a WebSocket through B echoes", async () => {
        const nav = await c.webB(`${base}/`, {
          headers: { "sec-fetch-mode": "navigate" },
          redirect: "manual",
        });
        await nav.body?.cancel();
        const at = nav.headers.get("location");
        assert.ok(at, `a preview address (${nav.status})`);
        const ws = new WebSocket(`${c.b.url.replace(/^http/, "ws")}${at}ws`, {
          headers: { origin: c.b.url },
        });
        const got: string[] = [];
        ws.on("message", (d) => got.push(String(d)));
        await new Promise((r, j) => {
          ws.once("open", r);
          ws.once("error", j);
        });
        ws.send("hello across nodes");
        ws.send("x".repeat(300_000));
        const deadline = Date.now() + 10_000;
        while (got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        assert.equal(got[0], "hello across nodes");
        assert.equal(got[1]?.length, 300_000);
        const closed = new Promise((r) => ws.once("close", r));
        ws.close();
        await closed;
      });

      let terminal: ReturnType<typeof attachTerminal> | null = null;
      await t.step(
        "a terminal created through B attaches, types and reattaches through B",
        async () => {
          const res = await c.webB(
            "/api/runners/terminal",
            json("POST", { runnerId: c.runnerId, cols: 100, rows: 30 }),
          );
          assert.equal(res.status, 200, await res.clone().text());
          const { terminalId } = await res.json();
          const listed = await c.webB(`/api/runners/${c.runnerId}/terminals`);
          assert.match(await listed.text(), new RegExp(terminalId));
          const first = attachTerminal(c.b.url, c.cookieB, c.runnerId, terminalId);
          await first.opened;
          first.ws.send(new TextEncoder().encode("echo hel''lo; stty size\r"));
          await first.waitFor(/hello\r\n/);
          await first.waitFor(/30 100/);
          first.ws.send(JSON.stringify({ t: "resize", cols: 120, rows: 40 }));
          first.ws.send(new TextEncoder().encode("stty size; echo mark$((6*7))\r"));
          await first.waitFor(/40 120/);
          await first.waitFor(/mark42/);
          first.ws.close();
          await first.closed;
          // Reattached through B: the scrollback comes back over the bus.
          terminal = attachTerminal(c.b.url, c.cookieB, c.runnerId, terminalId);
          await terminal.opened;
          await terminal.waitFor(/mark42/);
          // An unknown terminal through B closes with the same code as on A (4404).
          const unknown = attachTerminal(c.b.url, c.cookieB, c.runnerId, "t_nosuchterminal");
          await unknown.opened;
          assert.equal(await within(unknown.closed, 10_000, "the unknown terminal's close"), 4404);
        },
      );

      await t.step("killing node A closes B's streams promptly", async () => {
        const res = await c.webB(`${base}/big?mb=1024&id=killed`);
        const reader = res.body!.getReader();
        await reader.read();
        const reading = (async () => {
          for (;;) if ((await reader.read()).done) return "ended";
        })().catch(() => "failed");
        const killedAt = Date.now();
        await c.a.kill("SIGKILL");
        const how = await within(reading, 15_000, "B's download to end after A died");
        const termClosed = await within(terminal!.closed, 15_000, "B's terminal to close");
        const ms = Date.now() - killedAt;
        console.log(`A killed: B's download ${how}, terminal closed ${termClosed}, in ${ms} ms`);
        // The body is cut short (an error, never a clean end of a truncated file).
        assert.equal(how, "failed");
        assert.ok(ms < 10_000, `B took ${ms} ms`);
        // And B answers the runner as offline now, not with a hang.
        const after = await within(c.webB(`${base}/hello`), 10_000, "B's answer after A died");
        assert.equal(after.status, 503);
        await after.body?.cancel();
      });
    });
  },
});
