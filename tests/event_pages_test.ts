/**
 * `GET /api/sessions/{id}/events` in pages capped in bytes, streamed: every
 * event exactly once in order through `next`, and a relay whose memory stays
 * bounded while several clients read a log of big events at once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PAGE_BYTES } from "../relay/event_pages.ts";
import type { SessionEventsResponse } from "../shared/api.ts";
import type { SessionEvent } from "../shared/protocol.ts";
import { assertContiguous, signUp, storedEvents, type User } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession, toolOutput } from "./harness/fake_runner.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { RelayProcess } from "./harness/procs.ts";

const MB = 1024 * 1024;

/** The resident set size of a process, in bytes. */
function rssOf(pid: number, gone = 0): number {
  try {
    const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
    return m ? Number(m[1]) * 1024 : gone;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return gone;
    throw err;
  }
}

/** Tool output of about `chars` characters whose text is a pure function of its seq. */
function bigOutput(seq: number, chars: number): string {
  // An emoji is a surrogate pair: streamed in pieces, none may be cut in two.
  const unit = `<${seq}>🦀é`;
  return unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars - 1) + "|";
}

/** Streams events of the given sizes (one per frame: a frame has at most 8 MiB). */
async function storeEvents(fake: FakeRunner, id: string, sizes: number[]): Promise<void> {
  await fake.stream(
    id,
    sizes.length,
    (seq) => toolOutput(`c${seq}`, bigOutput(seq, sizes[seq - 1]!)),
    {
      frameEvents: 1,
      windowEvents: 4,
    },
  );
}

async function page(user: User, id: string, query: string): Promise<SessionEventsResponse> {
  const res = await user.api(`/api/sessions/${id}/events?${query}`);
  const text = await res.text();
  assert.equal(res.status, 200, text.slice(0, 300));
  return JSON.parse(text);
}

Deno.test("the stored log comes in pages capped in bytes, and next walks it exactly once in order", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
  try {
    const id = await spawnSession(user, fake.runnerId);
    // Small events, events around the cap, and events bigger than a page
    // (up to the relay's 2 MiB limit on one event).
    const sizes = [
      ...Array(300).fill(200),
      300_000,
      600_000,
      900_000,
      1.9 * MB,
      100,
      1.5 * MB,
      ...Array(50).fill(70_000),
      1.9 * MB,
    ];
    await storeEvents(fake, id, sizes);
    const expected: SessionEvent[] = sizes.map((n, i) => ({
      seq: i + 1,
      ts: 0,
      e: toolOutput(`c${i + 1}`, bigOutput(i + 1, n)),
    }));

    await t.step("each page is at most PAGE_BYTES of events, or one bigger event", async () => {
      let since = 0;
      let pages = 0;
      const seen: SessionEvent[] = [];
      while (true) {
        const p = await page(user, id, `since=${since}&limit=5000`);
        pages++;
        const bytes = p.events.reduce((n, e) => n + JSON.stringify(e).length, 0);
        assert.ok(p.events.length > 0, `page after ${since} is not empty`);
        assert.ok(
          bytes <= PAGE_BYTES || p.events.length === 1,
          `page after ${since}: ${p.events.length} events, ${bytes} bytes`,
        );
        assert.equal(p.next, p.events.at(-1)!.seq);
        seen.push(...p.events);
        if (!p.hasMore) break;
        since = p.next;
      }
      assert.ok(pages >= 6, `${pages} pages`);
      assertContiguous(seen);
      assert.equal(seen.length, sizes.length);
      assert.deepEqual(seen.map((e) => e.e), expected.map((e) => e.e), "bodies arrive intact");
    });

    await t.step("limit still caps the events of a page, and next follows it", async () => {
      const p = await page(user, id, "since=10&limit=7");
      assert.deepEqual(p.events.map((e) => e.seq), [11, 12, 13, 14, 15, 16, 17]);
      assert.equal(p.next, 17);
      assert.equal(p.hasMore, true);
      const all = await storedEvents(user, id, { limit: 37 });
      assertContiguous(all);
      assert.equal(all.length, sizes.length);
    });

    await t.step("past the end: an empty page whose next is since and hasMore false", async () => {
      const p = await page(user, id, `since=${sizes.length}`);
      assert.deepEqual(p, {
        t: "events",
        sessionId: id,
        events: [],
        next: sizes.length,
        hasMore: false,
      });
    });
  } finally {
    await fake.close();
  }
});

Deno.test("eight clients reading a log of big events at once keep the relay's memory bounded", async () => {
  const relay = await RelayProcess.start({
    // A heap limit well below one full read (190 MB), let alone eight: a
    // relay that built the page whole would run out of heap and die. Without
    // a limit V8 let garbage of the reads (a fresh string per event read)
    // pile up to ~235 MB over idle before collecting, which says nothing
    // about what the reads hold.
    env: { DENO_V8_FLAGS: "--max-old-space-size=96" },
  });
  let fake: FakeRunner | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    const id = await spawnSession(user, fake.runnerId);
    const count = Number(Deno.env.get("BATON_TEST_BIG_EVENTS") ?? 100);
    const size = 1.9 * MB; // 190 MB of events: the finding's 120 events of 1.9 MB, scaled down.
    await storeEvents(fake, id, Array(count).fill(size));
    // A fresh relay on the same data: what the ingest left in its heap says
    // nothing about reading.
    await fake.close();
    await relay.stop();
    await relay.restart();

    const pid = relay.proc.pid;
    const idle = rssOf(pid);
    let peak = idle;
    const sampler = setInterval(() => {
      // A relay that ran out of memory has no VmRSS any more (and the reads fail).
      peak = Math.max(peak, rssOf(pid, peak));
    }, 20);
    const started = Date.now();
    let reads: SessionEvent[][];
    try {
      reads = await Promise.all(Array.from({ length: 8 }, () => storedEvents(user, id)));
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, rssOf(pid));
    console.log(
      `8 × ${count} events of 1.9 MB read in ${Date.now() - started} ms; relay RSS idle ${
        (idle / MB).toFixed(0)
      } MB, peak ${(peak / MB).toFixed(0)} MB`,
    );
    for (const events of reads) {
      assertContiguous(events);
      assert.equal(events.length, count);
    }
    // Built whole, each read held its 190 MB page (and its copies) at once.
    assert.ok(peak - idle < 150 * MB, `relay RSS grew by ${((peak - idle) / MB).toFixed(0)} MB`);
    ok = true;
  } finally {
    await fake?.close();
    if (!ok) console.error(relay.proc.output());
    await relay.stop();
    await Deno.remove(relay.home, { recursive: true }).catch(() => {});
  }
});
