/**
 * The web terminal end to end: a real relay and runner process, a real PTY
 * on the runner, and a WebSocket client carrying the browser's cookie.
 */
import assert from "node:assert/strict";
import WebSocket from "ws";
import { json, signUp, type User } from "./harness/client.ts";
import { RelayProcess as Relay, type RunnerProcess } from "./harness/procs.ts";
import { runnerIdOf, startTerminalRunner } from "./harness/tunnel_world.ts";

interface World {
  relay: Relay;
  owner: User;
  stranger: User;
  runnerId: string;
  root: string;
  /** A cookie request as the browser makes it (with its Origin). */
  web: (user: User, path: string, init?: RequestInit) => Promise<Response>;
  runner: () => RunnerProcess;
}

async function withWorld(fn: (w: World) => Promise<void>): Promise<void> {
  const relay = await Relay.start({ args: ["--allow-signup"] });
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "baton-term-root-" }));
  let runner: RunnerProcess | null = null as RunnerProcess | null;
  try {
    const owner = await signUp(relay.url);
    const stranger = await signUp(relay.url);
    runner = await startTerminalRunner(relay.url, owner, root);
    const runnerId = await runnerIdOf(owner);
    const web = (user: User, path: string, init: RequestInit = {}) =>
      user.web(path, {
        ...init,
        headers: { origin: relay.url, ...(init.headers as Record<string, string> | undefined) },
      });
    await fn({ relay, owner, stranger, runnerId, root, web, runner: () => runner! });
  } catch (err) {
    console.error(relay.proc.output());
    if (runner) console.error(runner.proc.output());
    throw err;
  } finally {
    await runner?.stop();
    await relay.stop();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

/** A browser attached to a terminal: output text, keystrokes, resizes. */
class Attached {
  out = "";
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly #dec = new TextDecoder();
  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data, isBinary) => {
      if (isBinary) this.out += this.#dec.decode(data as Uint8Array, { stream: true });
    });
    this.closed = new Promise((r) =>
      ws.on("close", (code, reason) => r({ code, reason: String(reason) }))
    );
  }

  static open(w: World, user: User, runnerId: string, terminalId: string): Promise<Attached> {
    const url = `${w.relay.url.replace(/^http/, "ws")}/_terminal?runnerId=${runnerId}` +
      `&terminalId=${terminalId}`;
    const ws = new WebSocket(url, { headers: { cookie: user.cookie, origin: w.relay.url } });
    return new Promise((resolve, reject) => {
      ws.once("open", () => resolve(new Attached(ws)));
      ws.once("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
      ws.once("error", reject);
    });
  }

  type(s: string): void {
    this.ws.send(new TextEncoder().encode(s));
  }

  resize(cols: number, rows: number): void {
    this.ws.send(JSON.stringify({ t: "resize", cols, rows }));
  }

  async waitFor(re: RegExp, ms = 15_000): Promise<void> {
    const end = Date.now() + ms;
    while (!re.test(this.out)) {
      if (Date.now() > end) throw new Error(`no ${re} in ${JSON.stringify(this.out.slice(-500))}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  close(): void {
    this.ws.close();
  }
}

async function open(w: World, body: Record<string, unknown> = {}) {
  return await w.web(
    w.owner,
    "/api/runners/terminal",
    json("POST", { runnerId: w.runnerId, ...body }),
  );
}

Deno.test("web terminal: open, attach with the cookie, type, resize, reattach, close", async () => {
  await withWorld(async (w) => {
    const res = await open(w, { cols: 100, rows: 30 });
    assert.equal(res.status, 200, await res.clone().text());
    const t = await res.json();
    assert.equal(t.ok, true);
    assert.equal(t.runnerId, w.runnerId);
    assert.equal(t.cwd, w.root);
    assert.match(t.terminalId, /^t_/);

    const a = await Attached.open(w, w.owner, w.runnerId, t.terminalId);
    a.type("echo hel''lo; stty size\r");
    await a.waitFor(/hello\r\n/);
    await a.waitFor(/30 100/);
    a.resize(120, 40);
    a.type("stty size\r");
    await a.waitFor(/40 120/);
    a.type("echo mark$((6*7))\r");
    await a.waitFor(/mark42/);

    // The viewer leaves; the terminal stays, and the next viewer sees what it missed.
    a.close();
    await a.closed;
    const list = await (await w.web(w.owner, `/api/runners/${w.runnerId}/terminals`)).json();
    assert.equal(list.terminals.length, 1);
    assert.equal(list.terminals[0].terminalId, t.terminalId);
    assert.equal(list.terminals[0].cols, 120);
    const b = await Attached.open(w, w.owner, w.runnerId, t.terminalId);
    await b.waitFor(/mark42/);
    b.type("echo again\r");
    await b.waitFor(/again\r\n/);

    // Closing it ends the attached viewer's socket and removes it from the list.
    const del = await w.web(w.owner, `/api/runners/${w.runnerId}/terminals/${t.terminalId}`, {
      method: "DELETE",
    });
    assert.equal(del.status, 200);
    const ended = await b.closed;
    assert.equal(ended.code, 1000);
    const after = await (await w.web(w.owner, `/api/runners/${w.runnerId}/terminals`)).json();
    assert.deepEqual(after.terminals, []);
    const gone = await w.web(w.owner, `/api/runners/${w.runnerId}/terminals/${t.terminalId}`, {
      method: "DELETE",
    });
    assert.equal(gone.status, 404);
    await gone.body?.cancel();
  });
});

Deno.test("web terminal: exit ends it; a folder outside the roots and another user are refused", async () => {
  await withWorld(async (w) => {
    const outside = await open(w, { cwd: "/" });
    assert.equal(outside.status, 400);
    assert.equal((await outside.json()).error.code, "cwd_outside_roots");
    const bad = await open(w, { cols: 0 });
    assert.equal(bad.status, 400);
    await bad.body?.cancel();

    const t = await (await open(w)).json();
    // Another user: the runner and its terminal do not exist for them, on every route.
    const foreign = await w.web(
      w.stranger,
      "/api/runners/terminal",
      json("POST", {
        runnerId: w.runnerId,
      }),
    );
    assert.equal(foreign.status, 404);
    await foreign.body?.cancel();
    const list = await w.web(w.stranger, `/api/runners/${w.runnerId}/terminals`);
    assert.equal(list.status, 404);
    await list.body?.cancel();
    const del = await w.web(w.stranger, `/api/runners/${w.runnerId}/terminals/${t.terminalId}`, {
      method: "DELETE",
    });
    assert.equal(del.status, 404);
    await del.body?.cancel();
    await assert.rejects(Attached.open(w, w.stranger, w.runnerId, t.terminalId), /status 404/);
    // An API key does not attach (the browser's cookie only).
    const keyed = new WebSocket(
      `${
        w.relay.url.replace(/^http/, "ws")
      }/_terminal?runnerId=${w.runnerId}&terminalId=${t.terminalId}`,
      { headers: { "x-api-key": w.owner.apiKey, origin: w.relay.url } },
    );
    const status = await new Promise((r) => {
      keyed.once("unexpected-response", (_q, res) => r(res.statusCode));
      keyed.once("open", () => r("open"));
    });
    assert.equal(status, 401);
    keyed.on("error", () => {});
    keyed.terminate();
    // An unknown terminal on the owner's runner closes the socket with 4404.
    const unknown = await Attached.open(w, w.owner, w.runnerId, "t_nosuchterminal");
    assert.equal((await unknown.closed).code, 4404);

    // A full key may open and list; a read-only or runner-bound key may not.
    const byKey = await w.owner.api(
      "/api/runners/terminal",
      json("POST", { runnerId: w.runnerId }),
    );
    assert.equal(byKey.status, 200);
    const keyed2 = await byKey.json();
    for (const scope of [{ scope: "read" }, { runnerId: w.runnerId }]) {
      const made = await w.owner.api("/api/keys", json("POST", { name: "limited", ...scope }));
      assert.equal(made.status, 201);
      const { key } = await made.json();
      const headers = { "x-api-key": key };
      for (
        const [path, init] of [
          ["/api/runners/terminal", json("POST", { runnerId: w.runnerId }, headers)],
          [`/api/runners/${w.runnerId}/terminals`, { headers }],
        ] as const
      ) {
        const res = await fetch(`${w.relay.url}${path}`, init);
        assert.equal(res.status, 403, `${JSON.stringify(scope)} ${path}`);
        assert.equal((await res.json()).error.code, "forbidden_scope");
      }
    }
    const closedByKey = await w.owner.api(
      `/api/runners/${w.runnerId}/terminals/${keyed2.terminalId}`,
      { method: "DELETE" },
    );
    assert.equal(closedByKey.status, 200);
    await closedByKey.body?.cancel();

    const a = await Attached.open(w, w.owner, w.runnerId, t.terminalId);
    a.type("exit\r");
    assert.equal((await a.closed).code, 1000);
    const after = await (await w.web(w.owner, `/api/runners/${w.runnerId}/terminals`)).json();
    assert.deepEqual(after.terminals, []);
  });
});

Deno.test("web terminal: the runner stopping ends its shells", async () => {
  await withWorld(async (w) => {
    const t = await (await open(w)).json();
    const a = await Attached.open(w, w.owner, w.runnerId, t.terminalId);
    a.type("echo pid=$$\r");
    await a.waitFor(/pid=\d+\r\n/);
    const pid = Number(a.out.match(/pid=(\d+)\r\n/)![1]);
    assert.ok(await Deno.stat(`/proc/${pid}`).then(() => true, () => false));
    await w.runner().stop();
    const end = Date.now() + 10_000;
    while (await Deno.stat(`/proc/${pid}`).then(() => true, () => false)) {
      if (Date.now() > end) throw new Error(`shell ${pid} outlived its runner`);
      await new Promise((r) => setTimeout(r, 50));
    }
    a.close();
  });
});

function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  return Number(m![1]) * 1024;
}

Deno.test("web terminal: a browser that stops reading a flood leaves the relay's memory flat", async () => {
  await withWorld(async (w) => {
    const t = await (await open(w)).json();
    const a = await Attached.open(w, w.owner, w.runnerId, t.terminalId);
    a.type("echo ready\r");
    await a.waitFor(/ready\r\n/);
    const before = rssOf(w.relay.proc.pid);
    // The browser stops reading its socket, while the shell writes as fast as it can.
    (a.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
    a.type("yes 0123456789abcdefghijklmnopqrstuvwxyz\r");
    let peak = before;
    for (let i = 0; i < 30; i++) {
      await new Promise((r) => setTimeout(r, 100));
      peak = Math.max(peak, rssOf(w.relay.proc.pid));
    }
    const grown = peak - before;
    assert.ok(grown < 24 * 1024 * 1024, `relay RSS grew ${(grown / 1048576).toFixed(1)} MiB`);
    // Another viewer on the same runner still works.
    const other = await (await open(w)).json();
    const b = await Attached.open(w, w.owner, w.runnerId, other.terminalId);
    b.type("echo free\r");
    await b.waitFor(/free\r\n/);
    b.close();
    a.ws.terminate();
  });
});

Deno.test("web terminal: a reattach replays the last 64 KiB of output, not more", async () => {
  await withWorld(async (w) => {
    const t = await (await open(w)).json();
    const a = await Attached.open(w, w.owner, w.runnerId, t.terminalId);
    // ~290 KB of numbered lines, then a marker: far more than the scrollback keeps.
    a.type("seq -w 1 40000 | sed 's/^/line-/'; echo end-of-$((3*5))\r");
    await a.waitFor(/end-of-15\r\n/, 30_000);
    a.close();
    await a.closed;

    const b = await Attached.open(w, w.owner, w.runnerId, t.terminalId);
    await b.waitFor(/end-of-15\r\n/);
    await new Promise((r) => setTimeout(r, 500));
    const replayed = new TextEncoder().encode(b.out).byteLength;
    assert.ok(replayed <= 64 * 1024, `replayed ${replayed} bytes`);
    assert.ok(replayed > 60 * 1024, `replayed only ${replayed} bytes`);
    assert.match(b.out, /line-40000\r\n/);
    assert.doesNotMatch(b.out, /line-00001\r\n/);
    b.close();
  });
});
