import assert from "node:assert/strict";
import { EventRing } from "./session_log.ts";

const ev = (seq: number) => ({ seq, json: `{"seq":${seq}}` });

Deno.test("event ring keeps the last events and answers ranges after a seq", () => {
  const ring = new EventRing(3);
  for (let i = 1; i <= 10; i++) ring.push(ev(i));
  assert.equal(ring.firstSeq, 8);
  assert.equal(ring.size, 3);
  assert.deepEqual(ring.after(7, 10)?.map((e) => e.seq), [8, 9, 10]);
  assert.deepEqual(ring.after(8, 1)?.map((e) => e.seq), [9]);
  assert.deepEqual(ring.after(10, 10), []);
  assert.equal(ring.after(6, 10), null, "older than the ring: the caller reads the database");
});

Deno.test("an empty event ring sends every range to the database", () => {
  const ring = new EventRing(5);
  assert.equal(ring.after(0, 10), null);
});

Deno.test("event ring holds at most its byte budget but always the newest event", () => {
  const big = (seq: number) => ({ seq, json: "x".repeat(100) });
  const ring = new EventRing(1000, 250);
  for (let i = 1; i <= 10; i++) ring.push(big(i));
  assert.equal(ring.size, 2);
  assert.equal(ring.firstSeq, 9);
  assert.equal(
    ring.after(7, 10),
    null,
    "older than the byte budget: the caller reads the database",
  );
  const tiny = new EventRing(1000, 10);
  tiny.push(big(1));
  assert.equal(tiny.size, 1);
  assert.deepEqual(tiny.after(0, 10)?.map((e) => e.seq), [1]);
});

Deno.test("events the ring evicts can be garbage-collected at once", async () => {
  // In a child with V8's gc() exposed: WeakRefs tell which evicted events
  // something still holds. (The ring once kept up to `capacity` evicted
  // events reachable until it compacted: 32 MB of 32 KB tool outputs.)
  const code = `
    import { EventRing } from ${JSON.stringify(new URL("./session_log.ts", import.meta.url).href)};
    const ring = new EventRing(1000, 64 * 1024);
    const refs = [];
    for (let seq = 1; seq <= 100; seq++) {
      const ev = { seq, json: String(seq).padEnd(32 * 1024, "x") };
      refs.push(new WeakRef(ev));
      ring.push(ev);
    }
    await new Promise((r) => setTimeout(r, 0));
    globalThis.gc();
    console.log(JSON.stringify({ held: ring.size, alive: refs.filter((r) => r.deref()).length }));
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--v8-flags=--expose-gc", code],
    stderr: "inherit",
  }).output();
  assert.ok(out.success, "the child ran");
  const { held, alive } = JSON.parse(new TextDecoder().decode(out.stdout));
  assert.equal(held, 2, "64 KB holds the last two 32 KB events");
  assert.equal(alive, held, "nothing but the held events stays reachable");
});
