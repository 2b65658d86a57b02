/**
 * A relay node's operations endpoints against real relay processes:
 * `GET /ready` turns 503 when the store cannot answer or write (a closed
 * database; a full disk under the data folder) and back; `GET /metrics` is
 * valid Prometheus text whose counters follow a session streamed through
 * the mock model; only loopback callers, or holders of the metrics token,
 * read it; and a scrape's size does not grow with the load.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { createRelay } from "../relay/app.ts";
import { json, signUp, storedEvents, Viewer } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession, textDelta } from "./harness/fake_runner.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import {
  baseEnv,
  baton,
  RelayProcess,
  type RunnerProcess,
  startRunner,
  tempDir,
} from "./harness/procs.ts";
import { rawRequest } from "./harness/raw_http.ts";
import { eventually, within } from "./harness/wait.ts";
import type { ReadyResponse } from "../shared/operations_api.ts";

const TOKEN = "metrics-token-0123456789abcdef";

/** One sample of a scrape, keyed as printed: `name` or `name{labels}`. */
type Samples = Map<string, number>;

/**
 * Parses Prometheus text (exposition 0.0.4), failing on any line outside
 * the format, a sample whose family has no HELP and TYPE before it, or a
 * histogram whose buckets are not cumulative up to its count.
 */
function parseMetrics(text: string): Samples {
  const samples: Samples = new Map();
  const typed = new Map<string, string>();
  const helped = new Set<string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$/.exec(line);
    if (meta) {
      if (meta[1] === "HELP") helped.add(meta[2]!);
      else {
        assert.match(meta[3]!, /^(counter|gauge|histogram|summary|untyped)$/, line);
        typed.set(meta[2]!, meta[3]!);
      }
      continue;
    }
    const m =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? (-?[0-9.]+(?:e[+-]?\d+)?|NaN|\+Inf|-Inf)$/
        .exec(line);
    assert.ok(m, `not a Prometheus sample line: '${line}'`);
    const family = m[1]!.replace(/_(bucket|sum|count)$/, "");
    const name = typed.has(m[1]!) ? m[1]! : family;
    assert.ok(typed.has(name) && helped.has(name), `no HELP and TYPE before: '${line}'`);
    samples.set(`${m[1]}${m[2] ?? ""}`, Number(m[3]));
  }
  for (const [name, type] of typed) {
    if (type !== "histogram") continue;
    let last = 0;
    for (const [key, value] of samples) {
      if (!key.startsWith(`${name}_bucket{`)) continue;
      assert.ok(value >= last, `${key} is below the bucket before it`);
      last = value;
    }
    assert.equal(samples.get(`${name}_bucket{le="+Inf"}`), samples.get(`${name}_count`), name);
  }
  return samples;
}

function sample(s: Samples, key: string): number {
  const v = s.get(key);
  assert.ok(v !== undefined, `no sample '${key}'`);
  return v;
}

async function scrape(url: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${url}/metrics`, { headers });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.equal(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  return text;
}

async function ready(url: string): Promise<{ status: number; body: ReadyResponse }> {
  const res = await fetch(`${url}/ready`);
  return { status: res.status, body: await res.json() };
}

/** An IPv4 address of this machine that is not a loopback one, if it has one. */
function outsideAddress(): string | undefined {
  return Deno.networkInterfaces().find((i) => i.family === "IPv4" && !i.address.startsWith("127."))
    ?.address;
}

Deno.test("GET /ready answers 200 with the store's check, and 503 naming it once the database is closed", async () => {
  const dataDir = await tempDir("baton-ready-");
  const relay = await createRelay({ dataDir, baseUrl: "http://127.0.0.1:7420" });
  const loopback = { remoteAddr: { transport: "tcp", hostname: "127.0.0.1", port: 1 } };
  try {
    const ok = await relay.app.request("/ready");
    assert.equal(ok.status, 200);
    const body = await ok.json();
    assert.equal(body.ok, true);
    assert.equal(body.checks.store.ok, true);
    assert.equal(typeof body.checks.store.ms, "number");
    const health = await relay.app.request("/health");
    assert.equal(health.status, 200);
    await health.body?.cancel();

    relay.db!.close();
    const res = await relay.app.request("/ready");
    assert.equal(res.status, 503);
    const failed = await res.json();
    assert.equal(failed.ok, false);
    assert.equal(failed.error.code, "not_ready");
    assert.equal(failed.error.message, "Not ready: store");
    assert.equal(failed.checks.store.ok, false);
    assert.equal(failed.checks.store.error, undefined, "no reason for a caller off this host");
    const local = await relay.app.request(
      "http://127.0.0.1:7420/ready",
      {},
      loopback as Deno.ServeHandlerInfo,
    );
    assert.match((await local.json()).checks.store.error, /not open/i, "a local caller sees why");
    // Liveness stays trivial: the process still answers.
    const alive = await relay.app.request("/health");
    assert.equal(alive.status, 200);
    await alive.body?.cancel();
  } finally {
    await relay.close().catch(() => {/* the database was closed under it */});
  }
});

Deno.test("GET /metrics tells this host's callers from the rest by peer, Host and proxy headers", async () => {
  const dataDir = await tempDir("baton-metrics-access-");
  const relay = await createRelay({ dataDir, baseUrl: "http://127.0.0.1:7420" });
  const from = (hostname: string) =>
    ({ remoteAddr: { transport: "tcp", hostname, port: 1 } }) as Deno.ServeHandlerInfo;
  const status = async (url: string, peer: string, headers: Record<string, string> = {}) => {
    const res = await relay.app.request(url, { headers }, from(peer));
    await res.body?.cancel();
    return res.status;
  };
  try {
    assert.equal(await status("http://127.0.0.1:7420/metrics", "127.0.0.1"), 200);
    assert.equal(await status("http://localhost:7420/metrics", "127.0.0.5"), 200);
    assert.equal(await status("http://[::1]:7420/metrics", "::1"), 200);
    assert.equal(await status("http://127.0.0.1:7420/metrics", "::ffff:127.0.0.1"), 200);
    assert.equal(await status("http://127.0.0.1:7420/metrics", "10.0.0.5"), 403);
    assert.equal(await status("http://127.0.0.1:7420/metrics", "::ffff:10.0.0.5"), 403);
    assert.equal(await status("http://relay.lan:7420/metrics", "127.0.0.1"), 403);
    for (const h of ["forwarded", "x-forwarded-for", "x-real-ip"]) {
      assert.equal(
        await status("http://127.0.0.1:7420/metrics", "127.0.0.1", { [h]: "203.0.113.7" }),
        403,
        h,
      );
    }
    assert.equal(await status("http://127.0.0.1:7420/metrics", "unknown"), 403);
  } finally {
    await relay.close();
  }
});

Deno.test("GET /metrics parses, and its counters follow a session streamed through the mock model", async () => {
  const llm = MockLlm.start();
  const relay = await RelayProcess.start();
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    const first = parseMetrics(await scrape(relay.url));
    assert.equal(sample(first, "baton_runners"), 0);
    assert.equal(sample(first, "baton_events_ingested_total"), 0);
    assert.ok(sample(first, "process_resident_memory_bytes") > 10_000_000);

    const user = await signUp(relay.url);
    const home = await tempDir();
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const [r] = await (await user.api("/api/runners")).json();
    const pieces = Array.from({ length: 60 }, (_, i) => `m${i} `);
    llm.enqueue({ text: pieces, chunkDelayMs: 40 });
    const spawned = await (await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: "stream" }),
    )).json();
    const id = spawned.sessionId as string;
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      viewer.subscribe(id);
      await viewer.waitForEvent(id, "message_update");
      const during = parseMetrics(await scrape(relay.url));
      assert.equal(sample(during, "baton_viewers"), 1);
      assert.equal(sample(during, "baton_runners"), 1);
      assert.equal(sample(during, "baton_sessions_live"), 1);
      assert.ok(sample(during, "baton_fanout_queued_bytes") >= 0);
      assert.ok(sample(during, "baton_events_pending") >= 0);

      await viewer.waitForEvent(id, "agent_end", 30_000);
      const stored = await storedEvents(user, id);
      // Everything stored was ingested, everything the one viewer got was sent.
      const after = await eventually("the counters to catch up", async () => {
        const s = parseMetrics(await scrape(relay.url));
        const n = (await storedEvents(user, id)).length;
        return sample(s, "baton_events_ingested_total") === n &&
            sample(s, "baton_events_sent_total") === viewer.eventsOf(id).length
          ? s
          : undefined;
      });
      assert.ok(stored.length > pieces.length, `${stored.length} events stored`);
      assert.ok(sample(after, "baton_commit_duration_seconds_count") > 0);
      assert.ok(sample(after, "baton_commit_duration_seconds_sum") > 0);
      assert.equal(sample(after, "baton_commit_failures_total"), 0);
      assert.ok(sample(after, 'baton_http_requests_total{code="2xx"}') > 5);
      assert.ok(sample(after, "baton_event_loop_lag_seconds_count") > 0);
      assert.ok(sample(after, "process_start_time_seconds") > 1_600_000_000);
      ok = true;
    } finally {
      await viewer.close();
    }
    const res = await fetch(`${relay.url}/api/nothing-here`);
    await res.body?.cancel();
    const final = parseMetrics(await scrape(relay.url));
    assert.ok(sample(final, 'baton_http_requests_total{code="4xx"}') >= 1);
    assert.equal(sample(final, "baton_viewers"), 0, "the viewer that left is not counted");
  } finally {
    if (!ok) console.error(relay.proc.output());
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});

Deno.test("without BATON_METRICS_TOKEN, /metrics answers callers on this host only", async () => {
  const relay = await RelayProcess.start({ args: ["--host", "0.0.0.0"] });
  try {
    parseMetrics(await scrape(`http://127.0.0.1:${relay.port}`));
    const refused = async (res: Response, what: string) => {
      assert.equal(res.status, 403, what);
      assert.equal((await res.json()).error.code, "metrics_forbidden", what);
    };
    const outside = outsideAddress();
    if (outside) {
      // The same relay reached over a real non-loopback interface.
      await refused(await fetch(`http://${outside}:${relay.port}/metrics`), "a LAN caller");
      const r = await ready(`http://${outside}:${relay.port}`);
      assert.equal(r.status, 200, "readiness answers anyone");
    } else console.error("no non-loopback interface here: the LAN caller is not tried");
    // Through a reverse proxy on this host, the caller is whoever the proxy serves.
    await refused(
      await fetch(`http://127.0.0.1:${relay.port}/metrics`, {
        headers: { "x-forwarded-for": "203.0.113.7" },
      }),
      "a proxied caller",
    );
    // A page whose name resolves to 127.0.0.1 (DNS rebinding) names its own host.
    const rebound = await rawRequest(relay.port, {
      method: "GET",
      target: "/metrics",
      headers: { host: `evil.example:${relay.port}` },
    });
    assert.equal(rebound.status, 403, rebound.text);
  } finally {
    await relay.stop();
  }
});

Deno.test("with BATON_METRICS_TOKEN, /metrics takes that bearer token from anyone and nothing else", async () => {
  const relay = await RelayProcess.start({
    args: ["--host", "0.0.0.0"],
    env: { BATON_METRICS_TOKEN: TOKEN },
  });
  try {
    const local = `http://127.0.0.1:${relay.port}`;
    for (
      const [what, headers] of [
        ["no token, from this host", {}],
        ["a wrong token", { authorization: `Bearer ${TOKEN}x` }],
        ["a shorter token", { authorization: `Bearer ${TOKEN.slice(0, 8)}` }],
        ["the token in another scheme", { authorization: `Basic ${TOKEN}` }],
      ] as const
    ) {
      const res = await fetch(`${local}/metrics`, { headers });
      assert.equal(res.status, 401, what);
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer /, what);
      assert.equal((await res.json()).error.code, "unauthorized", what);
    }
    parseMetrics(await scrape(local, { authorization: `Bearer ${TOKEN}` }));
    const outside = outsideAddress();
    if (outside) {
      parseMetrics(
        await scrape(`http://${outside}:${relay.port}`, { authorization: `Bearer ${TOKEN}` }),
      );
    }
  } finally {
    await relay.stop();
  }
});

Deno.test("a malformed BATON_METRICS_TOKEN stops the relay at start with one line", async () => {
  const home = await tempDir();
  const out = await baton(
    ["relay", "--port", "0", "--data-dir", join(home, "data")],
    baseEnv(home, { BATON_METRICS_TOKEN: "short" }),
  );
  assert.equal(out.code, 2, out.stderr);
  assert.equal(out.stderr.trim().split("\n").length, 1, out.stderr);
  assert.match(out.stderr, /BATON_METRICS_TOKEN/);
  assert.doesNotMatch(out.stderr, /short/, "the value is not printed");
});

Deno.test("a scrape's size stays bounded while many viewers watch many sessions", async () => {
  const relay = await RelayProcess.start();
  const runners: FakeRunner[] = [];
  const viewers: Viewer[] = [];
  let streaming = true;
  try {
    const user = await signUp(relay.url);
    const idle = await scrape(relay.url);
    const sessions: { fake: FakeRunner; id: string; seq: number }[] = [];
    for (let i = 0; i < 20; i++) {
      const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
      runners.push(fake);
      sessions.push({ fake, id: await spawnSession(user, fake.runnerId), seq: 0 });
    }
    for (let i = 0; i < 100; i++) {
      const v = await Viewer.connect(relay.url, { apiKey: user.apiKey });
      viewers.push(v);
      v.subscribe(sessions[i % sessions.length]!.id);
    }
    // Every session streams while the scrapes run.
    const pump = (async () => {
      while (streaming) {
        for (const s of sessions) {
          const events = Array.from({ length: 5 }, () => ({
            seq: ++s.seq,
            ts: Date.now(),
            e: textDelta("x".repeat(200)),
          }));
          s.fake.sendEvents(s.id, events);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const sizes: number[] = [];
    for (let i = 0; i < 10; i++) {
      const text = await scrape(relay.url);
      const s = parseMetrics(text);
      assert.equal(sample(s, "baton_viewers"), 100);
      assert.equal(sample(s, "baton_runners"), 20);
      sizes.push(new TextEncoder().encode(text).byteLength);
      await new Promise((r) => setTimeout(r, 50));
    }
    streaming = false;
    await pump;
    const loaded = parseMetrics(await scrape(relay.url));
    assert.equal(sample(loaded, "baton_sessions_live"), 20);
    assert.ok(sample(loaded, "baton_events_ingested_total") > 1000);
    assert.ok(sample(loaded, "baton_events_sent_total") > 1000);
    // No label per session, viewer or user: only the digits of the values change.
    const idleBytes = new TextEncoder().encode(idle).byteLength;
    for (const size of sizes) {
      assert.ok(size < idleBytes + 1024, `a scrape of ${size} bytes, ${idleBytes} idle`);
      assert.ok(size < 16 * 1024, `a scrape of ${size} bytes`);
    }
  } finally {
    streaming = false;
    await Promise.all(viewers.map((v) => v.close()));
    for (const r of runners) r.ws.close();
    await relay.stop();
  }
});

/** Mounts a tmpfs of `mb` MB on `dir`; false when this machine does not let us (not root). */
async function mountTmpfs(dir: string, mb: number): Promise<boolean> {
  try {
    const out = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", `size=${mb}m,mode=0700`, "tmpfs", dir],
      stdout: "null",
      stderr: "null",
    }).output();
    return out.success;
  } catch {
    return false;
  }
}

/** Writes zeros to `path` until the file system is full. */
async function fillDisk(path: string): Promise<void> {
  const file = await Deno.open(path, { create: true, write: true });
  const chunk = new Uint8Array(64 * 1024);
  try {
    while (true) await file.write(chunk);
  } catch (err) {
    if (!/space|ENOSPC/i.test(String(err))) throw err;
  } finally {
    file.close();
  }
}

Deno.test("GET /ready turns 503 while the data folder's disk is full, and 200 once there is room", async (t) => {
  const mountPoint = await tempDir("baton-full-");
  if (!await mountTmpfs(mountPoint, 16)) {
    console.error(
      "skipped: a tmpfs cannot be mounted here (needs root); the full disk is not tried",
    );
    return;
  }
  const llm = MockLlm.start();
  let relay: RelayProcess | undefined;
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    relay = await RelayProcess.start({ dataDir: join(mountPoint, "data") });
    const url = relay.url;
    const user = await signUp(url);
    const home = await tempDir();
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: url, apiKey: user.apiKey, home });
    const [r] = await (await user.api("/api/runners")).json();
    assert.equal((await ready(url)).status, 200);

    const pieces = Array.from({ length: 400 }, (_, i) => `f${i} `.repeat(50));
    llm.enqueue({ text: pieces, chunkDelayMs: 25 });
    const spawned = await (await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: "fill" }),
    )).json();
    const viewer = await Viewer.connect(url, { apiKey: user.apiKey });
    try {
      viewer.subscribe(spawned.sessionId);
      await viewer.waitForEvent(spawned.sessionId, "message_update");
      const filler = join(mountPoint, "filler");
      await fillDisk(filler);

      await t.step("the store check fails, naming the write that failed", async () => {
        const failing = await eventually("readiness to fail", async () => {
          const res = await ready(url);
          return res.status === 503 ? res.body : undefined;
        }, 20_000);
        assert.equal(failing.error?.code, "not_ready");
        assert.equal(failing.checks.store?.ok, false);
        assert.match(failing.checks.store?.error ?? "", /Storing events failed .*full/i);
        const s = parseMetrics(await scrape(url));
        assert.ok(sample(s, "baton_commit_failures_total") > 0);
        assert.equal((await fetch(`${url}/health`)).status, 200, "still alive");
      });

      await t.step("room again: the runner's events go through and the node is ready", async () => {
        await Deno.remove(filler);
        await eventually("readiness to return", async () => {
          return (await ready(url)).status === 200 ? true : undefined;
        }, 30_000);
        // The events refused meanwhile were sent again and stored: the stream completes.
        await viewer.waitForEvent(spawned.sessionId, "agent_end", 60_000);
        const s = parseMetrics(await scrape(url));
        assert.ok(sample(s, "baton_events_ingested_total") > 0);
      });
      ok = true;
    } finally {
      await viewer.close();
    }
  } finally {
    if (!ok && relay) console.error(relay.proc.output());
    await runner?.stop();
    await relay?.stop();
    await llm.close();
    await new Deno.Command("umount", { args: ["-l", mountPoint] }).output().catch(() => {});
  }
});

Deno.test("on SIGTERM with BATON_SHUTDOWN_DRAIN_MS the relay keeps serving with /ready at 503 (draining), then exits", async (t) => {
  await t.step("the drain runs out by itself", async () => {
    const relay = await RelayProcess.start({
      args: ["--allow-signup"],
      env: { BATON_SHUTDOWN_DRAIN_MS: "8000" },
    });
    try {
      const user = await signUp(relay.url);
      assert.equal((await ready(relay.url)).status, 200);
      relay.proc.kill("SIGTERM");
      await relay.proc.waitFor(/draining for 8000 ms/);
      const r = await ready(relay.url);
      assert.equal(r.status, 503);
      assert.equal(r.body.error?.message, "Not ready: draining");
      assert.deepEqual(r.body.checks.draining, { ok: false, ms: 0, error: "Shutting down" });
      assert.equal(r.body.checks.store?.ok, true, "the node itself is sound");
      // Everything else is still served while the balancer moves away.
      assert.equal((await user.api("/api/sessions")).status, 200);
      assert.equal((await fetch(`${relay.url}/health`)).status, 200);
      assert.equal((await within(relay.proc.status, 20_000, "the relay to exit")).code, 0);
    } finally {
      await relay.stop();
    }
  });

  await t.step("a second signal ends a long drain at once", async () => {
    const relay = await RelayProcess.start({ env: { BATON_SHUTDOWN_DRAIN_MS: "600000" } });
    try {
      relay.proc.kill("SIGTERM");
      await relay.proc.waitFor(/draining for 600000 ms/);
      assert.equal((await ready(relay.url)).status, 503);
      relay.proc.kill("SIGTERM");
      assert.equal((await within(relay.proc.status, 20_000, "the relay to exit")).code, 0);
    } finally {
      await relay.stop();
    }
  });

  await t.step("without it, the relay closes at once on SIGTERM", async () => {
    const relay = await RelayProcess.start();
    try {
      relay.proc.kill("SIGTERM");
      assert.equal((await within(relay.proc.status, 20_000, "the relay to exit")).code, 0);
      assert.equal(relay.proc.count(/draining for/), 0, "no drain period");
    } finally {
      await relay.stop();
    }
  });
});
