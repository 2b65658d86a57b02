/**
 * JSON from outside a process, parsed with a cap on nesting depth.
 *
 * V8's `JSON.parse` takes 200,000 levels of `[` without complaint, but what
 * comes after is recursive: `JSON.stringify` (sending the value on), schema
 * checks and filter matching threw `RangeError` (maximum call stack) on such
 * a trigger payload, which became a 500 with the request left pending, and a
 * broadcast that silently reached no one. Nothing baton carries needs more
 * than a few levels, so every body and message is scanned before it is
 * parsed, in one pass that keeps no stack of its own.
 *
 * @module
 */

/** Deepest nesting of arrays and objects a client's JSON body or message may have. */
export const MAX_JSON_DEPTH = 64;

/**
 * Deepest nesting of a message between the relay and a runner: what a client
 * sent (up to MAX_JSON_DEPTH, say a trigger payload) travels inside the
 * channel's own envelope (a request, an event, an `events` frame).
 */
export const MAX_LINK_DEPTH = 2 * MAX_JSON_DEPTH;

/**
 * Deepest nesting a session event body (`e`) may have: the runner replaces a
 * deeper one by a marker (see `capEvent`), so that the `events` frame that
 * carries it (three levels more) is never refused by the relay. A trigger's
 * payload fits, inside its `trigger_delivered` event.
 */
export const MAX_EVENT_DEPTH = MAX_LINK_DEPTH - 16;

/** JSON nested deeper than allowed; callers answer it as `too_deep`. */
export class JsonTooDeepError extends Error {
  constructor(readonly maxDepth: number) {
    super(`JSON is nested deeper than ${maxDepth} levels`);
    this.name = "JsonTooDeepError";
  }
}

/**
 * Whether `text` opens more than `maxDepth` arrays or objects inside one
 * another (brackets inside strings do not count). It does not check the
 * rest of the syntax: `JSON.parse` does that afterwards.
 */
export function jsonTooDeep(text: string, maxDepth: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Jump to the closing quote: one not preceded by an odd run of backslashes.
      let from = i + 1;
      while (true) {
        const q = text.indexOf('"', from);
        if (q < 0) return false; // Unterminated: not JSON, JSON.parse says so.
        let k = q - 1;
        while (k > i && text.charCodeAt(k) === 0x5c /* \ */) k--;
        if ((q - 1 - k) % 2 === 0) {
          i = q;
          break;
        }
        from = q + 1;
      }
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return false;
}

/**
 * `JSON.parse` behind the depth scan: the one way baton reads JSON it did
 * not write itself. Throws {@linkcode JsonTooDeepError}, or `SyntaxError`
 * for text that is not JSON.
 */
export function parseJson(text: string, maxDepth: number = MAX_JSON_DEPTH): unknown {
  if (jsonTooDeep(text, maxDepth)) throw new JsonTooDeepError(maxDepth);
  return JSON.parse(text);
}

/** Whether `v` is a JSON object (not null, not an array). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
