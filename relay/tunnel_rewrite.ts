/**
 * The HTTP tunnel's streaming rewrite of HTML, CSS and JavaScript: absolute
 * paths of the service (`src="/x"`, `href="/x"`, `action="/x"`, `url(/x)`,
 * `@import "/x"`, `import "/x"`, `from "/x"`, `import("/x")`) are put under
 * the tunnel prefix, so a dev server's page loads its assets through the
 * tunnel. Protocol-relative (`//host`) and already prefixed paths are left.
 *
 * The body is rewritten as it streams: each chunk is emitted at once except
 * its last {@linkcode CARRY_BYTES}-ish bytes, which wait for the next chunk
 * (a match is at most that long), so a pattern split across chunks is
 * found and memory stays one chunk plus the carry. The text is handled as
 * bytes (one char per byte: the patterns are ASCII), so any ASCII-based
 * charset passes unchanged and a multi-byte character split between chunks
 * is never broken.
 *
 * A compressed body (gzip, deflate, br; the runner asks the service for
 * `identity`, but not every service honours it) is decoded first, a
 * bounded piece at a time as the client reads.
 *
 * @module
 */
import { Duplex } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";

/** Which kind of text a Content-Type is, for rewriting; null: passed as is. */
export function rewriteKind(contentType: string | null): "html" | "css" | "js" | null {
  const t = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (t === "text/html" || t === "application/xhtml+xml") return "html";
  if (t === "text/css") return "css";
  if (/^(text|application)\/(x-)?(java|ecma)script$/.test(t) || t === "text/jsx") return "js";
  return null;
}

/** Longest match (keyword, blanks, quote, slash) plus the look-ahead, without the prefix. */
const CARRY_BYTES = 64;

const ATTR = String
  .raw`\b(?:src|href|action|formaction|poster|data|srcset|background)\s{0,8}=\s{0,8}["']?`;
const CSS = String.raw`\burl\(\s{0,8}["']?|@import\s{1,8}["']`;
const JS = String.raw`\b(?:import|from)\s{0,8}\(?\s{0,8}["']`;

function pattern(kind: "html" | "css" | "js", prefix: string): RegExp {
  const parts = kind === "html" ? [ATTR, CSS, JS] : kind === "css" ? [CSS] : [JS];
  // Not `//host`, `/\host`, nor a path already under the prefix.
  const done = prefix.slice(1).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(?:${parts.join("|")})\\/(?![/\\\\])(?!${done}(?:[/?#"'\\s)]|$))`, "gi");
}

/** Bytes to a string of one char per byte (and back): the patterns are ASCII. */
function toBinary(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    s += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return s;
}

function fromBinary(s: string): Uint8Array {
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/**
 * A transform that puts the absolute paths of an HTML, CSS or JS body under
 * `prefix` (e.g. `/api/tunnel/g/{token}`), as the body streams.
 */
export function rewriteStream(
  kind: "html" | "css" | "js",
  prefix: string,
): TransformStream<Uint8Array, Uint8Array> {
  const re = pattern(kind, prefix);
  const keep = CARRY_BYTES + prefix.length;
  // `carry` starts with one byte already emitted: the context of a `\b`.
  let carry = "";
  let context = 0;
  const rewrite = (
    buf: string,
    final: boolean,
  ): { out: string; rest: { text: string; context: number } } => {
    let cut = final ? buf.length : Math.max(context, buf.length - keep);
    let out = "";
    let from = context;
    re.lastIndex = context;
    for (let m = re.exec(buf); m; m = re.exec(buf)) {
      // A match that starts past the cut may not be whole yet: next time.
      if (!final && m.index >= cut) break;
      if (m.index < context) continue;
      const end = m.index + m[0].length;
      out += buf.slice(from, end - 1) + prefix + "/";
      from = end;
      cut = Math.max(cut, end);
    }
    out += buf.slice(from, cut);
    // What is left, after one byte of context (emitted already) when there is one.
    return {
      out,
      rest: cut > 0 ? { text: buf.slice(cut - 1), context: 1 } : { text: buf, context },
    };
  };
  return new TransformStream({
    transform(chunk, controller) {
      const buf = carry + toBinary(chunk);
      const { out, rest } = rewrite(buf, false);
      carry = rest.text;
      context = rest.context;
      if (out.length > 0) controller.enqueue(fromBinary(out));
    },
    flush(controller) {
      const { out } = rewrite(carry, true);
      if (out.length > 0) controller.enqueue(fromBinary(out));
    },
  });
}

/** The most a decoder hands on at once: what one chunk of a body may grow to in memory. */
export const DECODED_CHUNK_BYTES = 64 * 1024;

/**
 * The decoder of a Content-Encoding the tunnel can undo, or null for
 * identity or unknown. It yields at most {@linkcode DECODED_CHUNK_BYTES} at
 * a time and decodes only as its output is read: a few hundred bytes of
 * brotli can stand for gigabytes, which `DecompressionStream` would hand on
 * as one chunk (a service could take the relay's memory with one answer).
 */
export function decoderFor(
  encoding: string | null,
): ReadableWritablePair<Uint8Array, Uint8Array> | null {
  const e = (encoding ?? "").trim().toLowerCase();
  const options = { chunkSize: DECODED_CHUNK_BYTES };
  const z = e === "gzip" || e === "x-gzip"
    ? createGunzip(options)
    : e === "deflate"
    ? createInflate(options)
    : e === "br"
    ? createBrotliDecompress(options)
    : null;
  return z ? Duplex.toWeb(z) as unknown as ReadableWritablePair<Uint8Array, Uint8Array> : null;
}
