import assert from "node:assert/strict";
import { formatCpuList, parseCpuList, splitCpus } from "./_pinning.ts";

Deno.test("cpu lists read and write as the kernel and taskset write them", () => {
  assert.deepEqual(parseCpuList("0-3,6\n"), [0, 1, 2, 3, 6]);
  assert.deepEqual(parseCpuList("1"), [1]);
  assert.equal(formatCpuList([6, 0, 1, 2, 3]), "0-3,6");
  assert.equal(formatCpuList([1]), "1");
  assert.throws(() => parseCpuList("x"), RangeError);
});

Deno.test("two cpus put the load on cpu 0 and the servers on cpu 1", () => {
  assert.deepEqual(splitCpus([0, 1]), { load: [0], server: [1] });
});

Deno.test("an odd core out goes to the load side", () => {
  assert.deepEqual(splitCpus([0, 1, 2]), { load: [0, 1], server: [2] });
  assert.deepEqual(splitCpus([0, 1, 2, 3]), { load: [0, 1], server: [2, 3] });
});

Deno.test("hyperthreads of one core stay on the same side", () => {
  // Intel numbering: cpu n and n + 4 are the two threads of core n.
  const coreOf = (cpu: number) => String(cpu % 4);
  assert.deepEqual(splitCpus([0, 1, 2, 3, 4, 5, 6, 7], coreOf), {
    load: [0, 4, 1, 5],
    server: [2, 6, 3, 7],
  });
  // One core with two threads: split the threads, it is all there is.
  assert.deepEqual(splitCpus([0, 1], () => "0"), { load: [0], server: [1] });
});

Deno.test("one cpu cannot be split", () => {
  assert.equal(splitCpus([0]), null);
});
