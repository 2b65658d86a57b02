/**
 * A session's stored log as pages for `GET /api/sessions/{id}/events`: each
 * page capped in events and in bytes, and streamed as it is read from the
 * store, so a reader of a log of big events costs the relay one step of
 * reading, not the page (nor the log).
 *
 * @module
 */
import { CATCH_UP_BYTES, CATCH_UP_EVENTS } from "./fanout.ts";
import type { StoredEvent } from "./store/mod.ts";

/**
 * Most bytes of event JSON in one page; a single bigger event is a page by
 * itself. Before pages had a byte cap, eight concurrent reads of a log of 120
 * events of 1.9 MB (229 MB each, built whole) took the relay from 0.88 GB to
 * 3.6 GB. A page is streamed, so its size does not decide the relay's memory
 * (one step does); the cap bounds what a client must hold and how long one
 * answer runs.
 */
export const PAGE_BYTES = 1024 * 1024;
/** Most events in one page (the `limit` query's ceiling). */
export const PAGE_EVENTS = 5000;
/**
 * Largest piece of text encoded and written at a time: a big event goes out
 * in pieces as the socket takes them rather than as one copy of its size.
 */
const PIECE_CHARS = 64 * 1024;

/** What a page needs of the store. */
export interface EventLog {
  /** As `EventsRepo.after`: events after `seq`, at most `limit` and `maxBytes` (at least one). */
  after(sessionId: string, seq: number, limit: number, maxBytes: number): Promise<StoredEvent[]>;
  /** The highest stored seq of a session (0 when none). */
  maxSeq(sessionId: string): Promise<number>;
}

/** Options of {@linkcode eventPage}. */
export interface EventPageOptions {
  /** Events after this seq. */
  since: number;
  /** At most this many events (1 to PAGE_EVENTS). */
  limit: number;
  /** Default PAGE_BYTES. */
  maxBytes?: number;
}

/**
 * The page as a stream of the viewer channel's `events` frame with where the
 * next page starts: `{"t":"events","sessionId","events":[...],"next","hasMore"}`.
 * `next` is the last seq in the page (`since` when it is empty): the `since`
 * of the next request. `hasMore` says whether the log held more when the page
 * ended.
 */
export function eventPage(
  log: EventLog,
  sessionId: string,
  options: EventPageOptions,
): ReadableStream<Uint8Array> {
  const maxBytes = options.maxBytes ?? PAGE_BYTES;
  const encoder = new TextEncoder();
  let next = options.since;
  let count = 0;
  let bytes = 0;
  let ended = false;
  let closed = false;
  // Text waiting to be written, and how far into its first string it went.
  const pending: string[] = [
    `{"t":"events","sessionId":${JSON.stringify(sessionId)},"events":[`,
  ];
  let offset = 0;

  /** Reads the next step of the page from the store into `pending`, or ends the page. */
  async function readStep(): Promise<void> {
    const room = maxBytes - bytes;
    const events = count < options.limit && (count === 0 || room > 0)
      ? await log.after(
        sessionId,
        next,
        Math.min(options.limit - count, CATCH_UP_EVENTS),
        Math.min(count === 0 ? CATCH_UP_BYTES : room, CATCH_UP_BYTES),
      )
      : [];
    // `after` returns a first event past `room` whatever its size: it starts the next page.
    const take = count > 0 && events[0] && events[0].json.length > room ? [] : events;
    for (const ev of take) {
      pending.push(count++ === 0 ? ev.json : "," + ev.json);
      bytes += ev.json.length;
      next = ev.seq;
    }
    if (take.length === 0) {
      ended = true;
      const hasMore = await log.maxSeq(sessionId) > next;
      pending.push(`],"next":${next},"hasMore":${hasMore}}`);
    }
  }

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (closed) return;
      while (pending.length === 0 && !ended) await readStep();
      if (closed) return;
      const head = pending[0];
      if (head === undefined) {
        closed = true;
        controller.close();
        return;
      }
      let end = Math.min(head.length, offset + PIECE_CHARS);
      // Never between the two halves of a surrogate pair (each would become U+FFFD).
      if (end < head.length && isHighSurrogate(head.charCodeAt(end - 1))) end--;
      controller.enqueue(encoder.encode(head.slice(offset, end)));
      if (end === head.length) {
        pending.shift();
        offset = 0;
      } else offset = end;
    },
    cancel() {
      closed = true;
      pending.length = 0;
    },
  }, { highWaterMark: 0 });
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
