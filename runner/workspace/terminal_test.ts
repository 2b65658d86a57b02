import assert from "node:assert/strict";
import { DEFAULT_WINDOW, type MuxStream, StreamMux } from "../../shared/streams.ts";
import { encodeTerminalMsg, TerminalMsg } from "../../shared/terminal_api.ts";
import { Scrollback, TerminalManager } from "./terminal.ts";

/** Two muxes wired back to back; the runner side attaches terminal streams. */
function pair(manager: TerminalManager) {
  const relay: StreamMux = new StreamMux({
    dialer: true,
    send: (f) => queueMicrotask(() => runner.receive(f)),
  });
  const runner: StreamMux = new StreamMux({
    dialer: false,
    send: (f) => queueMicrotask(() => relay.receive(f)),
    onStream: (s, h) => manager.attach(s, JSON.parse(new TextDecoder().decode(h)).terminalId),
  });
  return relay;
}

/** A viewer: collects output text, sends input and resizes. */
function view(relay: StreamMux, terminalId: string) {
  const stream: MuxStream = relay.open(
    new TextEncoder().encode(JSON.stringify({ kind: "terminal", terminalId })),
  );
  let out = "";
  const dec = new TextDecoder();
  const done = (async () => {
    try {
      for await (const c of stream.readable) out += dec.decode(c, { stream: true });
    } catch { /* reset */ }
  })();
  const writer = stream.writable.getWriter();
  return {
    stream,
    done,
    get out() {
      return out;
    },
    send: (b: Uint8Array) => writer.write(encodeTerminalMsg(TerminalMsg.input, b)),
    type: (s: string) =>
      writer.write(encodeTerminalMsg(TerminalMsg.input, new TextEncoder().encode(s))),
    resize: (cols: number, rows: number) => {
      const b = new Uint8Array(4);
      new DataView(b.buffer).setUint16(0, cols);
      new DataView(b.buffer).setUint16(2, rows);
      return writer.write(encodeTerminalMsg(TerminalMsg.resize, b));
    },
    async waitFor(re: RegExp, ms = 10_000) {
      const end = Date.now() + ms;
      while (!re.test(out)) {
        if (Date.now() > end) {
          throw new Error(`timed out waiting for ${re}; got ${JSON.stringify(out)}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

async function withManager(fn: (m: TerminalManager, root: string) => Promise<void>) {
  const root = await Deno.realPath(await Deno.makeTempDir());
  const m = new TerminalManager({ roots: [root], home: root, log: () => {}, shell: "/bin/bash" });
  try {
    await fn(m, root);
  } finally {
    await m.closeAll();
    await Deno.remove(root, { recursive: true });
  }
}

Deno.test("terminal: echo round trip runs in the default folder", async () => {
  await withManager(async (m, root) => {
    const info = await m.open({});
    assert.equal(info.cwd, root);
    const v = view(pair(m), info.terminalId);
    // "é" split across two messages arrives whole.
    const bytes = new TextEncoder().encode("echo caf\u00e9; ");
    await v.send(bytes.slice(0, -3));
    await v.send(bytes.slice(-3));
    await v.type("echo hel''lo; pwd\r");
    await v.waitFor(/caf\u00e9\r\n/);
    await v.waitFor(/hello\r\n/);
    await v.waitFor(new RegExp(root.replaceAll("/", "\\/")));
  });
});

Deno.test("terminal: resize is seen by stty size", async () => {
  await withManager(async (m) => {
    const info = await m.open({ cols: 100, rows: 30 });
    const v = view(pair(m), info.terminalId);
    await v.type("stty size\r");
    await v.waitFor(/30 100/);
    await v.resize(132, 43);
    await v.type("stty size\r");
    await v.waitFor(/43 132/);
    assert.equal(m.list()[0]!.cols, 132);
  });
});

Deno.test("terminal: a viewer that leaves keeps it alive; the next one gets the scrollback", async () => {
  await withManager(async (m) => {
    const info = await m.open({});
    const relay = pair(m);
    const a = view(relay, info.terminalId);
    await a.type("echo mark$((6*7))\r");
    await a.waitFor(/mark42/);
    a.stream.reset("gone");
    await a.done;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(m.size, 1);
    const b = view(relay, info.terminalId);
    await b.waitFor(/mark42/);
    await b.type("echo again\r");
    await b.waitFor(/again\r\n/);
  });
});

Deno.test("terminal: exit ends it and its viewer's stream", async () => {
  await withManager(async (m) => {
    const info = await m.open({});
    const v = view(pair(m), info.terminalId);
    await v.type("exit\r");
    await v.done;
    await m.get(info.terminalId)?.exited;
    assert.equal(m.size, 0);
    assert.deepEqual(m.list(), []);
  });
});

Deno.test("terminal: close ends it; unknown ids, bad folders and the cap are refused", async () => {
  await withManager(async (m) => {
    const info = await m.open({});
    await m.request("terminal_close", { terminalId: info.terminalId });
    assert.equal(m.size, 0);
    await assert.rejects(m.request("terminal_close", { terminalId: info.terminalId }), /not found/);
    await assert.rejects(m.open({ cwd: "/" }), (e: Error & { code?: string }) => {
      assert.equal(e.code, "cwd_outside_roots");
      return true;
    });
    await assert.rejects(m.open({ cols: 0 }), /cols and rows/);
    const small = new TerminalManager({ roots: null, home: "/tmp", log: () => {}, max: 1 });
    // Two at once cannot both pass the cap.
    const both = await Promise.allSettled([small.open({}), small.open({})]);
    assert.deepEqual(both.map((r) => r.status).sort(), ["fulfilled", "rejected"]);
    await assert.rejects(small.open({}), /At most 1/);
    await small.closeAll();
  });
});

Deno.test("terminal: a viewer that stops reading pauses its PTY, holding at most the window", async () => {
  await withManager(async (m) => {
    const noisy = await m.open({});
    const quiet = await m.open({});
    const relay = pair(m);
    // A viewer that never reads its stream.
    const stalled = relay.open(
      new TextEncoder().encode(JSON.stringify({ kind: "terminal", terminalId: noisy.terminalId })),
    );
    const w = stalled.writable.getWriter();
    await w.write(encodeTerminalMsg(TerminalMsg.input, new TextEncoder().encode("yes\r")));
    const t = m.get(noisy.terminalId)!;
    const end = Date.now() + 10_000;
    while (!t.paused) {
      if (Date.now() > end) throw new Error("the PTY was never paused");
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(t.paused);
    assert.ok(stalled.queuedBytes <= DEFAULT_WINDOW, `${stalled.queuedBytes} bytes queued`);
    // Another terminal on the same connection is not held up.
    const v = view(relay, quiet.terminalId);
    await v.type("echo free\r");
    await v.waitFor(/free\r\n/);
    // Stop `yes` and let go.
    const reader = stalled.readable.getReader();
    for (let i = 0; i < 20; i++) await reader.read();
    await w.write(encodeTerminalMsg(TerminalMsg.input, new TextEncoder().encode("\x03")));
    reader.releaseLock();
    stalled.reset("done");
  });
});

Deno.test("scrollback keeps the last 64 KiB", () => {
  const s = new Scrollback(10);
  s.push(new TextEncoder().encode("abcdef"));
  s.push(new TextEncoder().encode("ghijkl"));
  assert.equal(new TextDecoder().decode(s.snapshot()), "cdefghijkl");
  s.push(new TextEncoder().encode("0123456789XY"));
  assert.equal(new TextDecoder().decode(s.snapshot()), "23456789XY");
});
