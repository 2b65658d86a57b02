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
