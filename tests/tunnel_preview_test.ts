/**
 * Live previews through the HTTP tunnel, as a person sees them: a real
 * relay and runner, a small "dev server" of this test's own on the runner's
 * loopback (HTML with a script, a style sheet and a fetch, assets at
 * absolute paths, a gzip body, a hot-reload WebSocket that tells the page a
 * watched file changed), and Chromium opening the tunnel address.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { type Browser, type Page } from "playwright-core";
import { launchBrowser, newPage } from "./harness/browser.ts";
import { baseEnv, baton, tempDir } from "./harness/procs.ts";
import { rssOf } from "./harness/rss.ts";
import {
  navigateTunnel,
  previewAddress,
  type TunnelRig,
  withTunnelRunner,
} from "./harness/tunnel_world.ts";

const enc = new TextEncoder();

const INDEX = `<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="/style.css">
<script type="module" src="/src/app.js"></script>
</head><body><div id="out">pending</div><div id="msg">-</div><div id="probe">-</div></body></html>`;

const APP = `import { greet } from "/src/lib.js";
const out = document.getElementById("out");
const data = await (await fetch("data.json")).json();
out.textContent = greet(data.who);
// Hot reload: the dev server says which file changed; the page fetches it again.
const show = async () => {
  document.getElementById("msg").textContent = await (await fetch("message.txt?" + Date.now())).text();
};
await show();
const ws = new WebSocket(new URL("__hmr", location.href.replace(/^http/, "ws")));
ws.onmessage = (ev) => { if (ev.data === "changed") show(); };
ws.onopen = () => document.body.dataset.hmr = "open";
// Server-sent events, on a stream that stays open (buffering would show nothing).
new EventSource("events").onmessage = (ev) => document.body.dataset.sse = ev.data;
// What a hostile preview would try: the relay's cookie and its API as the person.
const probe = {};
try { probe.cookie = document.cookie; } catch (e) { probe.cookie = "threw " + e.name; }
try {
  const r = await fetch("/api/sessions", { credentials: "include" });
  probe.api = "read " + r.status + " " + (await r.text()).slice(0, 40);
} catch { probe.api = "blocked"; }
if (window.RELAY) {
  try {
    const r = await fetch(window.RELAY + "/api/sessions", { credentials: "include" });
    probe.relay = "read " + r.status + " " + (await r.text()).slice(0, 40);
  } catch { probe.relay = "blocked"; }
}
document.getElementById("probe").textContent = JSON.stringify(probe);
`;

/** The dev server: the page, its assets at absolute paths, and a hot-reload socket. */
function startDevServer(dir: string) {
  const sockets = new Set<WebSocket>();
  const seen: { path: string; cookie: string | null }[] = [];
  const flood = { sent: 0 };
  (async () => {
    for await (const ev of Deno.watchFs(dir)) {
      if (ev.kind === "modify" || ev.kind === "create") {
        for (const s of sockets) if (s.readyState === WebSocket.OPEN) s.send("changed");
      }
    }
  })().catch(() => {});
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    seen.push({ path: url.pathname, cookie: req.headers.get("cookie") });
    const type = (t: string) => ({ headers: { "content-type": t, "cache-control": "no-store" } });
    switch (url.pathname) {
      case "/":
        return new Response(INDEX, type("text/html; charset=utf-8"));
      case "/style.css":
        return new Response("#out { color: rgb(1, 2, 3) }", type("text/css"));
      case "/src/app.js":
        return new Response(APP, type("text/javascript"));
      case "/src/lib.js": {
        // Sent gzip'd whatever the request asked for (some servers do).
        const gz = new Response(
          ReadableStream.from([enc.encode(`export const greet = (w) => "hello " + w;`)])
            .pipeThrough(new CompressionStream("gzip")),
        );
        return new Response(gz.body, {
          headers: { "content-type": "text/javascript", "content-encoding": "gzip" },
        });
      }
      case "/events":
        return new Response(
          new ReadableStream({
            start(c) {
              c.enqueue(enc.encode("data: first event\n\n"));
            },
          }),
          { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } },
        );
      case "/data.json":
        return Response.json({ who: "preview" });
      case "/message.txt":
        return new Response(await Deno.readTextFile(join(dir, "message.txt")), type("text/plain"));
      case "/flood": {
        // Sends as fast as its socket takes it, up to 400 MB, counting what left.
        const { socket, response } = Deno.upgradeWebSocket(req);
        const chunk = new Uint8Array(64 * 1024);
        socket.onopen = async () => {
          while (flood.sent < 400 * 1024 * 1024 && socket.readyState === WebSocket.OPEN) {
            if (socket.bufferedAmount > 1024 * 1024) {
              await new Promise((r) => setTimeout(r, 5));
              continue;
            }
            socket.send(chunk);
            flood.sent += chunk.byteLength;
          }
        };
        return response;
      }
      case "/__hmr":
      case "/echo": {
        const { socket, response } = Deno.upgradeWebSocket(req, {
          ...(req.headers.get("sec-websocket-protocol")?.includes("echo-v1")
            ? { protocol: "echo-v1" }
            : {}),
        });
        if (url.pathname === "/__hmr") {
          socket.onopen = () => sockets.add(socket);
          socket.onclose = () => sockets.delete(socket);
        } else {
          socket.onmessage = (ev) => {
            if (ev.data === "close-me") socket.close(4321, "asked to");
            else socket.send(ev.data);
          };
        }
        return response;
      }
    }
    return new Response("not found", { status: 404 });
  });
  return { server, seen, flood, port: server.addr.port };
}

interface World extends TunnelRig {
  dev: ReturnType<typeof startDevServer>;
  dir: string;
}

async function withWorld(
  options: { env?: Record<string, string>; port?: number },
  fn: (w: World) => Promise<void>,
): Promise<void> {
  const dir = await tempDir("baton-preview-");
  await Deno.writeTextFile(join(dir, "message.txt"), "first");
  const dev = startDevServer(dir);
  try {
    await withTunnelRunner((rig) => fn({ ...rig, dev, dir }), options);
  } finally {
    await dev.server.shutdown();
  }
}

/** A browser page signed in to the relay (its cookie, as the sign-in sets it). */
async function signedInPage(browser: Browser, w: World): Promise<Page> {
  const { page } = await newPage(browser);
  await page.context().addCookies(
    w.owner.cookie.split("; ").map((pair) => {
      const [name, ...rest] = pair.split("=");
      return {
        name: name!,
        value: rest.join("="),
        url: w.relay.url,
        httpOnly: true,
        sameSite: "Lax" as const,
      };
    }),
  );
  return page;
}

async function loadsFully(
  page: Page,
  url: string,
  relay?: string,
): Promise<Record<string, string>> {
  if (relay) await page.addInitScript(`window.RELAY = ${JSON.stringify(relay)}`);
  const res = await page.goto(url);
  assert.equal(res?.status(), 200, String(await res?.text()));
  await page.waitForFunction("document.getElementById('out').textContent === 'hello preview'");
  await page.waitForFunction("document.getElementById('probe').textContent !== '-'");
  // The style sheet came through (its colour applies).
  assert.equal(
    await page.evaluate("getComputedStyle(document.getElementById('out')).color"),
    "rgb(1, 2, 3)",
  );
  return JSON.parse((await page.textContent("#probe"))!);
}

/**
 * Chromium signed in as the owner, the dev server's page loaded through the
 * tunnel (told the relay's address when previews have an origin of their
 * own), and what its probe found.
 */
async function withLoadedPage(
  w: World,
  options: { ownOrigin: boolean },
  fn: (page: Page, probe: Record<string, string>) => Promise<void>,
): Promise<void> {
  const browser = await launchBrowser();
  try {
    const page = await signedInPage(browser, w);
    const probe = await loadsFully(
      page,
      `${w.relay.url}/api/tunnel/runner/${w.runnerId}/${w.dev.port}/`,
      options.ownOrigin ? w.relay.url : undefined,
    );
    await fn(page, probe);
  } finally {
    await browser.close();
  }
}

async function hotReloads(page: Page, w: World): Promise<void> {
  await page.waitForFunction("document.body.dataset.sse === 'first event'");
  await page.waitForFunction("document.body.dataset.hmr === 'open'");
  assert.equal(await page.textContent("#msg"), "first");
  await Deno.writeTextFile(join(w.dir, "message.txt"), "second");
  await page.waitForFunction("document.getElementById('msg').textContent === 'second'");
}

Deno.test("a dev server's page loads fully through the tunnel in Chromium, hot reload included, and cannot act as the person", async () => {
  await withWorld({}, async (w) => {
    await withLoadedPage(w, { ownOrigin: false }, async (page, probe) => {
      // The navigation was sent on to a preview address.
      assert.match(page.url(), /\/api\/tunnel\/g\/[A-Za-z0-9_-]{43}\/$/);
      // An opaque origin: no cookie to read, and /api answers nothing to it.
      assert.ok(probe.cookie === "" || probe.cookie!.startsWith("threw"), String(probe.cookie));
      assert.equal(probe.api, "blocked");
      await hotReloads(page, w);
      // The service never saw the person's cookie.
      assert.ok(w.dev.seen.length > 5);
      assert.ok(w.dev.seen.every((s) => s.cookie === null), JSON.stringify(w.dev.seen));
    });
  });
});

Deno.test("a preview address reaches its own port only, and nothing of the relay", async () => {
  await withWorld({}, async (w) => {
    const open = await navigateTunnel(w.owner, w.runnerId, w.dev.port, "/data.json");
    assert.equal(open.status, 303);
    const at = open.headers.get("location")!;
    const token = at.match(/^\/api\/tunnel\/g\/([A-Za-z0-9_-]{43})\/data\.json$/)?.[1];
    assert.ok(token, at);
    // No cookie needed there, and none forwarded.
    const data = await fetch(`${w.relay.url}${at}`);
    assert.deepEqual(await data.json(), { who: "preview" });
    assert.match(data.headers.get("content-security-policy") ?? "", /sandbox/);
    // The token is not a key: the API refuses it.
    const keyed: Record<string, string>[] = [{ "x-api-key": token! }, {
      authorization: `Bearer ${token}`,
    }];
    for (const headers of keyed) {
      const api = await fetch(`${w.relay.url}/api/sessions`, { headers });
      assert.equal(api.status, 401);
      await api.body?.cancel();
    }
    // A made-up or altered token: closed, whatever the port.
    const forged = await fetch(`${w.relay.url}/api/tunnel/g/${"A".repeat(43)}/`, {
      headers: { accept: "text/html" },
    });
    assert.equal(forged.status, 401);
    assert.match(await forged.text(), /open the port again/);
    // The rewrite put the page's absolute paths under the preview address (gzip undone).
    const lib = await fetch(`${w.relay.url}/api/tunnel/g/${token}/src/app.js`);
    assert.match(await lib.text(), new RegExp(`from "/api/tunnel/g/${token}/src/lib\\.js"`));
    const gz = await fetch(`${w.relay.url}/api/tunnel/g/${token}/src/lib.js`);
    assert.equal(gz.headers.get("content-encoding"), null);
    assert.equal(await gz.text(), `export const greet = (w) => "hello " + w;`);
    // A preflight of the sandboxed page is answered by the relay.
    const pre = await fetch(`${w.relay.url}/api/tunnel/g/${token}/data.json`, {
      method: "OPTIONS",
      headers: { "access-control-request-method": "PUT", origin: "null" },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get("access-control-allow-origin"), "*");
    // Signing out closes the person's preview addresses.
    const out = await fetch(`${w.relay.url}/api/auth/sign-out`, {
      method: "POST",
      headers: { cookie: w.owner.cookie, origin: w.relay.url, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(out.status, 200, await out.text());
    const after = await fetch(`${w.relay.url}${at}`);
    assert.equal(after.status, 401);
    assert.equal((await after.json()).error.code, "preview_expired");
  });
});

Deno.test("another site's page cannot open a WebSocket through the owner's tunnel", async () => {
  await withWorld({}, async (w) => {
    const res = await w.owner.web(`/api/tunnel/runner/${w.runnerId}/${w.dev.port}/echo`, {
      headers: {
        origin: "https://evil.example",
        upgrade: "websocket",
        connection: "Upgrade",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
      },
    });
    assert.equal(res.status, 403);
    assert.equal((await res.json()).error.code, "bad_origin");
  });
});

Deno.test("a WebSocket passes through the tunnel: echo, subprotocol, close code, 502 on a closed port", async () => {
  await withWorld({}, async (w) => {
    const at = await previewAddress(w.owner, w.runnerId, w.dev.port);
    const base = `${w.relay.url.replace(/^http/, "ws")}${at}`;
    const ws = new WebSocket(`${base}echo`, ["echo-v1"]);
    const got: (string | number)[] = [];
    const closed = new Promise<CloseEvent>((r) => ws.onclose = r);
    ws.binaryType = "arraybuffer";
    ws.onmessage = (ev) =>
      got.push(typeof ev.data === "string" ? ev.data : (ev.data as ArrayBuffer).byteLength);
    await new Promise((r, j) => {
      ws.onopen = r;
      ws.onerror = j;
    });
    assert.equal(ws.protocol, "echo-v1");
    ws.send("hello");
    ws.send(new Uint8Array(300_000));
    ws.send("ünïcödé");
    const deadline = Date.now() + 10_000;
    while (got.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(got, ["hello", 300_000, "ünïcödé"]);
    ws.send("close-me");
    const ev = await closed;
    assert.equal(ev.code, 4321);
    assert.equal(ev.reason, "asked to");

    // A message over the 1 MiB limit closes the socket with 1009.
    const big = new WebSocket(`${base}echo`);
    await new Promise((r) => big.onopen = r);
    const bigClosed = new Promise<CloseEvent>((r) => big.onclose = r);
    big.send(new Uint8Array(2 * 1024 * 1024));
    assert.equal((await bigClosed).code, 1009);

    // Nothing listens: the handshake is refused with 502.
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const closedPort = (l.addr as Deno.NetAddr).port;
    l.close();
    const res = await w.owner.web(`/api/tunnel/runner/${w.runnerId}/${closedPort}/ws`, {
      headers: {
        upgrade: "websocket",
        connection: "Upgrade",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
      },
    });
    assert.equal(res.status, 502);
    assert.equal((await res.json()).error.code, "port_closed");
  });
});

/** A port free now (the relay takes it next: its tunnel origin must name it). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

Deno.test("with BATON_TUNNEL_ORIGIN a preview runs in its own origin after a one-time handoff", async () => {
  const port = freePort();
  const origin = `http://localhost:${port}`;
  await withWorld({ env: { BATON_TUNNEL_ORIGIN: origin }, port }, async (w) => {
    await withLoadedPage(w, { ownOrigin: true }, async (page, probe) => {
      const at = new URL(page.url());
      assert.equal(at.origin, origin);
      assert.match(at.pathname, /^\/p\d+-[0-9a-f]{16}\/$/);
      // Its own origin: the relay's cookie is not there, and the relay's API answers it nothing.
      assert.equal(probe.cookie, "");
      assert.equal(probe.relay, "blocked");
      await hotReloads(page, w);
      assert.ok(w.dev.seen.every((s) => s.cookie === null), JSON.stringify(w.dev.seen));

      // The ticket was spent: replaying the handoff gets nothing.
      const ticketUrl = await previewAddress(w.owner, w.runnerId, w.dev.port);
      assert.ok(ticketUrl.startsWith(`${origin}/p`), ticketUrl);
      const first = await fetch(ticketUrl, { redirect: "manual" });
      assert.equal(first.status, 303);
      assert.match(first.headers.get("set-cookie") ?? "", /HttpOnly; SameSite=Lax/);
      const again = await fetch(ticketUrl, { redirect: "manual" });
      assert.equal(again.status, 401);
      await again.body?.cancel();
      // Without the tunnel's cookie the tunnel origin answers nothing; nor does it serve the relay.
      const bare = await fetch(`${origin}${at.pathname}data.json`);
      assert.equal(bare.status, 401);
      await bare.body?.cancel();
      const api = await fetch(`${origin}/api/sessions`, { headers: { cookie: w.owner.cookie } });
      assert.equal(api.status, 401);
      await api.body?.cancel();
    });
  });
});

Deno.test("a WebSocket reader that stops reading holds the service back, not the relay's memory", async () => {
  await withWorld({}, async (w) => {
    const path = `${await previewAddress(w.owner, w.runnerId, w.dev.port)}flood`;
    const before = rssOf(w.relay.proc.pid);
    // A client that completes the handshake and then never reads.
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: w.relay.port });
    try {
      await conn.write(enc.encode(
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${w.relay.port}\r\nUpgrade: websocket\r\n` +
          "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
          "Sec-WebSocket-Version: 13\r\n\r\n",
      ));
      const buf = new Uint8Array(4096);
      const n = await conn.read(buf);
      assert.match(new TextDecoder().decode(buf.subarray(0, n ?? 0)), /^HTTP\/1.1 101/);
      // The service writes while it can; then the chain of windows holds it.
      let last = -1;
      while (w.dev.flood.sent !== last) {
        last = w.dev.flood.sent;
        await new Promise((r) => setTimeout(r, 1000));
      }
      const grew = (rssOf(w.relay.proc.pid) - before) / (1024 * 1024);
      // Measured: the service stops after 10.4 MB (socket buffers of each hop,
      // the stream's 256 KiB window, the 256 KiB send buffers) and the relay
      // grows 24 MB; without the relay's send-buffer wait all 400 MB went
      // through and the relay held what the client did not read.
      assert.ok(w.dev.flood.sent < 100 * 1024 * 1024, `service sent ${w.dev.flood.sent} bytes`);
      assert.ok(grew < 48, `relay grew ${grew} MB`);
    } finally {
      conn.close();
    }
  });
});

Deno.test("a malformed BATON_TUNNEL_ORIGIN, or the relay's own host, stops the relay with one line", async () => {
  const home = await tempDir("baton-tunnel-origin-");
  const port = freePort();
  for (
    const [value, message] of [
      ["ftp://tunnel.example.com", /Invalid BATON_TUNNEL_ORIGIN: 'ftp:\/\/tunnel\.example\.com'/],
      [`http://127.0.0.1:${port}`, /is the relay's own host/],
    ] as const
  ) {
    const out = await baton(
      ["relay", "--port", String(port), "--data-dir", join(home, "data")],
      baseEnv(home, { BATON_TUNNEL_ORIGIN: value }),
    );
    assert.notEqual(out.code, 0);
    assert.match(out.stderr, message);
    assert.equal(out.stderr.trim().split("\n").length, 1, out.stderr);
  }
});

Deno.test("with a wildcard BATON_TUNNEL_ORIGIN each preview has a host of its own, served at /", async () => {
  const port = freePort();
  await withWorld(
    { env: { BATON_TUNNEL_ORIGIN: `http://*.localhost:${port}` }, port },
    async (w) => {
      // Chromium takes every *.localhost name to the loopback address.
      await withLoadedPage(w, { ownOrigin: true }, async (page, probe) => {
        const at = new URL(page.url());
        assert.match(at.host, new RegExp(`^p${w.dev.port}-[0-9a-f]{16}\\.localhost:${port}$`));
        assert.equal(at.pathname, "/");
        assert.equal(probe.cookie, "");
        assert.equal(probe.relay, "blocked");
        await hotReloads(page, w);
        // Nothing was rewritten: the service is at / of its own host.
        const js = await page.evaluate(`fetch("/src/app.js").then((r) => r.text())`);
        assert.match(String(js), /from "\/src\/lib\.js"/);
        // A path that starts with two slashes stays on the preview's host (no open redirect).
        const res = await page.goto(
          `${w.relay.url}/api/tunnel/runner/${w.runnerId}/${w.dev.port}//evil.example/x`,
        );
        assert.equal(new URL(page.url()).host, at.host);
        assert.equal(new URL(page.url()).pathname, "/evil.example/x");
        assert.equal(res?.status(), 404);
      });
    },
  );
});

/** A WebSocket service that accepts the handshake and then never reads. */
function startDeafService() {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  (async () => {
    for await (const conn of listener) {
      conns.push(conn);
      const buf = new Uint8Array(8192);
      let head = "";
      while (!head.includes("\r\n\r\n")) {
        const n = await conn.read(buf);
        if (n === null) break;
        head += new TextDecoder().decode(buf.subarray(0, n));
      }
      const key = head.match(/sec-websocket-key:\s*(\S+)/i)?.[1] ?? "";
      const digest = await crypto.subtle.digest(
        "SHA-1",
        enc.encode(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"),
      );
      const accept = btoa(String.fromCharCode(...new Uint8Array(digest)));
      await conn.write(enc.encode(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
      ));
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    close() {
      listener.close();
      for (const c of conns) c.close();
    },
  };
}

Deno.test("a WebSocket service that stops reading holds the browser back, not the relay's memory", async () => {
  await withWorld({}, async (w) => {
    const deaf = startDeafService();
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: w.relay.port });
    try {
      const at = await previewAddress(w.owner, w.runnerId, deaf.port);
      const before = rssOf(w.relay.proc.pid);
      await conn.write(enc.encode(
        `GET ${at}sink HTTP/1.1\r\nHost: 127.0.0.1:${w.relay.port}\r\n` +
          "Upgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      ));
      const buf = new Uint8Array(4096);
      const n = await conn.read(buf);
      assert.match(new TextDecoder().decode(buf.subarray(0, n ?? 0)), /^HTTP\/1.1 101/);
      // Binary frames of 64 KiB, masked with a zero key, written as fast as the relay takes them.
      const payload = 64 * 1024;
      const frame = new Uint8Array(2 + 8 + 4 + payload);
      frame.set([0x82, 0x80 | 127]);
      new DataView(frame.buffer).setBigUint64(2, BigInt(payload));
      let written = 0;
      const writing = (async () => {
        while (written < 400 * 1024 * 1024) {
          // A write may take part of the frame.
          for (let at = 0; at < frame.byteLength;) at += await conn.write(frame.subarray(at));
          written += payload;
        }
      })().catch(() => {});
      let last = -1;
      while (written !== last) {
        last = written;
        await Promise.race([writing, new Promise((r) => setTimeout(r, 1000))]);
      }
      const grew = (rssOf(w.relay.proc.pid) - before) / (1024 * 1024);
      // Measured: the browser gets 9.8 MB in (socket buffers, the 256 KiB
      // window and pending input), the relay grows 18 MB; without pausing the
      // browser's socket all 400 MB went in and the relay grew 451 MB.
      assert.ok(written < 100 * 1024 * 1024, `the browser wrote ${written} bytes`);
      assert.ok(grew < 48, `relay grew ${grew} MB`);
    } finally {
      conn.close();
      deaf.close();
    }
  });
});
