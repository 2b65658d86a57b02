import assert from "node:assert/strict";
import {
  decodeFrame,
  encodeFrame,
  FrameKind,
  MAX_DATA_BYTES,
  type MuxStream,
  StreamMux,
  StreamResetError,
} from "./streams.ts";
import { pipeBytes } from "./stream_pipe.ts";

/** Two multiplexers wired in memory, frames delivered asynchronously as a socket would. */
function pair(opts: { window?: number; maxStreams?: number } = {}) {
  const accepted: { stream: MuxStream; header: string }[] = [];
  const waiting: ((s: MuxStream) => void)[] = [];
  let taken = 0;
  let framesToB = 0;
  let bytesToB = 0;
  let creditsToA = 0;
  const dataSizesToB: number[] = [];
  /** The size of the buffer behind each data frame (what the frame holds while it waits). */
  const dataBuffersToB: number[] = [];
  const a: StreamMux = new StreamMux({
    dialer: true,
    ...opts,
    send: (f) => {
      framesToB++;
      bytesToB += f.byteLength;
      if (f[0] === FrameKind.data) {
        dataSizesToB.push(f.byteLength - 5);
        dataBuffersToB.push(f.buffer.byteLength);
      }
      queueMicrotask(() => b.receive(f));
    },
  });
  const b: StreamMux = new StreamMux({
    dialer: false,
    ...opts,
    send: (f) => {
      if (f[0] === FrameKind.credit) creditsToA++;
      queueMicrotask(() => a.receive(f));
    },
    onStream: (stream, header) => {
      accepted.push({ stream, header: new TextDecoder().decode(header) });
      if (waiting.length > 0 && accepted.length === taken - waiting.length + 1) {
        waiting.shift()!(stream);
      }
    },
  });
  return {
    a,
    b,
    accepted,
    stats: () => ({ framesToB, bytesToB, creditsToA, dataSizesToB, dataBuffersToB }),
    next: () => {
      const i = taken++;
      return i < accepted.length
        ? Promise.resolve(accepted[i]!.stream)
        : new Promise<MuxStream>((r) => waiting.push(r));
    },
  };
}

const enc = (s: string) => new TextEncoder().encode(s);
const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

async function readAll(stream: MuxStream): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream.readable).arrayBuffer());
}

Deno.test("frames encode kind, a big-endian stream id and the payload", () => {
  const f = encodeFrame({ kind: FrameKind.data, streamId: 0x01020304, bytes: enc("hi") });
  assert.deepEqual([...f], [2, 1, 2, 3, 4, 104, 105]);
  const back = decodeFrame(f)!;
  assert.equal(back.kind, FrameKind.data);
  assert.equal(back.streamId, 0x01020304);
  assert.equal(new TextDecoder().decode(back.bytes), "hi");
  assert.equal(decodeFrame(new Uint8Array([9, 0, 0, 0, 1])), null);
  assert.equal(decodeFrame(new Uint8Array([1, 0])), null);
});

Deno.test("a stream carries its header, bytes both ways and ends both ways", async () => {
  const { a, b, next } = pair();
  const s = a.open(enc("GET /"));
  const peer = await next();
  const w = s.writable.getWriter();
  const big = crypto.getRandomValues(new Uint8Array(60_000));
  const payload = new Uint8Array(1_000_000);
  for (let i = 0; i < payload.length; i += big.length) {
    payload.set(big.subarray(0, payload.length - i), i);
  }
  const writing = (async () => {
    await w.write(payload);
    await w.close();
  })();
  const echoed = (async () => {
    const got = await readAll(peer);
    const pw = peer.writable.getWriter();
    await pw.write(got.subarray(0, 10));
    await pw.close();
    return got;
  })();
  const got = await echoed;
  await writing;
  assert.equal(got.byteLength, payload.byteLength);
  assert.deepEqual(got, payload);
  const back = await readAll(s);
  assert.deepEqual(back, payload.subarray(0, 10));
  await s.closed;
  await peer.closed;
  assert.equal(a.size, 0);
  assert.equal(b.size, 0);
});

Deno.test("a fast producer facing a stalled reader stops at the window", async () => {
  const window = 64 * 1024;
  const { a, next, stats } = pair({ window });
  const s = a.open(enc("x"));
  const peer = await next();
  const w = s.writable.getWriter();
  let written = 0;
  const chunk = new Uint8Array(16 * 1024);
  // The producer writes as fast as it is let; nobody reads on the other side.
  (async () => {
    try {
      for (;;) {
        await w.write(chunk);
        written += chunk.byteLength;
      }
    } catch { /* reset at the end */ }
  })();
  await tick(50);
  // What crossed is the window, and the receiver holds no more than that.
  assert.ok(stats().bytesToB <= window + 100 * 10, `sent ${stats().bytesToB}`);
  assert.ok(peer.queuedBytes <= window);
  assert.ok(written <= window + chunk.byteLength, `written ${written}`);
  // Reading resumes it.
  const r = peer.readable.getReader();
  let read = 0;
  while (read < 4 * window) read += (await r.read()).value!.byteLength;
  assert.ok(written >= 3 * window);
  s.reset("done");
  await tick(10);
  assert.equal(a.size, 0);
});

Deno.test("a stalled stream holds up no other stream", async () => {
  const { a, next } = pair({ window: 32 * 1024 });
  const stalled = a.open(enc("stalled"));
  await next();
  const sw = stalled.writable.getWriter();
  sw.write(new Uint8Array(1024 * 1024)).catch(() => {});
  const other = a.open(enc("other"));
  const otherPeer = await next();
  const ow = other.writable.getWriter();
  const data = new Uint8Array(500_000).fill(7);
  await Promise.all([ow.write(data).then(() => ow.close()), readAll(otherPeer)]).then(([, got]) =>
    assert.equal(got.byteLength, data.byteLength)
  );
  a.close("test over");
});

Deno.test("many concurrent streams each arrive whole", async () => {
  const { a, next } = pair({ window: 16 * 1024 });
  const n = 100;
  const sizes = Array.from({ length: n }, (_, i) => 1000 + i * 997);
  const opened = sizes.map((size, i) => {
    const s = a.open(enc(String(i)));
    const w = s.writable.getWriter();
    const bytes = new Uint8Array(size).fill(i);
    return w.write(bytes).then(() => w.close());
  });
  const got = await Promise.all(
    sizes.map(async () => {
      const peer = await next();
      return await readAll(peer);
    }),
  );
  await Promise.all(opened);
  for (let i = 0; i < n; i++) {
    assert.equal(got[i]!.byteLength, sizes[i]);
    assert.ok(got[i]!.every((b) => b === i));
  }
});

Deno.test("a reset reaches the peer's reader and writer, and frees the slot", async () => {
  const { a, b, next } = pair();
  const s = a.open(enc("x"));
  const peer = await next();
  const reading = readAll(peer);
  s.reset("gone away");
  await assertRejectsWith(reading, "gone away");
  await assertRejectsWith(peer.writable.getWriter().write(enc("late")), "gone away");
  await tick();
  assert.equal(a.size, 0);
  assert.equal(b.size, 0);
});

Deno.test("closing the connection resets every open stream and refuses new ones", async () => {
  const { a, next } = pair();
  const s1 = a.open(enc("1"));
  const s2 = a.open(enc("2"));
  await next();
  await next();
  const r1 = readAll(s1);
  const w2 = s2.writable.getWriter().write(new Uint8Array(10 * 1024 * 1024));
  a.close("connection lost");
  await assertRejectsWith(r1, "connection lost");
  await assertRejectsWith(w2, "connection lost");
  assert.throws(() => a.open(enc("3")), StreamResetError);
});

Deno.test("the number of open streams is capped on both sides", async () => {
  const { a, b, next, accepted } = pair({ maxStreams: 3 });
  for (let i = 0; i < 3; i++) a.open(enc(String(i)));
  assert.throws(() => a.open(enc("4")), RangeError);
  await next();
  // A peer that ignores the cap gets its extra stream reset.
  b.receive(encodeFrame({ kind: FrameKind.open, streamId: 101, bytes: enc("extra") }));
  assert.equal(accepted.length, 3);
  assert.equal(b.size, 3);
});

Deno.test("data beyond the credit given resets the stream", async () => {
  const { a, b, next } = pair({ window: 1024 });
  void b;
  const s = a.open(enc("x"));
  const peer = await next();
  const reading = readAll(peer);
  b.receive(encodeFrame({ kind: FrameKind.data, streamId: s.id, bytes: new Uint8Array(2048) }));
  await assertRejectsWith(reading, "flow_control");
  void a;
});

Deno.test("data frames are at most MAX_DATA_BYTES", async () => {
  const sizes: number[] = [];
  const b = new StreamMux({ dialer: false, send: () => {}, onStream: () => {} });
  const a = new StreamMux({
    dialer: true,
    window: 1024 * 1024,
    send: (f) => {
      const d = decodeFrame(f)!;
      if (d.kind === FrameKind.data) sizes.push(d.bytes.byteLength);
      b.receive(f);
    },
  });
  const s = a.open(enc("x"));
  await s.writable.getWriter().write(new Uint8Array(300_000));
  assert.ok(sizes.every((n) => n <= MAX_DATA_BYTES));
  assert.equal(sizes.reduce((x, y) => x + y, 0), 300_000);
});

async function assertRejectsWith(p: Promise<unknown>, text: string): Promise<void> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof StreamResetError, String(err));
    assert.match(err.message, new RegExp(text));
    return;
  }
  assert.fail("expected a rejection");
}

Deno.test("credit goes back in batches of half the window, not per frame read", async () => {
  const { a, next, stats } = pair({ window: 256 * 1024 });
  const s = a.open(enc("x"));
  const peer = await next();
  const reading = readAll(peer);
  const w = s.writable.getWriter();
  await w.write(new Uint8Array(4 * 1024 * 1024));
  await w.close();
  assert.equal((await reading).byteLength, 4 * 1024 * 1024);
  // 64 data frames of 64 KiB; one credit frame each would be 64.
  assert.ok(stats().creditsToA <= 32, `credit frames: ${stats().creditsToA}`);
});

/** A local HTTP service whose `/` streams `mb` MiB of a byte pattern, or forever; tells when cancelled. */
function service(mb: number | null) {
  const chunk = new Uint8Array(64 * 1024).map((_, i) => i % 251);
  let cancelled = false;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    let left = mb === null ? Infinity : mb * 16;
    return new Response(
      new ReadableStream({
        pull(c) {
          if (left-- <= 0) return c.close();
          c.enqueue(chunk);
        },
        cancel() {
          cancelled = true;
        },
      }, { highWaterMark: 0 }),
    );
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/`,
    cancelled: () => cancelled,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test("pipeBytes carries a fetch body whole, framed in place within the credit", async () => {
  await using svc = service(3);
  const { a, next, stats } = pair({ window: 256 * 1024 });
  const s = a.open(enc("x"));
  const peer = await next();
  const reading = readAll(peer);
  await pipeBytes((await fetch(svc.url)).body!, s);
  const got = await reading;
  assert.equal(got.byteLength, 3 * 1024 * 1024);
  assert.ok(got.every((v, i) => v === (i % (64 * 1024)) % 251), "bytes differ");
  assert.ok(stats().dataSizesToB.every((n) => n > 0 && n <= MAX_DATA_BYTES));
});

Deno.test("pipeBytes sends a small read in a buffer of its size, not in the frame it was read into", async () => {
  const { a, next, stats } = pair({ window: 256 * 1024 });
  const s = a.open(enc("x"));
  const peer = await next();
  const reading = readAll(peer);
  let left = 200;
  const events = new ReadableStream({
    type: "bytes",
    async pull(c) {
      if (left-- <= 0) {
        c.close();
        return c.byobRequest?.respond(0); // what ends a pending BYOB read
      }
      await tick(0);
      c.enqueue(enc(`data: event ${left}\n\n`));
    },
  });
  await pipeBytes(events, s);
  const got = new TextDecoder().decode(await reading);
  assert.equal(got.split("\n\n").length - 1, 200, "every event arrived");
  assert.ok(got.startsWith("data: event 199\n\n") && got.endsWith("data: event 0\n\n"));
  const { dataSizesToB, dataBuffersToB } = stats();
  assert.ok(dataSizesToB.length >= 100, "the events went one (or a few) per frame");
  assert.ok(
    dataBuffersToB.every((b, i) => b === dataSizesToB[i]! + 5),
    `frames held more than their bytes: ${dataBuffersToB.slice(0, 5)}`,
  );
});

Deno.test("pipeBytes stops at the window for a stalled reader; a reset cancels the service's body", async () => {
  await using svc = service(null);
  const { a, next, stats } = pair({ window: 256 * 1024 });
  const s = a.open(enc("x"));
  const peer = await next();
  const piping = pipeBytes((await fetch(svc.url)).body!, s);
  await tick(300);
  // Nobody reads the peer: no more than the window was sent.
  assert.ok(stats().bytesToB <= 256 * 1024 + 1024, `sent ${stats().bytesToB}`);
  peer.reset("gone");
  await assertRejectsWith(piping, "gone");
  for (let i = 0; i < 100 && !svc.cancelled(); i++) await tick(20);
  assert.ok(svc.cancelled(), "the service's body was not cancelled");
});
