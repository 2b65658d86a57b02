/**
 * The events every fan-out, durability and memory scenario streams: mostly
 * small text deltas, with a 4 KB tool output every tenth event, as an agent
 * that reads files and runs commands produces them.
 *
 * @module
 */

/** Size of the text in one tool output event. */
export const TOOL_OUTPUT_BYTES = 4096;
/** Every how many events one is a tool output (the rest are text deltas). */
export const TOOL_EVERY = 10;

const WORDS = [
  "the ",
  "relay ",
  "stores ",
  "each ",
  "event ",
  "before ",
  "it ",
  "fans ",
  "out ",
  "to ",
  "viewers ",
  "and ",
  "acks ",
  "runner ",
  "session ",
];

function deltaText(seq: number): string {
  let s = "";
  for (let i = 0; i < 6; i++) s += WORDS[(seq * 7 + i * 3) % WORDS.length];
  return s;
}

function toolText(bytes: number): string {
  const line = "drwxr-xr-x  2 dev dev  4096 Jan  1 12:00 src/relay/store/events.ts\n";
  let s = "";
  while (s.length < bytes) s += line;
  return s.slice(0, bytes);
}

const TOOL_TEXT = toolText(TOOL_OUTPUT_BYTES);

/** The JSON of the body of event `seq` (the `e` field). */
export function bodyJson(seq: number, toolBytes = TOOL_OUTPUT_BYTES): string {
  if (seq % TOOL_EVERY === 0) {
    return JSON.stringify({
      type: "tool_execution_update",
      toolCallId: `call_${Math.floor(seq / TOOL_EVERY)}`,
      toolName: "bash",
      partialResult: {
        content: [{
          type: "text",
          text: toolBytes === TOOL_OUTPUT_BYTES ? TOOL_TEXT : toolText(toolBytes),
        }],
      },
    });
  }
  return JSON.stringify({
    type: "message_update",
    role: "assistant",
    assistantMessageEvent: { type: "text_delta", contentIndex: 0, delta: deltaText(seq) },
  });
}

/** Caches the body JSON so the load generator spends no time building events. */
export class EventSource {
  readonly #cache: string[] = [];

  body(seq: number): string {
    const k = seq % (TOOL_EVERY * WORDS.length);
    return this.#cache[k] ??= bodyJson(seq);
  }

  /** `{"seq":..,"ts":..,"e":..}` of one event. */
  event(seq: number, ts: number): string {
    return `{"seq":${seq},"ts":${ts},"e":${this.body(seq)}}`;
  }

  /** A runner `events` frame carrying events `first..last`, as the daemon sends them. */
  frame(sessionId: string, first: number, last: number, ts: number): string {
    let body = "";
    for (let s = first; s <= last; s++) body += (s === first ? "" : ",") + this.event(s, ts);
    return `{"t":"events","sessionId":"${sessionId}","events":[${body}]}`;
  }
}

const SEQ_KEY = '{"seq":';

function intAt(text: string, i: number): number {
  let n = 0;
  for (;; i++) {
    const c = text.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return n;
    n = n * 10 + c;
  }
}

/**
 * The first and last seq of an `events` frame, read without parsing the
 * JSON (the same cheap work for every server, so the client side costs
 * little). Returns null for a frame that carries no event.
 */
export function frameSeqs(text: string): [number, number] | null {
  const i = text.indexOf(SEQ_KEY);
  if (i < 0) return null;
  const j = text.lastIndexOf(SEQ_KEY);
  return [intAt(text, i + SEQ_KEY.length), intAt(text, j + SEQ_KEY.length)];
}
