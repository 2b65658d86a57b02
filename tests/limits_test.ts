/**
 * What one client can make the relay hold: WebSocket messages are refused
 * from their frame header (1009) rather than read whole, a socket that has
 * not authenticated gets a small first message and a short time, slow
 * request headers time out, and one address can hold only so many
 * connections. Real relay processes, real sockets; the relay's RSS is read
 * from /proc.
 */
import assert from "node:assert/strict";
import { MAX_RUNNER_HELLO_BYTES, PROTOCOL_VERSION } from "../shared/protocol.ts";
import { signUp, type User } from "./harness/client.ts";
import { RelayProcess } from "./harness/procs.ts";
import { rawRequest } from "./harness/raw_http.ts";
import { within } from "./harness/wait.ts";
import { WsPeer } from "./harness/ws_peer.ts";

const MB = 1024 * 1024;

/** The resident set size of a process, in bytes. */
function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  if (!m) throw new Error(`No VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** Samples `pid`'s RSS every 50 ms while `work` runs; returns the highest. */
async function peakRss<T>(pid: number, work: () => Promise<T>): Promise<[T, number]> {
  let peak = rssOf(pid);
  const timer = setInterval(() => peak = Math.max(peak, rssOf(pid)), 50);
  try {
    const out = await work();
    return [out, Math.max(peak, rssOf(pid))];
  } finally {
    clearInterval(timer);
  }
}

async function withRelay(
  env: Record<string, string>,
  fn: (relay: RelayProcess) => Promise<void>,
  args: string[] = [],
): Promise<void> {
  const relay = await RelayProcess.start({ env, args });
  try {
    await fn(relay);
  } catch (err) {
    console.error(relay.proc.output());
    throw err;
  } finally {
    await relay.stop();
  }
}

function upgradeHeaders(extra: Record<string, string> = {}): Record<string, string> {
  return {
    upgrade: "websocket",
    connection: "Upgrade",
    "sec-websocket-key": btoa("0123456789abcdef"),
    "sec-websocket-version": "13",
    ...extra,
  };
}

const isT = (t: string) => (m: unknown) => (m as { t?: string }).t === t;

Deno.test("ten unauthenticated viewers each streaming a 60 MB message are closed with 1009 and the relay's RSS stays bounded", async () => {
  await withRelay({}, async (relay) => {
    const peers = await Promise.all(
      Array.from({ length: 10 }, () => WsPeer.open(relay.port, "/_viewer")),
    );
    const before = rssOf(relay.proc.pid);
    const [sent, peak] = await peakRss(
      relay.proc.pid,
      () => within(Promise.all(peers.map((p) => p.stream(60 * MB))), 60_000, "the streams end"),
    );
    const codes = await within(Promise.all(peers.map((p) => p.closed)), 10_000, "closes");
    console.log(
      `limits: 10 × 60 MB streamed, relay RSS ${(before / MB).toFixed(0)} MB → peak ` +
        `${(peak / MB).toFixed(0)} MB; each stream cut after ` +
        `${(Math.max(...sent) / MB).toFixed(1)} MB at most`,
    );
    assert.deepEqual(codes, Array(10).fill(1009), "every socket is closed with 1009");
    assert.ok(
      sent.every((n) => n < 60 * MB),
      `the relay stopped each stream early: ${sent.map((n) => (n / MB).toFixed(1)).join(", ")} MB`,
    );
    assert.ok(
      peak - before < 150 * MB,
      `relay RSS grew by ${((peak - before) / MB).toFixed(0)} MB (from ${before / MB | 0} MB)`,
    );
    // It still serves.
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
  });
});

Deno.test("each channel refuses a message over its limit with 1009 and takes one under it", async () => {
  await withRelay({}, async (relay) => {
    const user: User = await signUp(relay.url);
    const pad = (bytes: number) => " ".repeat(bytes);

    // A viewer authenticated by its key header: 1 MiB.
    const viewer = await WsPeer.open(relay.port, "/_viewer", { "x-api-key": user.apiKey });
    await viewer.next(isT("hello"));
    await viewer.send({ t: "ping", pad: pad(900 * 1024) });
    await viewer.next(isT("pong"));
    await viewer.send({ t: "ping", pad: pad(2 * MB) }).catch(() => {});
    assert.equal(await within(viewer.closed, 10_000, "viewer closed"), 1009);

    // A viewer authenticated by its first message: the small first-message
    // limit no longer applies once the key is accepted.
    const late = await WsPeer.open(relay.port, "/_viewer");
    await late.send({ t: "auth", apiKey: user.apiKey });
    await late.next(isT("hello"));
    await late.send({ t: "ping", pad: pad(900 * 1024) });
    await late.next(isT("pong"));
    late.close();

    // A runner: 8 MiB.
    const runner = await WsPeer.open(relay.port, "/_runner");
    await runner.send({
      t: "hello",
      v: PROTOCOL_VERSION,
      apiKey: user.apiKey,
      runnerId: "limits-runner",
      name: "limits",
      roots: [],
      version: "0",
      platform: "linux",
      sessions: [],
    });
    await runner.next(isT("welcome"));
    await runner.send({ t: "ping", pad: pad(7 * MB) });
    await runner.next(isT("pong"), 20_000);
    // The relay may close before the whole message is written.
    await runner.send({ t: "ping", pad: pad(9 * MB) }).catch(() => {});
    assert.equal(await within(runner.closed, 10_000, "runner closed"), 1009);
  });
});

Deno.test("a runner holding thousands of sessions connects by showing its key in the handshake", async () => {
  await withRelay({}, async (relay) => {
    const user: User = await signUp(relay.url);
    const sessions = Array.from({ length: 3000 }, (_, i) => ({
      sessionId: `sess-${String(i).padStart(6, "0")}-${"x".repeat(40)}`,
      cwd: `/home/someone/projects/a-fairly-long-project-name/${"sub/".repeat(10)}${i}`,
    }));
    const hello = (apiKey: string) => ({
      t: "hello",
      v: PROTOCOL_VERSION,
      apiKey,
      runnerId: "busy-runner",
      name: "busy",
      roots: [],
      version: "0",
      platform: "linux",
      sessions,
    });
    assert.ok(JSON.stringify(hello(user.apiKey)).length > MAX_RUNNER_HELLO_BYTES);

    // Without the key in the handshake, so large a first message is refused.
    const anonymous = await WsPeer.open(relay.port, "/_runner");
    await anonymous.send(hello(user.apiKey)).catch(() => {});
    assert.equal(await within(anonymous.closed, 10_000, "anonymous runner closed"), 1009);

    // With it (what the runner daemon sends), the same hello is welcome.
    const keyed = await WsPeer.open(relay.port, "/_runner", { "x-api-key": user.apiKey });
    await keyed.send(hello(user.apiKey));
    await keyed.next(isT("welcome"), 20_000);
    keyed.close();

    // The hello must carry the key the handshake showed.
    const made = await user.api("/api/keys", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "second" }),
    });
    const second = (await made.json()) as { key: string };
    const mixed = await WsPeer.open(relay.port, "/_runner", { "x-api-key": second.key });
    await mixed.send(hello(user.apiKey));
    assert.equal(await within(mixed.closed, 10_000, "mixed-key runner closed"), 4001);
  });
});

Deno.test("a socket that has not authenticated gets a small first message, a short time and a few slots per address", async (t) => {
  const env = { BATON_WS_AUTH_TIMEOUT_MS: "1500", BATON_MAX_UNAUTHENTICATED_WS_PER_ADDRESS: "4" };
  await withRelay(env, async (relay) => {
    const user = await signUp(relay.url);

    await t.step("a first message over 16 KB closes it with 1009", async () => {
      const v = await WsPeer.open(relay.port, "/_viewer");
      await v.send({ t: "auth", apiKey: "x".repeat(20 * 1024) });
      assert.equal(await within(v.closed, 5000, "closed"), 1009);
      const r = await WsPeer.open(relay.port, "/_runner");
      await r.stream(2 * MB);
      assert.equal(await within(r.closed, 5000, "closed"), 1009);
      // A client that writes its whole 8 MB first message before it reads
      // (as WebSocket in Deno does) still learns why: 1009, not an abnormal closure.
      const ws = new WebSocket(relay.url.replace(/^http/, "ws") + "/_runner");
      await new Promise((resolve) => ws.onopen = resolve);
      const closed = new Promise<number>((resolve) => ws.onclose = (ev) => resolve(ev.code));
      ws.send(JSON.stringify({ t: "hello", pad: "x".repeat(8 * MB) }));
      assert.equal(await within(closed, 5000, "closed"), 1009);
    });

    await t.step("a viewer that sends nothing is closed after the auth timeout", async () => {
      const started = Date.now();
      const v = await WsPeer.open(relay.port, "/_viewer");
      assert.equal(await within(v.closed, 6000, "closed"), 4001);
      const took = Date.now() - started;
      assert.ok(took >= 1400 && took < 5000, `closed after ${took} ms`);
      const r = await WsPeer.open(relay.port, "/_runner");
      assert.equal(await within(r.closed, 6000, "closed"), 4400);
    });

    await t.step("an address holds at most 4 unauthenticated sockets; 429 beyond", async () => {
      const held = await Promise.all(
        Array.from({ length: 4 }, () => WsPeer.open(relay.port, "/_viewer")),
      );
      const refused = await rawRequest(relay.port, {
        method: "GET",
        target: "/_viewer",
        headers: upgradeHeaders(),
      });
      assert.equal(refused.status, 429);
      assert.equal(JSON.parse(refused.text).error.code, "too_many_connections");
      // A viewer with its key header is not counted, and one that authenticates frees its slot.
      const keyed = await WsPeer.open(relay.port, "/_viewer", { "x-api-key": user.apiKey });
      await keyed.next(isT("hello"));
      await held[0]!.send({ t: "auth", apiKey: user.apiKey });
      await held[0]!.next(isT("hello"));
      const another = await WsPeer.open(relay.port, "/_viewer");
      for (const p of [...held, keyed, another]) p.close();
    });

    await t.step("refused upgrades still answer JSON errors", async () => {
      const foreign = await rawRequest(relay.port, {
        method: "GET",
        target: "/_viewer",
        headers: upgradeHeaders({ origin: "http://evil.example" }),
      });
      assert.equal(foreign.status, 403);
      assert.equal(JSON.parse(foreign.text).error.code, "bad_origin");
      const badKey = await rawRequest(relay.port, {
        method: "GET",
        target: "/_viewer",
        headers: upgradeHeaders({ "x-api-key": "bk_nope" }),
      });
      assert.equal(badKey.status, 401);
      assert.equal(JSON.parse(badKey.text).error.code, "unauthorized");
      const malformed = await rawRequest(relay.port, {
        method: "GET",
        target: "/_runner",
        headers: upgradeHeaders({ "sec-websocket-key": "short" }),
      });
      assert.equal(malformed.status, 400);
      assert.equal(JSON.parse(malformed.text).error.code, "bad_upgrade");
      // node:http refuses a request target and headers over 16 KB before the app sees them.
      const huge = await rawRequest(relay.port, {
        method: "GET",
        target: "/api/sessions/" + "%C3%A9".repeat(5000),
        headers: { "x-api-key": user.apiKey },
      });
      assert.equal(huge.status, 431);
      assert.equal(JSON.parse(huge.text).error.code, "headers_too_large");
    });
  });
});

Deno.test("a client sending its request headers one byte a second is cut off after the header timeout", async () => {
  await withRelay({ BATON_HEADERS_TIMEOUT_MS: "2000" }, async (relay) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: relay.port });
    const started = Date.now();
    const head = new TextEncoder().encode(
      "GET /health HTTP/1.1\r\nhost: x\r\nx-slow: " + "a".repeat(30),
    );
    let closedAfter = -1;
    for (const byte of head) {
      try {
        await conn.write(new Uint8Array([byte]));
      } catch {
        closedAfter = Date.now() - started;
        break;
      }
      await new Promise((r) => setTimeout(r, 1000));
      if (Date.now() - started > 8000) break;
    }
    if (closedAfter < 0) {
      // The write may succeed into a half-closed socket: the read side tells.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const n = await Promise.race([
        conn.read(new Uint8Array(1024)).catch(() => null),
        new Promise<"open">((r) => timer = setTimeout(() => r("open"), 3000)),
      ]);
      clearTimeout(timer);
      closedAfter = n !== "open" ? Date.now() - started : -1;
    }
    conn.close();
    assert.ok(closedAfter > 0 && closedAfter < 6000, `closed after ${closedAfter} ms`);
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
  });
});

Deno.test("connections past the per-address cap are refused, the relay's RSS stays bounded, and another address is served", async () => {
  const env = { BATON_MAX_CONNECTIONS_PER_ADDRESS: "1000", BATON_HEADERS_TIMEOUT_MS: "60000" };
  await withRelay(env, async (relay) => {
    const before = rssOf(relay.proc.pid);
    const conns: Deno.TcpConn[] = [];
    try {
      const partial = new TextEncoder().encode("GET /health HTTP/1.1\r\nhost: x\r\n");
      for (let i = 0; i < 3000; i++) {
        const c = await Deno.connect({ hostname: "127.0.0.1", port: relay.port });
        conns.push(c);
        c.write(partial).catch(() => {});
      }
      // The refused ones are closed by the relay: their reads end.
      const ended = await Promise.all(conns.map((c) =>
        Promise.race([
          c.read(new Uint8Array(64)).then((n) => n === null, () => true),
          new Promise<boolean>((r) => setTimeout(() => r(false), 3000)),
        ])
      ));
      const open = ended.filter((e) => !e).length;
      assert.ok(open <= 1000 && open >= 990, `${open} of 3000 connections stayed open`);
      const grown = rssOf(relay.proc.pid) - before;
      console.log(
        `limits: ${open} connections held open, ${3000 - open} refused; relay RSS ` +
          `+${(grown / MB).toFixed(1)} MB (from ${(before / MB).toFixed(0)} MB)`,
      );
      assert.ok(grown < 150 * MB, `relay RSS grew by ${(grown / MB).toFixed(0)} MB`);
      // The address at its cap gets nothing more; another address is served.
      const more = await fetch(`http://127.0.0.1:${relay.port}/health`).then(
        (r) => r.status,
        () => 0,
      );
      assert.equal(more, 0, "a new connection from the capped address is refused");
      const other = await fetch(`http://[::1]:${relay.port}/health`);
      assert.equal(other.status, 200);
    } finally {
      for (const c of conns) {
        try {
          c.close();
        } catch {
          // Closed by the relay.
        }
      }
    }
  }, ["--host", "::"]);
});
