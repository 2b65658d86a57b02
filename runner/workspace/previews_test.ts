import assert from "node:assert/strict";
import type { PreviewPortsEvent } from "../../shared/previews_api.ts";
import type { Listener, PortPlatform } from "./ports.ts";
import { PreviewWatcher } from "./previews.ts";

class FakePlatform implements PortPlatform {
  now = new Map<string, Listener[]>();
  calls = 0;
  listeners(roots: ReadonlyMap<string, number>): Promise<Map<string, Listener[]>> {
    this.calls++;
    return Promise.resolve(new Map([...this.now].filter(([k]) => roots.has(k))));
  }
}

Deno.test("previews: a session's ports are announced when they change, and only then", async () => {
  const platform = new FakePlatform();
  const emitted: [string, PreviewPortsEvent][] = [];
  let workers = [{ sessionId: "a", pid: 10 }, { sessionId: "b", pid: 20 }];
  const w = new PreviewWatcher({
    platform,
    workers: () => workers,
    emit: (id, e) => emitted.push([id, e]),
  });
  await w.check();
  assert.deepEqual(emitted, [], "nothing listens: nothing to say");

  platform.now.set("a", [
    { pid: 11, port: 5173, process: "node" },
    { pid: 12, port: 3000, process: "python3" },
    { pid: 11, port: 5173, process: "node" },
  ]);
  await w.check();
  await w.check();
  assert.deepEqual(emitted, [[
    "a",
    {
      type: "preview_ports",
      ports: [{ port: 3000, process: "python3" }, { port: 5173, process: "node" }],
    },
  ]]);

  platform.now.delete("a");
  await w.check();
  assert.deepEqual(emitted[1], ["a", { type: "preview_ports", ports: [] }]);

  // Asleep: not looked at, and nothing is scanned when every session sleeps.
  workers = [];
  const calls = platform.calls;
  await w.check();
  assert.equal(platform.calls, calls);
  assert.equal(emitted.length, 2);
});

Deno.test("previews: a session that wakes with the ports it had says nothing new", async () => {
  const platform = new FakePlatform();
  const emitted: string[] = [];
  const w = new PreviewWatcher({
    platform,
    workers: () => [{ sessionId: "a", pid: 10 }],
    emit: (_id, e) => emitted.push(e.ports.map((p) => p.port).join(",")),
  });
  platform.now.set("a", [{ pid: 11, port: 8000 }]);
  await w.check();
  w.forget("a", true); // fell asleep; its server lives on
  await w.check();
  assert.deepEqual(emitted, ["8000"]);
  w.forget("a"); // ended
  await w.check();
  assert.deepEqual(emitted, ["8000", "8000"]);
});

Deno.test("previews: polling runs on a timer and stops on close", async () => {
  const platform = new FakePlatform();
  const w = new PreviewWatcher({
    platform,
    intervalMs: 10,
    workers: () => [{ sessionId: "a", pid: 1 }],
    emit: () => {},
  });
  w.start();
  const end = Date.now() + 2000;
  while (platform.calls < 3 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  w.close();
  assert.ok(platform.calls >= 3);
  const after = platform.calls;
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(platform.calls <= after + 1);
});
