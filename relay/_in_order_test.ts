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
