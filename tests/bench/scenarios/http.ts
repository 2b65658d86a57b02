/**
 * Scenario 6: requests/s of `GET /api/sessions` with 1,000 sessions and
 * cookie auth, against a bare Hono handler returning the same JSON. Load
 * from Debian's `wrk` when installed, else from a Deno fetch loop (noted).
 *
 * @module
 */
import { join } from "node:path";
import { BenchProcess } from "../_proc.ts";
import type { BenchContext } from "../_report.ts";
import { ms, si } from "../_stats.ts";
import { spawnSession, SyntheticRunner } from "../clients/synthetic_runner.ts";
import { startServer } from "./fanout.ts";

interface HttpResult {
  requestsPerSec: number;
  /** Requests answered in the run. */
  requests: number;
  non2xx: number;
  latency: { p50: number; p99: number };
  tool: string;
}

/** Whether Debian's wrk is on the PATH. */
export async function hasWrk(): Promise<boolean> {
  try {
    const out = await new Deno.Command("wrk", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    })
      .output();
    return out.code === 0 || out.code === 1;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

function wrkMs(text: string, re: RegExp): number {
  const m = text.match(re);
  if (!m) return NaN;
  const v = Number(m[1]);
  return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v;
}

async function load(
  url: string,
  headers: Record<string, string>,
  seconds: number,
  wrk: boolean,
): Promise<HttpResult> {
  const connections = 16;
  if (wrk) {
    const out = await new Deno.Command("wrk", {
      args: [
        "-t1",
        `-c${connections}`,
        `-d${seconds}s`,
        "--latency",
        ...Object.entries(headers).flatMap(([k, v]) => ["-H", `${k}: ${v}`]),
        url,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    const rps = Number(text.match(/Requests\/sec:\s+([\d.]+)/)?.[1] ?? NaN);
    return {
      requestsPerSec: rps,
      requests: Number(text.match(/(\d+) requests in/)?.[1] ?? NaN),
      non2xx: Number(text.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0),
      latency: {
        p50: wrkMs(text, /^\s+50%\s+([\d.]+)(us|ms|s)/m),
        p99: wrkMs(text, /^\s+99%\s+([\d.]+)(us|ms|s)/m),
      },
      tool: "wrk",
    };
  }
  const proc = BenchProcess.start("http-load", "load/http.ts", {
    args: [JSON.stringify({ url, headers, connections, durationMs: seconds * 1000 })],
  });
  try {
    const r = await proc.message<HttpResult>("result", seconds * 1000 + 30_000);
    return { ...r, requests: r.requestsPerSec * seconds, tool: "deno fetch" };
  } finally {
    await proc.stop();
  }
}

/** A load run with the server's CPU time per answered request. */
async function measured(
  server: BenchProcess,
  run: () => Promise<HttpResult>,
): Promise<HttpResult & { cpuMsPerRequest: number }> {
  const before = server.stat().cpuMs;
  const r = await run();
  return { ...r, cpuMsPerRequest: (server.stat().cpuMs - before) / r.requests };
}

/** Runs the HTTP scenario. */
export async function http(ctx: BenchContext): Promise<void> {
  const wrk = await hasWrk();
  if (!wrk) {
    ctx.log("wrk is not installed (apt-get install wrk): falling back to a Deno fetch loop");
  }
  const sessions = 1000;
  const seconds = ctx.quick ? 1 : 5;
  const baton = await startServer(ctx, "baton");
  let bareProc: BenchProcess | null = null;
  const tmp = await Deno.makeTempDir({ prefix: "baton-bench-http-" });
  try {
    // 1,000 sessions through the API; half of them ended, as on a relay in use.
    const runner = await SyntheticRunner.connect({ url: baton.url, apiKey: baton.apiKey });
    for (let i = 0; i < sessions; i += 25) {
      const ids = await Promise.all(
        Array.from(
          { length: Math.min(25, sessions - i) },
          (_, j) =>
            spawnSession(baton.url, baton.apiKey, runner.runnerId, `Task ${i + j}: fix the tests`),
        ),
      );
      for (const [j, id] of ids.entries()) {
        const events = [{
          seq: 1,
          ts: Date.now(),
          e: { type: "session_start", cwd: "/tmp", model: { provider: "mock", id: "mock-1" } },
        }];
        if ((i + j) % 2 === 0) {
          events.push({
            seq: 2,
            ts: Date.now(),
            e: { type: "session_end", reason: "ended" } as never,
          });
        }
        runner.send(JSON.stringify({ t: "events", sessionId: id, events }));
      }
    }
    // A user who signed in in the browser: the session cookie, not the key.
    const cookie = baton.user!.cookie;
    const url = `${baton.url}/api/sessions`;
    const first = await fetch(url, { headers: { cookie } });
    if (!first.ok) throw new Error(`GET /api/sessions failed: ${first.status}`);
    const bodyText = await first.text();
    const listed = JSON.parse(bodyText);
    const count = listed.sessions.length + listed.persistedSessions.length;
    if (count !== sessions) throw new Error(`Listed ${count} sessions, expected ${sessions}`);
    runner.close();
    const file = join(tmp, "sessions.json");
    await Deno.writeTextFile(file, bodyText);
    bareProc = BenchProcess.start("bare-http", "servers/bare_http.ts", {
      args: [file],
      prefix: ctx.pinning.serverPrefix(),
    });
    const bareUrl = (await bareProc.message<{ url: string }>("listening")).url;

    const b = await measured(baton.proc, () => load(url, { cookie }, seconds, wrk));
    const a = await measured(bareProc, () => load(`${bareUrl}/api/sessions`, {}, seconds, wrk));
    ctx.log(
      `http: baton ${si(b.requestsPerSec)} req/s (p50 ${ms(b.latency.p50)}), ` +
        `bare ${si(a.requestsPerSec)} req/s (p50 ${ms(a.latency.p50)}); ${b.non2xx} non-2xx; ` +
        `server CPU per request: baton ${b.cpuMsPerRequest.toFixed(3)} ms, ` +
        `bare ${a.cpuMsPerRequest.toFixed(3)} ms`,
    );
    ctx.row({
      scenario: "6 HTTP",
      // The body's size varies by a KB with the ids: it goes in the note, not the row's name.
      case: `GET /api/sessions, ${sessions} sessions, cookie`,
      metric: "requests/s (p50 / p99)",
      baton: {
        name: "baton",
        value: b.requestsPerSec,
        text: `${si(b.requestsPerSec)} (${ms(b.latency.p50)} / ${ms(b.latency.p99)})`,
      },
      baselines: [{
        name: "bare Hono",
        value: a.requestsPerSec,
        text: `${si(a.requestsPerSec)} (${ms(a.latency.p50)} / ${ms(a.latency.p99)})`,
      }],
      ratios: [{ of: 0 }],
      // CPU per request holds when the machine is busy; requests/s does not.
      note: `${(bodyText.length / 1024).toFixed(0)} KB; ${b.tool}, 16 connections; ` +
        `server CPU per request ${b.cpuMsPerRequest.toFixed(2)} ms (bare ${
          a.cpuMsPerRequest.toFixed(2)
        } ms)` +
        (wrk ? "" : " (wrk missing: apt-get install wrk)") +
        (b.non2xx ? `; ${b.non2xx} non-2xx answers` : ""),
      detail: { baton: b, bare: a },
    });
  } finally {
    await baton.proc.stop();
    await bareProc?.stop();
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
}
