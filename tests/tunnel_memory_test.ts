/**
 * The tunnel's memory under load, watched from outside: a real relay and
 * runner process, a local service on the runner's machine, and the RSS of
 * the relay and of the runner's daemon sampled from /proc while (1) a 1 GB
 * download streams through and (2) one reader stalls while another stream on
 * the same runner keeps flowing.
 */
import assert from "node:assert/strict";
import { daemonPid, RssWatch } from "./harness/rss.ts";
import { madeAsRead, withTunnelRunner } from "./harness/tunnel_world.ts";

const MB = 1024 * 1024;

/** A service that makes `mb` MiB as it is read, and counts what each download made. */
function startService(made: Map<string, number>) {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => madeAsRead(new URL(req.url), made),
  );
}

async function withWorld(
  fn: (w: {
    relayPid: number;
    daemon: number;
    made: Map<string, number>;
    get: (mb: number, id: string) => Promise<Response>;
  }) => Promise<void>,
): Promise<void> {
  const made = new Map<string, number>();
  const service = startService(made);
  try {
    await withTunnelRunner(async ({ relay, owner, runner, runnerId }) => {
      const base = `/api/tunnel/runner/${runnerId}/${service.addr.port}`;
      // Warm up both processes (first request, JIT) so growth is the stream's, not the start's.
      const warm = await owner.web(`${base}/big?mb=20&id=warm`);
      for await (const _ of warm.body!) { /* drain */ }
      await fn({
        relayPid: relay.proc.pid,
        daemon: daemonPid(runner.proc.pid),
        made,
        get: (mb, id) => owner.web(`${base}/big?mb=${mb}&id=${id}`),
      });
    });
  } finally {
    await service.shutdown();
  }
}

Deno.test("a 1 GB download streams through the tunnel with the relay's and the runner's RSS bounded", async () => {
  await withWorld(async (w) => {
    const watch = new RssWatch([w.relayPid, w.daemon]);
    let total = 0;
    const started = performance.now();
    try {
      const res = await w.get(1024, "gig");
      assert.equal(res.status, 200);
      for await (const c of res.body!) total += c.byteLength;
    } finally {
      const [relay, daemon] = watch.stop();
      const secs = (performance.now() - started) / 1000;
      console.log(
        `1 GB in ${secs.toFixed(1)} s; relay grew ${relay!.toFixed(1)} MB, runner ${
          daemon!.toFixed(1)
        } MB`,
      );
      assert.equal(total, 1024 * MB);
      // Measured on a shared 2-core box: relay ≤ ~90 MB and runner ≤ ~60 MB over their start,
      // flat from 300 MB to 1 GB (socket and ws buffers V8 frees when external memory grows).
      // A tunnel that buffered the body would take the whole gigabyte.
      assert.ok(relay! < 160, `relay grew ${relay} MB`);
      assert.ok(daemon! < 160, `runner daemon grew ${daemon} MB`);
    }
  });
});

Deno.test("a reader that stalls holds its stream at the window while another stream on the runner keeps flowing", async () => {
  await withWorld(async (w) => {
    const stalled = await w.get(1024, "stalled");
    const reader = stalled.body!.getReader();
    await reader.read();
    // Let whatever is in flight settle into the buffers on the way.
    await new Promise((r) => setTimeout(r, 500));
    const madeAtStall = w.made.get("stalled")!;
    const watch = new RssWatch([w.relayPid, w.daemon]);
    // Another stream on the same runner flows meanwhile: 200 MB.
    const flowing = await w.get(200, "flowing");
    let total = 0;
    for await (const c of flowing.body!) total += c.byteLength;
    await new Promise((r) => setTimeout(r, 500));
    const [relay, daemon] = watch.stop();
    const madeAfter = w.made.get("stalled")!;
    await reader.cancel();
    assert.equal(total, 200 * MB, "the other stream arrived whole");
    console.log(
      `stalled stream: ${(madeAfter / MB).toFixed(2)} MB made by the service; ` +
        `relay grew ${relay!.toFixed(1)} MB, runner ${
          daemon!.toFixed(1)
        } MB during the other download`,
    );
    // The service was held back: what it made for the stalled reader is the stream's window
    // (256 KiB) plus the kernel's loopback socket buffers on both hops (browser ↔ relay and
    // runner ↔ service, autotuned to several MB each; measured ~13–15 MB in all, not in
    // either process's RSS), far from the gigabyte it would make if anything buffered.
    assert.ok(madeAfter < 32 * MB, `the stalled stream made ${madeAfter / MB} MB`);
    assert.ok(madeAfter - madeAtStall < 8 * MB, "the stalled stream kept moving while stalled");
    assert.ok(relay! < 160, `relay grew ${relay} MB`);
    assert.ok(daemon! < 160, `runner daemon grew ${daemon} MB`);
  });
});

Deno.test("a compressed page that decodes to 512 MB keeps the relay's RSS bounded (no decompression bomb)", async () => {
  const { brotliCompressSync } = await import("node:zlib");
  // 512 MiB of spaces, brotli-compressed to a few hundred bytes: what a hostile or broken
  // service on the runner could answer. The relay decodes such a body to rewrite its paths.
  const bomb = new Uint8Array(brotliCompressSync(new Uint8Array(512 * MB).fill(32)));
  assert.ok(bomb.byteLength < 64 * 1024, `bomb is ${bomb.byteLength} bytes`);
  const service = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) =>
      new URL(req.url).pathname === "/bomb"
        ? new Response(bomb, { headers: { "content-type": "text/html", "content-encoding": "br" } })
        : new Response("<p>warm</p>", { headers: { "content-type": "text/html" } }),
  );
  try {
    await withTunnelRunner(async ({ relay, owner, runnerId }) => {
      const base = `/api/tunnel/runner/${runnerId}/${service.addr.port}`;
      const warm = await owner.web(`${base}/warm`);
      await warm.body!.cancel();
      const watch = new RssWatch([relay.proc.pid]);
      const res = await owner.web(`${base}/bomb`);
      assert.equal(res.status, 200);
      // A browser reading slowly: one chunk, then a pause.
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.ok(!first.done && first.value.byteLength > 0);
      assert.ok(first.value.byteLength <= 4 * MB, `first chunk ${first.value.byteLength} bytes`);
      await new Promise((r) => setTimeout(r, 1500));
      const [grew] = watch.stop();
      await reader.cancel();
      // Before the decoded size was bounded, the relay died here (out of memory).
      assert.equal((await owner.api("/api/runners")).status, 200);
      console.log(`bomb: relay grew ${grew!.toFixed(1)} MB`);
      assert.ok(grew! < 100, `relay grew ${grew} MB for a ${bomb.byteLength}-byte body`);
    });
  } finally {
    await service.shutdown();
  }
});
