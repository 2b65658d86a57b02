/**
 * A streaming `multipart/form-data` reader: parts are handed out as their
 * bytes arrive, and the next chunk of the body is read only once the part's
 * writer has taken the last one, so a body of any size costs a few chunks of
 * memory. (`Request.formData()` holds the whole body, and every file in it,
 * in memory: not on a route that takes uploads.)
 *
 * @module
 */

/** A malformed body (400): no boundary, headers too long, cut short. */
export class MultipartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MultipartError";
  }
}

/** What a part's headers say. */
export interface PartInfo {
  /** The form field's name. */
  name: string;
  /** The file name, for a file part; null for a plain field. */
  filename: string | null;
  /** The part's Content-Type header, if any. */
  contentType: string | null;
}

/** Takes one part's bytes. */
export interface PartWriter {
  write(chunk: Uint8Array): void | Promise<void>;
  end(): void | Promise<void>;
}

/** Options of {@linkcode readMultipart}. */
export interface MultipartOptions {
  /** Most bytes of one part's headers (default 8 KiB). */
  maxHeaderBytes?: number;
  /** Most parts (default 100). */
  maxParts?: number;
}

/** The boundary of a `multipart/form-data` Content-Type, or null when it is not one. */
export function multipartBoundary(contentType: string | null): string | null {
  if (!contentType || !/^multipart\/form-data\s*(;|$)/i.test(contentType)) return null;
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2])! : null;
}

const CRLF = new Uint8Array([13, 10]);
const CRLFCRLF = new Uint8Array([13, 10, 13, 10]);
const DASHDASH = new Uint8Array([45, 45]);
/** Bytes of preamble (before the first boundary) or of padding after one that are skipped. */
const MAX_PREAMBLE = 16 * 1024;

function indexOf(hay: Uint8Array, needle: Uint8Array, from = 0): number {
  const first = needle[0]!;
  const last = hay.length - needle.length;
  for (let i = hay.indexOf(first, from); i !== -1 && i <= last; i = hay.indexOf(first, i + 1)) {
    let j = 1;
    while (j < needle.length && hay[i + j] === needle[j]) j++;
    if (j === needle.length) return i;
  }
  return -1;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/**
 * Reads a multipart body, calling `onPart` for each part and writing its
 * bytes to the writer it returns. Throws {@linkcode MultipartError} for a
 * malformed body, and whatever `onPart` or a writer throws (a size cap), after
 * cancelling the body.
 */
export async function readMultipart(
  body: ReadableStream<Uint8Array>,
  boundary: string,
  onPart: (info: PartInfo) => PartWriter | Promise<PartWriter>,
  options: MultipartOptions = {},
): Promise<void> {
  const maxHeaderBytes = options.maxHeaderBytes ?? 8 * 1024;
  const maxParts = options.maxParts ?? 100;
  const delim = new TextEncoder().encode(`\r\n--${boundary}`);
  const reader = body.getReader();
  type State = "preamble" | "after" | "headers" | "body" | "done";
  let state = "preamble" as State;
  // The body's first boundary has no CRLF before it: give it one.
  let pending: Uint8Array = CRLF;
  let writer: PartWriter | null = null;
  let parts = 0;
  let skipped = 0;
  try {
    while (state !== "done") {
      const { done, value } = await reader.read();
      if (done) throw new MultipartError("Multipart body ends before its closing boundary");
      pending = concat(pending, value);
      // Take everything this chunk completes (a function: TS would keep the outer loop's narrowing).
      const more = () => state !== "done";
      while (more()) {
        if (state === "preamble") {
          const i = indexOf(pending, delim);
          if (i === -1) {
            const keep = Math.min(pending.length, delim.length - 1);
            skipped += pending.length - keep;
            if (skipped > MAX_PREAMBLE) throw new MultipartError("No multipart boundary found");
            pending = pending.slice(pending.length - keep);
            break;
          }
          pending = pending.subarray(i + delim.length);
          state = "after";
        } else if (state === "after") {
          if (pending.length < 2) break;
          if (pending[0] === DASHDASH[0] && pending[1] === DASHDASH[1]) {
            state = "done";
            break;
          }
          const eol = indexOf(pending, CRLF);
          if (eol === -1) {
            if (pending.length > 1024) throw new MultipartError("Malformed multipart boundary");
            break;
          }
          // Transport padding (spaces, tabs) may follow a boundary.
          if (!/^[ \t]*$/.test(new TextDecoder().decode(pending.subarray(0, eol)))) {
            throw new MultipartError("Malformed multipart boundary");
          }
          pending = pending.subarray(eol + 2);
          state = "headers";
        } else if (state === "headers") {
          let end: number;
          let skip: number;
          if (pending.length >= 2 && pending[0] === 13 && pending[1] === 10) {
            end = 0; // no headers at all
            skip = 2;
          } else {
            end = indexOf(pending, CRLFCRLF);
            skip = 4;
          }
          if (end === -1) {
            if (pending.length > maxHeaderBytes) {
              throw new MultipartError(`Part headers are longer than ${maxHeaderBytes} bytes`);
            }
            break;
          }
          if (end > maxHeaderBytes) {
            throw new MultipartError(`Part headers are longer than ${maxHeaderBytes} bytes`);
          }
          if (++parts > maxParts) throw new MultipartError(`More than ${maxParts} parts`);
          const info = partInfo(new TextDecoder().decode(pending.subarray(0, end)));
          pending = pending.subarray(end + skip);
          writer = await onPart(info);
          state = "body";
        } else if (state === "body") {
          const i = indexOf(pending, delim);
          if (i === -1) {
            const safe = pending.length - (delim.length - 1);
            // Views, not copies: `pending` is never written to, only replaced.
            if (safe > 0) {
              await writer!.write(pending.subarray(0, safe));
              pending = pending.subarray(safe);
            }
            break;
          }
          if (i > 0) await writer!.write(pending.subarray(0, i));
          await writer!.end();
          writer = null;
          pending = pending.subarray(i + delim.length);
          state = "after";
        }
      }
    }
  } finally {
    // The epilogue, or the rest of a body refused midway, is not read.
    await reader.cancel().catch(() => {});
  }
}

/** The field name, file name and type of a part, from its header block. */
export function partInfo(block: string): PartInfo {
  let disposition = "";
  let contentType: string | null = null;
  for (const line of block.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === "content-disposition") disposition = value;
    else if (name === "content-type") contentType = value;
  }
  if (!/^form-data\s*(;|$)/i.test(disposition)) {
    throw new MultipartError("Each part needs 'Content-Disposition: form-data'");
  }
  const params = dispositionParams(disposition);
  const filename = params.get("filename*") ?? params.get("filename") ?? null;
  return { name: params.get("name") ?? "", filename, contentType };
}

/**
 * The parameters of a Content-Disposition value: quoted strings unescaped,
 * `filename*` (RFC 5987: `UTF-8''percent-encoded`) decoded.
 */
function dispositionParams(value: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
  for (const m of value.matchAll(re)) {
    const key = m[1]!.toLowerCase();
    let v = m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : m[3]!.trim();
    if (key.endsWith("*")) {
      const ext = /^([\w!#$%&+^`{}~-]*)'[^']*'(.*)$/.exec(v);
      if (!ext) continue;
      try {
        v = ext[1]!.toLowerCase() === "utf-8" ? decodeURIComponent(ext[2]!) : unescape(ext[2]!);
      } catch {
        continue;
      }
    }
    if (!out.has(key)) out.set(key, v);
  }
  return out;
}
