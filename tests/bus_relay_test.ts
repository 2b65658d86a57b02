/**
 * `baton relay --bus nats://…` (`BATON_BUS_URL`): the relay joins the bus at
 * start and leaves it at shutdown; a bad URL is a usage error and a bus that
 * cannot be reached stops the start with one line. What crosses it between
 * two nodes is tested in cluster_test.ts.
 */
import assert from "node:assert/strict";
import { LocalBus } from "../relay/bus/mod.ts";
import { NatsBus } from "../relay/bus/nats_bus.ts";
import { createRelay } from "../relay/mod.ts";
import { NATS_SERVER, NatsServer } from "./harness/nats.ts";
import { baseEnv, BatonProcess, RelayProcess, tempDir } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";

Deno.test({
  name:
    "baton relay --bus joins the bus with its token: another node sees it, and it leaves when stopped",
  ignore: !NATS_SERVER,
  async fn() {
    await using server = await NatsServer.start({ token: "relay-bus-token" });
    const watcher = await NatsBus.connect({ url: server.url, token: "relay-bus-token" }, {
      announceMs: 200,
    });
    const others = () => watcher.nodes().filter((n) => n.nodeId !== watcher.nodeId);
    const relay = await RelayProcess.start({
      env: { BATON_BUS_URL: server.url, BATON_BUS_TOKEN: "relay-bus-token" },
    });
    try {
      await eventually("the relay's node", () => others().length === 1 || undefined, 10_000);
      const health = await fetch(`${relay.url}/health`);
      assert.equal(health.status, 200);
      await health.body?.cancel();
      const st = await relay.proc.stop();
      assert.equal(st.code, 0, relay.proc.output());
      // It said goodbye: gone at once, not after the announce periods.
      await eventually("the relay's node gone", () => others().length === 0 || undefined, 1_000);
    } catch (err) {
      console.error(relay.proc.output());
      throw err;
    } finally {
      relay.proc.kill("SIGKILL");
      await relay.proc.status;
      await watcher.close();
    }
  },
});

/** Runs `baton relay` with `args` until it exits. */
async function relayExit(args: string[]): Promise<{ code: number; lines: string[] }> {
  const home = await tempDir();
  const p = BatonProcess.start("relay", {
    args: ["relay", "--port", "0", "--data-dir", `${home}/data`, ...args],
    env: baseEnv(home),
  });
  const timer = setTimeout(() => p.kill("SIGKILL"), 30_000);
  const st = await p.status;
  clearTimeout(timer);
  return { code: st.code, lines: p.lines };
}

Deno.test("baton relay --bus with a URL that is not nats:// is a usage error", async () => {
  for (const bad of ["http://127.0.0.1:4222", "nats://", "nats://user:secret@127.0.0.1:4222"]) {
    const { code, lines } = await relayExit(["--bus", bad]);
    assert.equal(code, 2, lines.join("\n"));
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0]!, /^baton relay: Invalid --bus: .*expected nats:\/\/host:port/);
    assert.doesNotMatch(lines[0]!, /secret/);
  }
});

Deno.test("baton relay stops with one line when its bus cannot be reached", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = closed.addr.port;
  closed.close();
  const { code, lines } = await relayExit(["--bus", `nats://127.0.0.1:${port}`]);
  assert.equal(code, 1, lines.join("\n"));
  assert.ok(
    lines.some((l) =>
      l.startsWith(`baton relay: Cannot reach the bus at nats://127.0.0.1:${port}`)
    ),
    lines.join("\n"),
  );
  assert.ok(!lines.some((l) => /listening on/.test(l)), "it never listened");
});

Deno.test("a relay without a bus has its one-process bus, closed with it", async () => {
  const relay = await createRelay({ dataDir: await tempDir(), baseUrl: "http://127.0.0.1:7420" });
  try {
    assert.ok(relay.bus instanceof LocalBus);
    assert.equal(relay.bus.connected, true);
    assert.deepEqual(relay.bus.nodes().map((n) => n.runners), [[]]);
  } finally {
    await relay.close();
  }
});
