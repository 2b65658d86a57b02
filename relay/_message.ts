/**
 * The one way the relay's WebSocket channels (viewer, runner control) read a
 * text message: nesting capped before parsing (shared/json.ts), then a JSON
 * object or the error frame that answers it.
 *
 * @module
 */
import { JsonTooDeepError, MAX_JSON_DEPTH, parseJson } from "../shared/json.ts";

/** A channel message parsed, or the code and message of the error frame that answers it. */
export type ParsedMessage =
  | { ok: true; msg: Record<string, unknown> }
  | { ok: false; code: "too_deep" | "bad_json"; message: string };

/**
 * A text message of a WebSocket channel as a JSON object: `too_deep` past
 * the nesting cap of shared/json.ts (checked before parsing), `bad_json` for
 * anything else. The viewer and runner sockets both read messages with it
 * (the runner's with MAX_LINK_DEPTH).
 */
export function parseMessage(text: string, maxDepth: number = MAX_JSON_DEPTH): ParsedMessage {
  let msg: unknown;
  try {
    msg = parseJson(text, maxDepth);
  } catch (err) {
    if (err instanceof JsonTooDeepError) {
      return {
        ok: false,
        code: "too_deep",
        message: `Message is nested deeper than ${err.maxDepth} levels`,
      };
    }
    return { ok: false, code: "bad_json", message: "Message is not a JSON object" };
  }
  if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
    return { ok: false, code: "bad_json", message: "Message is not a JSON object" };
  }
  return { ok: true, msg: msg as Record<string, unknown> };
}

/**
 * A value from a message, shown in an error message: at most `max`
 * characters, whatever it is. `String()` throws on an object whose
 * `toString` is not a function (`{"toString": "/"}`), and a throw in a
 * socket's message handler ended the relay process.
 */
export function shown(value: unknown, max = 40): string {
  let text: string;
  try {
    text = typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
  } catch {
    text = typeof value;
  }
  return text.slice(0, max);
}

/**
 * `message` cut to a close frame's 123 bytes: ws throws on a longer reason, and
 * a hello refused with 120 non-ASCII characters was left open, its timer cleared.
 */
export function closeReason(message: string): string {
  const bytes = new TextEncoder().encode(message);
  if (bytes.byteLength <= 123) return message;
  // Decoding a cut in the middle of a character leaves U+FFFD: drop it.
  return new TextDecoder().decode(bytes.subarray(0, 120)).replace(/\uFFFD+$/, "");
}
