import assert from "node:assert/strict";
import { type AcceptRunnerOptions, acceptRunnerSocket } from "./runner_socket.ts";
import type { ChannelSocket } from "./ws_transport.ts";

/** Drives `socket` for `hub`, where every key belongs to one user with full scope. */
function acceptWithAnyKey(socket: ChannelSocket, hub: AcceptRunnerOptions["hub"]): void {
  const owner = { userId: "u1", keyId: null, scope: "full", runnerId: null };
  acceptRunnerSocket(socket, {
    hub,
    calls: {} as AcceptRunnerOptions["calls"],
    principalFromKey: () =>
      Promise.resolve(
        owner as unknown as Awaited<ReturnType<AcceptRunnerOptions["principalFromKey"]>>,
      ),
    helloTimeoutMs: 60_000,
  });
}

Deno.test("a hello refused with a message of many non-ASCII characters is still closed", async () => {
  const sent: { t: string; code: string; message: string }[] = [];
  let closed: { code: number; reason: string } | null = null;
  const socket = {
    readyState: WebSocket.OPEN,
    bufferedAmount: 0,
    send: (f: string) => sent.push(JSON.parse(f)),
    close(code: number, reason: string) {
      // As ws does: a close frame's reason holds at most 123 bytes.
      if (new TextEncoder().encode(reason).byteLength > 123) throw new RangeError("Too long");
      closed = { code, reason };
    },
    onmessage: null,
    onclose: null,
    onerror: null,
  } as unknown as ChannelSocket;
  acceptRunnerSocket(socket, {
    hub: {} as AcceptRunnerOptions["hub"],
    calls: {} as AcceptRunnerOptions["calls"],
    principalFromKey: () => Promise.resolve(null),
    helloTimeoutMs: 60_000,
  });
  socket.onmessage!({ data: JSON.stringify({ t: "hello", v: "é".repeat(200) }) });
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(sent[0]?.code, "protocol_version");
  assert.ok(sent[0]!.message.length < 100, "the version is not echoed whole");
  assert.equal((closed as { code: number } | null)?.code, 4400);
});

Deno.test("a message whose type is an object with a toString that is no function is answered, not thrown", () => {
  const sent: { t: string; code?: string }[] = [];
  const socket = {
    readyState: WebSocket.OPEN,
    send: (f: string) => sent.push(JSON.parse(f)),
    close: () => {},
  } as unknown as ChannelSocket;
  // The socket of a runner whose hello was accepted: only its message handler is exercised.
  const hub = {
    store: {
      runners: { get: () => null, upsert: () => {} },
      keys: { bindRunner: (_: string, id: string) => id },
    },
    attachRunner: () => ({ acked: {}, ended: [] }),
    detachRunner: () => {},
    ingest: () => {},
    log: () => {},
  } as unknown as AcceptRunnerOptions["hub"];
  acceptWithAnyKey(socket, hub);
  return (async () => {
    socket.onmessage!({ data: JSON.stringify({ t: "hello", v: 1, apiKey: "k", runnerId: "r1" }) });
    for (let i = 0; i < 5 && !sent.some((f) => f.t === "welcome"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    assert.equal(sent.at(-1)?.t, "welcome");
    socket.onmessage!({ data: '{"t":{"toString":"/"}}' });
    assert.equal(sent.at(-1)?.code, "unknown_type");
  })();
});

Deno.test("a runner's messages are handled in the order they came while one waits for the store", async () => {
  const sent: { t: string; [k: string]: unknown }[] = [];
  const socket = {
    readyState: WebSocket.OPEN,
    send: (f: string) => sent.push(JSON.parse(f)),
    close: () => {},
  } as unknown as ChannelSocket;
  const handled: string[] = [];
  const waits: (() => void)[] = [];
  /** Takes a batch; the first one of a session waits (it is loaded from the store). */
  const loaded = new Set<string>();
  const hub = {
    store: {
      runners: { get: () => Promise.resolve(undefined), upsert: () => Promise.resolve() },
      keys: { bindRunner: (_: string, id: string) => Promise.resolve(id) },
    },
    // The welcome waits for the store too (its acked seqs).
    attachRunner: () =>
      new Promise((resolve) => waits.push(() => resolve({ acked: { s1: 0 }, ended: [] }))),
    detachRunner: () => {},
    ingest: (_: unknown, msg: { sessionId: string; events: { seq: number }[] }) => {
      const seqs = msg.events.map((e) => e.seq).join(",");
      if (loaded.has(msg.sessionId)) {
        handled.push(`${msg.sessionId}:${seqs}`);
        return;
      }
      loaded.add(msg.sessionId);
      return new Promise<void>((resolve) =>
        waits.push(() => {
          handled.push(`${msg.sessionId}:${seqs}`);
          resolve();
        })
      );
    },
    log: () => {},
  } as unknown as AcceptRunnerOptions["hub"];
  acceptWithAnyKey(socket, hub);
  const turn = () => new Promise((resolve) => setTimeout(resolve, 0));
  const events = (sessionId: string, ...seqs: number[]) =>
    JSON.stringify({
      t: "events",
      sessionId,
      events: seqs.map((seq) => ({ seq, ts: 1, e: { type: "x" } })),
    });
  socket.onmessage!({ data: JSON.stringify({ t: "hello", v: 1, apiKey: "k", runnerId: "r1" }) });
  for (let i = 0; i < 5 && waits.length === 0; i++) await turn();
  assert.equal(waits.length, 1, "the welcome waits for the store");
  // A runner that does not wait for its welcome: its messages queue behind it.
  socket.onmessage!({ data: events("s1", 1, 2) });
  socket.onmessage!({ data: events("s1", 3) });
  socket.onmessage!({ data: JSON.stringify({ t: "ping" }) });
  await turn();
  assert.deepEqual(sent.map((m) => m.t), [], "nothing before the welcome");
  waits.shift()!();
  await turn();
  assert.deepEqual(sent.map((m) => m.t), ["welcome"]);
  assert.deepEqual(handled, [], "the first batch of s1 waits for s1 to load");
  waits.shift()!();
  await turn();
  assert.deepEqual(handled, ["s1:1,2", "s1:3"], "in the order they came");
  assert.deepEqual(sent.map((m) => m.t), ["welcome", "pong"], "the ping after them");
  // With nothing waiting, a message is handled at once.
  socket.onmessage!({ data: events("s1", 4) });
  assert.deepEqual(handled.at(-1), "s1:4");
});
