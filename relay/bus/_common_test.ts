import assert from "node:assert/strict";
import { RelayError } from "../errors.ts";
import { errorToWire, SeqCursor, wireToError } from "./_common.ts";
import { decodeEvents, encodeEvents, encodeReply, encodeTail } from "./_nats_wire.ts";
import { NodeTable } from "./_nats_flow.ts";
import type { BusGap, StoredEvent } from "./types.ts";

function cursor() {
  const got: number[] = [];
  const gaps: BusGap[] = [];
  const c = new SeqCursor({
    onEvents: (events) => got.push(...events.map((e) => e.seq)),
    onGap: (gap) => gaps.push(gap),
  }, () => {});
  const send = (...seqs: number[]) => c.deliver(seqs.map((seq) => ({ seq, json: "{}" })), "u");
  return { c, got, gaps, send };
}

Deno.test("a subscription's cursor delivers each seq once and reports a jump as a gap", () => {
  const { c, got, gaps, send } = cursor();
  send(7, 8); // the first frame is where the subscriber starts: no gap
  send(8, 9);
  send(9);
  send(12, 13);
  assert.deepEqual(got, [7, 8, 9, 12, 13]);
  assert.deepEqual(gaps, [{ reason: "seq", after: 9, before: 12 }]);
  c.caughtUp(20);
  send(19, 20, 21);
  assert.deepEqual(got.slice(5), [21]);
  c.tail(25);
  assert.deepEqual(gaps[1], { reason: "seq", after: 21, before: 26 });
  c.tail(24); // older than what it has: nothing
  assert.equal(gaps.length, 2);
  send(26);
  assert.equal(gaps.length, 2, "the tail moved the cursor");
});

Deno.test("a subscriber that throws does not stop the cursor", () => {
  const lines: string[] = [];
  const c = new SeqCursor({
    onEvents: () => {
      throw new Error("boom");
    },
    onGap: () => {},
  }, (l) => lines.push(l));
  c.deliver([{ seq: 1, json: "{}" }], "u");
  c.deliver([{ seq: 2, json: "{}" }], "u");
  assert.equal(c.last, 2);
  assert.equal(lines.length, 2);
});

Deno.test("events survive the wire whatever their JSON holds, in batches of bounded size", () => {
  const events: StoredEvent[] = [
    { seq: 1, json: '{"a":"line\\nbreak","é":"ü"}' },
    { seq: 2, json: '{\n  "pretty": true\n}' },
    { seq: 3, json: JSON.stringify({ big: "x".repeat(300_000) }) },
    { seq: 4, json: "{}" },
  ];
  const messages = encodeEvents("u1", "s1", events);
  assert.equal(messages.length, 3, "the big event goes alone");
  const back = messages.flatMap((m) => decodeEvents(new TextDecoder().decode(m), "s1")!.events);
  assert.deepEqual(back, events);
  assert.equal(
    decodeEvents(new TextDecoder().decode(messages[0]!), "s2"),
    null,
    "another session's",
  );
  assert.equal(decodeEvents("garbage", "s1"), null);
  const tail = decodeEvents(new TextDecoder().decode(encodeTail("u1", "s1", 9)), "s1");
  assert.deepEqual(tail, { userId: "u1", events: [], tail: 9 });
});

Deno.test("an answer too large for the bus becomes an error the asker can read", () => {
  const small = encodeReply({ ok: true, data: "x".repeat(10) }, 1000);
  assert.deepEqual(JSON.parse(new TextDecoder().decode(small)), { ok: true, data: "x".repeat(10) });
  const big = JSON.parse(
    new TextDecoder().decode(encodeReply({ ok: true, data: "x".repeat(2000) }, 1000)),
  );
  assert.equal(big.ok, false);
  assert.equal(wireToError(big.error).code, "answer_too_large");
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  const bad = JSON.parse(new TextDecoder().decode(encodeReply({ ok: true, data: circular }, 1000)));
  assert.equal(bad.ok, false);
});

Deno.test("errors cross the wire by kind; an unknown kind is 'rejected'", () => {
  const e = wireToError(errorToWire(new RelayError("conflict", "busy", "Busy")));
  assert.deepEqual([e.kind, e.code, e.message], ["conflict", "busy", "Busy"]);
  assert.equal(
    wireToError({ kind: "nonsense" as never, code: "x", message: "y" }).kind,
    "rejected",
  );
  assert.equal(wireToError(undefined).code, "runner_error");
});

Deno.test("the node table forgets a node that said goodbye at once and a silent one after its time", async () => {
  const t = new NodeTable("me", 50);
  assert.equal(t.heard("announce", { node: "n1", runners: ["r1", 5] }), false);
  t.heard("announce", { node: "n2", runners: [] });
  t.heard("announce", { node: "me", runners: ["spoofed"] });
  assert.deepEqual(t.list(["r0"]).map((n) => [n.nodeId, n.runners]), [
    ["me", ["r0"]],
    ["n1", ["r1"]],
    ["n2", []],
  ]);
  t.heard("leave", { node: "n2" });
  assert.deepEqual(t.list([]).map((n) => n.nodeId), ["me", "n1"]);
  assert.equal(t.heard("hello", { node: "n3" }), true);
  await new Promise((r) => setTimeout(r, 60));
  assert.deepEqual(t.list([]).map((n) => n.nodeId), ["me"]);
});
