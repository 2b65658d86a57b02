/**
 * What NatsBus puts on the wire: subjects (ids made safe as tokens) and the
 * events message (a JSON line of seqs and lengths, then the events' stored
 * JSON back to back, so no event is parsed or escaped again on the way).
 *
 * @module
 */
import { errors } from "@nats-io/transport-node";
import { rejected } from "../errors.ts";
import { errorToWire, type WireError } from "./_common.ts";
import type { StoredEvent } from "./types.ts";

/**
 * Most characters of event JSON in one bus message. Small enough that one
 * commit of a busy session does not hold the connection for long, large
 * enough that 10,000 small events travel in a few dozen messages.
 */
const EVENT_BATCH_CHARS = 256 * 1024;

const encoder = new TextEncoder();

/** A subject token for an id: itself when plain, else `=` and its base64url. */
export function subjectToken(id: string): string {
  if (/^[A-Za-z0-9_-]{1,200}$/.test(id)) return id;
  let bin = "";
  for (const b of encoder.encode(id)) bin += String.fromCharCode(b);
  return "=" + btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

export const subjects = {
  runner: (runnerId: string) => `baton.runner.${subjectToken(runnerId)}`,
  events: (userId: string, sessionId: string) =>
    `baton.events.${subjectToken(userId)}.${subjectToken(sessionId)}`,
  /** Every user's events of one session. */
  sessionEvents: (sessionId: string) => `baton.events.*.${subjectToken(sessionId)}`,
  state: (userId: string) => `baton.state.${subjectToken(userId)}`,
  nodes: "baton.nodes.*",
  node: (kind: "announce" | "hello" | "leave") => `baton.nodes.${kind}`,
} as const;

/** The subjects of byte streams across nodes (_nats_streams.ts). */
export const streamSubjects = {
  /** Channel opens for a runner, answered by the node holding its tunnel. */
  tunnel: (runnerId: string) => `baton.tunnel.${subjectToken(runnerId)}`,
  /** A channel's messages to one node. */
  channel: (nodeId: string, channelId: string) => `baton.chan.${nodeId}.${channelId}`,
  /** Every channel message to one node. */
  inbox: (nodeId: string) => `baton.chan.${nodeId}.*`,
} as const;

/** A URL fit for a log line: without its user and password. */
export function redacted(url: string): string {
  return url.replace(/\/\/[^@/]*@/, "//");
}

/** The first line of an events message. */
interface EventsMeta {
  u: string;
  s: string;
  q: number[];
  l: number[];
  /** A tail notice: the session's events reach this seq (sent after an outage). */
  t?: number;
}

/** One session's events as messages of at most EVENT_BATCH_CHARS of event JSON (a larger event alone). */
export function encodeEvents(
  userId: string,
  sessionId: string,
  events: readonly StoredEvent[],
): Uint8Array[] {
  const out: Uint8Array[] = [];
  let from = 0;
  while (from < events.length) {
    let to = from + 1;
    let chars = events[from]!.json.length;
    while (to < events.length && chars + events[to]!.json.length <= EVENT_BATCH_CHARS) {
      chars += events[to++]!.json.length;
    }
    const batch = events.slice(from, to);
    const meta: EventsMeta = {
      u: userId,
      s: sessionId,
      q: batch.map((e) => e.seq),
      l: batch.map((e) => e.json.length),
    };
    out.push(encoder.encode(JSON.stringify(meta) + "\n" + batch.map((e) => e.json).join("")));
    from = to;
  }
  return out;
}

/** The notice "this session's events reach `seq`". */
export function encodeTail(userId: string, sessionId: string, seq: number): Uint8Array {
  const meta: EventsMeta = { u: userId, s: sessionId, q: [], l: [], t: seq };
  return encoder.encode(JSON.stringify(meta) + "\n");
}

/** An events message of `sessionId`: its events, or its tail; null when malformed. */
export function decodeEvents(
  text: string,
  sessionId: string,
): { userId: string; events: StoredEvent[]; tail?: number } | null {
  try {
    const nl = text.indexOf("\n");
    const meta = JSON.parse(text.slice(0, nl)) as EventsMeta;
    if (
      meta.s !== sessionId || typeof meta.u !== "string" || !Array.isArray(meta.q) ||
      !Array.isArray(meta.l) || meta.q.length !== meta.l.length
    ) return null;
    if (typeof meta.t === "number") return { userId: meta.u, events: [], tail: meta.t };
    const events: StoredEvent[] = [];
    let at = nl + 1;
    for (let i = 0; i < meta.q.length; i++) {
      events.push({ seq: meta.q[i]!, json: text.slice(at, at += meta.l[i]!) });
    }
    return { userId: meta.u, events };
  } catch {
    return null;
  }
}

/** A serving node's answer: `{ok: true, data}`, or the error when it cannot be sent as it is. */
export function encodeReply(
  reply: { ok: true; data: unknown } | { ok: false; error: WireError },
  maxPayload: number,
): Uint8Array {
  const encode = (r: typeof reply) => encoder.encode(JSON.stringify(r));
  let bytes: Uint8Array;
  try {
    bytes = encode(reply);
  } catch (err) {
    bytes = encode({ ok: false, error: errorToWire(err) });
  }
  if (bytes.length <= maxPayload) return bytes;
  const error = rejected(
    "answer_too_large",
    `Runner's answer is too large for the bus: ${bytes.length} bytes (at most ${maxPayload})`,
  );
  return encode({ ok: false, error: errorToWire(error) });
}

/** Whether a request failed because nothing subscribes to its subject. */
export function isNoResponders(err: unknown): boolean {
  return err instanceof errors.NoRespondersError ||
    (err instanceof errors.RequestError && err.isNoResponders());
}
