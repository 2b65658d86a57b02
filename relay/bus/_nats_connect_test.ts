import assert from "node:assert/strict";
import { Socket } from "node:net";
import { guardSocket } from "./_nats_connect.ts";

Deno.test("a NATS socket's error with no listener is dropped, not thrown; a listener still gets it", () => {
  const bare = new Socket();
  assert.throws(() => bare.emit("error", new Error("ECONNRESET")), /ECONNRESET/);
  bare.destroy();

  const guarded = guardSocket(new Socket());
  assert.equal(guarded.emit("error", new Error("ECONNRESET")), false);
  const seen: string[] = [];
  guarded.on("error", (e: Error) => seen.push(e.message));
  assert.equal(guarded.emit("error", new Error("EPIPE")), true);
  assert.deepEqual(seen, ["EPIPE"]);
  assert.equal(guarded.emit("data", "x"), false, "other events pass as before");
  guarded.destroy();
});
