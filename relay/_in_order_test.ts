import assert from "node:assert/strict";
import { InOrder } from "./_in_order.ts";

Deno.test("InOrder runs a task at once when nothing waits, else after the ones before it", async () => {
  const errors: unknown[] = [];
  const q = new InOrder((err) => errors.push(err));
  const done: string[] = [];
  q.run(() => void done.push("a"));
  assert.deepEqual(done, ["a"], "at once");
  assert.equal(q.busy, false);
  let release!: () => void;
  q.run(() => new Promise<void>((resolve) => release = resolve).then(() => void done.push("b")));
  q.run(() => void done.push("c"));
  q.run(() => {
    throw new Error("boom");
  });
  q.run(() => Promise.reject(new Error("bang")));
  q.run(() => void done.push("d"));
  assert.equal(q.busy, true);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(done, ["a"], "all wait for b");
  release();
  await q.idle();
  assert.deepEqual(done, ["a", "b", "c", "d"], "in order, a failure does not stop the rest");
  assert.deepEqual(errors.map(String), ["Error: boom", "Error: bang"]);
  assert.equal(q.busy, false);
  q.run(() => void done.push("e"));
  assert.deepEqual(done.at(-1), "e", "at once again");
});

Deno.test("InOrder pauses its source at the limit of waiting tasks or bytes, and resumes at half", async () => {
  const calls: string[] = [];
  const q = new InOrder(() => {}, {
    maxWaiting: 4,
    maxWaitingBytes: 1000,
    pause: () => calls.push("pause"),
    resume: () => calls.push("resume"),
  });
  let release!: () => void;
  const ran: number[] = [];
  q.run(() => new Promise<void>((resolve) => release = resolve));
  for (let i = 1; i <= 3; i++) q.run(() => void ran.push(i), 10);
  assert.deepEqual(calls, [], "3 waiting: under the limit");
  q.run(() => void ran.push(4), 10);
  assert.deepEqual(calls, ["pause"], "4 waiting: paused");
  assert.deepEqual(q.waiting, { tasks: 4, bytes: 40, paused: true });
  // More can still come (what the socket had read already): paused once.
  q.run(() => void ran.push(5), 10);
  assert.deepEqual(calls, ["pause"]);
  release();
  await q.idle();
  assert.deepEqual(ran, [1, 2, 3, 4, 5], "every task ran, in order");
  assert.deepEqual(calls, ["pause", "resume"], "resumed once at half");
  assert.deepEqual(q.waiting, { tasks: 0, bytes: 0, paused: false });

  // Bytes alone: two large messages behind a slow one pause it.
  let again!: () => void;
  q.run(() => new Promise<void>((resolve) => again = resolve));
  q.run(() => {}, 600);
  assert.equal(q.waiting.paused, false);
  q.run(() => {}, 600);
  assert.equal(q.waiting.paused, true);
  again();
  await q.idle();
  assert.deepEqual(calls, ["pause", "resume", "pause", "resume"]);
});
