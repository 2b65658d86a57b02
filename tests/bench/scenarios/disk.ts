/**
 * Scenario 10: what a day of heavy use costs on disk, and what retention
 * gives back without a stop. A relay (in this process, on its real SQLite
 * file) takes a day's sessions from a runner: each one starts, streams the
 * fan-out workload (text deltas, a 4 KB tool output every tenth event) and
 * ends. Then the relay starts again with a relay-wide size limit of half
 * what it holds: its sweep deletes the oldest half, and the file is measured
 * once the space is given back, with the relay serving throughout (the
 * longest stall of its event loop meanwhile is reported).
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { serveRelay } from "../../../relay/serve.ts";
import type { SessionEventBody } from "../../../shared/protocol.ts";
import { signUp } from "../../harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "../../harness/fake_runner.ts";
import type { BenchContext } from "../_report.ts";
import { bodyJson } from "../_workload.ts";

const MB = 1024 * 1024;
const START: SessionEventBody = { type: "session_start", cwd: "/fake" };
const END: SessionEventBody = { type: "session_end", reason: "ended", message: "Done" };

/** Bytes of the database and its WAL (the relay truncates the WAL at a clean stop). */
function dbBytes(dataDir: string): number {
  let n = 0;
  for (const f of ["relay.db", "relay.db-wal"]) {
    try {
      n += Deno.statSync(join(dataDir, f)).size;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }
  return n;
}

/** Sessions, events and event JSON bytes as the relay's rows count them. */
function stored(dataDir: string): { sessions: number; events: number; json: number } {
  const db = new DatabaseSync(join(dataDir, "relay.db"), { readOnly: true });
  try {
    return db.prepare(
      "SELECT COUNT(*) AS sessions, COALESCE(SUM(last_seq), 0) AS events, " +
        "COALESCE(SUM(event_bytes), 0) AS json FROM sessions",
    ).get() as { sessions: number; events: number; json: number };
  } finally {
    db.close();
  }
}

/** Runs the disk scenario (one round of it). */
export async function disk(ctx: BenchContext): Promise<void> {
  const sessions = ctx.quick ? 10 : 50;
  const perSession = ctx.quick ? 1000 : 3000;
  const dataDir = await Deno.makeTempDir({ prefix: "baton-bench-disk-" });
  const off = { maxAgeDays: 0, userMaxBytes: 0, maxBytes: 0 };
  const serve = (retention = off) =>
    serveRelay({ hostname: "127.0.0.1", port: 0, dataDir, retention });
  const bodies = new Map<number, SessionEventBody>();
  const body = (seq: number): SessionEventBody => {
    let b = bodies.get(seq);
    if (!b) bodies.set(seq, b = JSON.parse(bodyJson(seq)) as SessionEventBody);
    return b;
  };
  try {
    // The day: every session starts, streams and ends, one after another.
    let served = await serve();
    const user = await signUp(served.url);
    const runner = await FakeRunner.connect(served.url, { apiKey: await runnerToken(user) });
    const t0 = performance.now();
    try {
      for (let i = 0; i < sessions; i++) {
        const id = await spawnSession(user, runner.runnerId);
        const last = perSession + 2;
        await runner.stream(
          id,
          last,
          (seq) => seq === 1 ? START : seq === last ? END : body(seq - 1),
          { frameEvents: 100 },
        );
      }
    } finally {
      await runner.close();
    }
    const streamed = (performance.now() - t0) / 1000;
    await served.shutdown();
    const full = dbBytes(dataDir);
    const day = stored(dataDir);
    ctx.log(
      `${day.sessions} sessions, ${day.events} events, ${(day.json / MB).toFixed(1)} MB of ` +
        `event JSON in ${streamed.toFixed(1)} s; relay.db ${(full / MB).toFixed(1)} MB`,
    );
    // Everything in the file counts (accounts and the schema are a few hundred KB).
    const perEvent = full / day.events;
    const jsonPerEvent = day.json / day.events;
    ctx.row({
      scenario: "10 disk",
      case: `a heavy day: ${sessions} sessions × ${perSession} events (${
        (day.json / MB).toFixed(0)
      } MB of event JSON)`,
      metric: "bytes on disk per event",
      baton: { name: "baton", value: perEvent, text: `${perEvent.toFixed(0)} B` },
      baselines: [{
        name: "event JSON",
        value: jsonPerEvent,
        text: `${jsonPerEvent.toFixed(0)} B`,
      }],
      ratios: [{ of: 0, label: "the JSON" }],
      goal: {
        text: "≤ 1.3× the events' JSON",
        test: ({ ratios: [r] }) => r! <= 1.3,
      },
      note: `relay.db ${(full / MB).toFixed(1)} MB for the day, ${
        (full / day.sessions / 1024).toFixed(0)
      } KB per session`,
      detail: { sessions, perSession, full, stored: day, streamedSeconds: streamed },
    });

    // Retention, live: a limit of half what the relay holds, and the space given back.
    served = await serve({ ...off, maxBytes: Math.floor(day.json / 2) });
    let worstStall = 0;
    let tick = performance.now();
    const probe = setInterval(() => {
      const now = performance.now();
      worstStall = Math.max(worstStall, now - tick - 10);
      tick = now;
    }, 10);
    const t1 = performance.now();
    const swept = await served.relay.hub.retention.sweep();
    await served.relay.hub.retention.idle();
    const reclaimMs = performance.now() - t1;
    clearInterval(probe);
    // The live file shrinks at the next checkpoint (every 200 ms) and the WAL
    // once emptied (a second after the last step): wait for the size to hold
    // still for 1.5 s.
    let live = dbBytes(dataDir);
    for (let still = 0, until = Date.now() + 6000; still < 15 && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 100));
      const now = dbBytes(dataDir);
      still = now === live ? still + 1 : 0;
      live = now;
    }
    await served.shutdown();
    const after = dbBytes(dataDir);
    const kept = stored(dataDir);
    ctx.log(
      `retention removed ${swept.sessions} sessions (${(swept.eventBytes / MB).toFixed(1)} MB) in ${
        reclaimMs.toFixed(0)
      } ms with space given back; longest loop stall ${worstStall.toFixed(0)} ms; relay.db ${
        (full / MB).toFixed(1)
      } → ${(live / MB).toFixed(1)} MB live, ${(after / MB).toFixed(1)} MB after stop`,
    );
    ctx.row({
      scenario: "10 disk",
      case: `retention deletes the older half (${swept.sessions} sessions) without a stop`,
      metric: "relay.db after the space is given back",
      baton: { name: "baton", value: live, text: `${(live / MB).toFixed(1)} MB` },
      baselines: [{ name: "before", value: full, text: `${(full / MB).toFixed(1)} MB` }],
      ratios: [{ of: 0, label: "of before" }],
      goal: {
        text: "≤ 0.55 of before, in the running relay",
        test: ({ ratios: [r] }) => r! <= 0.55,
      },
      note: `deleting and giving back took ${(reclaimMs / 1000).toFixed(1)} s; longest event ` +
        `loop stall meanwhile ${worstStall.toFixed(0)} ms; ${kept.sessions} sessions kept`,
      detail: { swept, reclaimMs, worstStall, live, after, kept },
    });
  } finally {
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}
