/**
 * The runner's files for the relay's `files`, `search_files` and `read_file`
 * requests: every path resolved to its real path and checked against the
 * workspace roots with spawn's own rules (runner/roots.ts) before anything is
 * read; listings capped; files read whole or refused, never cut.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { join } from "node:path";
import { pathsOf } from "../platform/platform.ts";
import {
  type FileEntry,
  type ListFilesResponse,
  MAX_LIST_ENTRIES,
  MAX_READ_BASE64_BYTES,
  MAX_READ_UTF8_BYTES,
  READ_CHUNK_BYTES,
  type ReadEncoding,
  type ReadFileTrailer,
  SEARCH_DEFAULT_LIMIT,
  SEARCH_MAX_LIMIT,
  SEARCH_MAX_QUERY,
  type SearchFilesResponse,
} from "../../shared/workspace_files_api.ts";
import { type ReplyStream, RequestError } from "../control_link.ts";
import { expandHome, isWithin } from "../roots.ts";
import { searchFiles } from "./search.ts";
import { FileShapeError, readBoundedFile } from "../bounded_read.ts";

/** Options of {@linkcode WorkspaceFiles}. */
export interface WorkspaceFilesOptions {
  /** Resolved workspace roots (real paths), or null: any folder, as for spawn. */
  roots: string[] | null;
  home: string;
  os?: typeof Deno.build.os;
  /** The PATH ripgrep is looked up on (default: the process's). */
  path?: () => string | undefined;
}

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** The runner's answers to the relay's file requests. */
export class WorkspaceFiles {
  readonly #opts: WorkspaceFilesOptions;

  constructor(options: WorkspaceFilesOptions) {
    this.#opts = options;
  }

  /** Answers a file op; `reply` carries `read_file`'s content in pieces. */
  handle(op: "files" | "search_files" | "read_file", data: unknown, reply: ReplyStream) {
    const d = (typeof data === "object" && data !== null ? data : {}) as Record<string, unknown>;
    switch (op) {
      case "files":
        return this.list(d.path);
      case "search_files":
        return this.search(d.cwd, d.query, d.limit, reply.signal);
      case "read_file":
        return this.read(d.path, d.encoding, reply);
    }
  }

  /**
   * The real path of `path` if it lies inside the roots. A path that does
   * not exist answers `path_outside_roots` when it is outside them as
   * written, so nothing is learnt about what exists outside.
   */
  async resolve(path: unknown): Promise<string> {
    if (typeof path !== "string" || path.trim() === "" || path.length > 4096) {
      throw new RequestError("bad_path", "Path must be a non-empty string");
    }
    if (CONTROL.test(path)) {
      throw new RequestError("bad_path", "Path must not contain NUL or other control characters");
    }
    const os = this.#opts.os ?? Deno.build.os;
    const paths = pathsOf({ os });
    const expanded = expandHome(path.trim(), this.#opts.home, os);
    if (!paths.isAbsolute(expanded)) {
      throw new RequestError("bad_path", `Path must be absolute: '${path}'`);
    }
    let real: string;
    try {
      real = await Deno.realPath(expanded);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound || err instanceof Deno.errors.PermissionDenied)) {
        throw err;
      }
      this.#assertInside(paths.resolve(expanded), path);
      throw new RequestError(
        "path_not_found",
        err instanceof Deno.errors.NotFound
          ? `No such file or folder: '${path}'`
          : `Not readable: '${path}'`,
      );
    }
    this.#assertInside(real, path);
    return real;
  }

  #inside(real: string): boolean {
    const { roots } = this.#opts;
    return roots === null || roots.some((r) => isWithin(real, r, this.#opts.os ?? Deno.build.os));
  }

  #assertInside(real: string, asked: string): void {
    if (!this.#inside(real)) {
      throw new RequestError(
        "path_outside_roots",
        `Path is outside the runner's workspace roots: '${asked}'`,
      );
    }
  }

  /** A folder's entries: folders first, then by name; symlinks as what they point to. */
  async list(path: unknown): Promise<ListFilesResponse> {
    const real = await this.resolve(path);
    if (!(await Deno.stat(real)).isDirectory) {
      throw new RequestError("not_a_directory", `Not a folder: '${path}'`);
    }
    const names: { name: string; symlink: boolean }[] = [];
    let truncated = false;
    try {
      for await (const e of Deno.readDir(real)) {
        if (names.length === MAX_LIST_ENTRIES) {
          truncated = true;
          break;
        }
        names.push({ name: e.name, symlink: e.isSymlink });
      }
    } catch (err) {
      if (err instanceof Deno.errors.PermissionDenied) {
        throw new RequestError("path_not_found", `Not readable: '${path}'`);
      }
      throw err;
    }
    const files: FileEntry[] = [];
    // Stats in batches: a 10,000-entry folder is listed in ~50 ms.
    for (let i = 0; i < names.length; i += 64) {
      const batch = await Promise.all(names.slice(i, i + 64).map((n) => this.#entry(real, n)));
      for (const f of batch) if (f) files.push(f);
    }
    files.sort((a, b) =>
      a.type !== b.type ? (a.type === "directory" ? -1 : 1) : compareNames(a.name, b.name)
    );
    return { ok: true, path: real, files, truncated };
  }

  /**
   * One entry; null for a symlink that dangles or points outside the roots
   * (nothing of what is outside is shown), and for an entry gone meanwhile.
   */
  async #entry(dir: string, n: { name: string; symlink: boolean }): Promise<FileEntry | null> {
    const full = join(dir, n.name);
    try {
      if (n.symlink && !this.#inside(await Deno.realPath(full))) return null;
      const info = n.symlink ? await Deno.stat(full) : await Deno.lstat(full);
      const entry: FileEntry = {
        name: n.name,
        type: info.isDirectory ? "directory" : "file",
        size: info.isDirectory ? 0 : info.size,
        mtime: info.mtime?.toISOString() ?? null,
      };
      if (n.symlink) entry.symlink = true;
      return entry;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.PermissionDenied) {
        return null;
      }
      // A symlink loop (ELOOP) and the like: not listed either.
      if (n.symlink) return null;
      throw err;
    }
  }

  /** Paths under `cwd` whose names match `query`, best first. */
  async search(
    cwd: unknown,
    query: unknown,
    limit: unknown,
    signal: AbortSignal,
  ): Promise<SearchFilesResponse> {
    const real = await this.resolve(cwd);
    if (!(await Deno.stat(real)).isDirectory) {
      throw new RequestError("not_a_directory", `Not a folder: '${cwd}'`);
    }
    if (typeof query !== "string" || query.length > SEARCH_MAX_QUERY) {
      throw new RequestError(
        "bad_request",
        `Query must be a string of at most ${SEARCH_MAX_QUERY} characters`,
      );
    }
    const max = limit === undefined || limit === null ? SEARCH_DEFAULT_LIMIT : limit;
    if (typeof max !== "number" || !Number.isInteger(max) || max < 1 || max > SEARCH_MAX_LIMIT) {
      throw new RequestError(
        "bad_request",
        `Limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}`,
      );
    }
    const found = await searchFiles(real, query, {
      limit: max,
      signal,
      path: this.#opts.path?.() ?? Deno.env.get("PATH"),
    });
    return { ok: true, ...found };
  }

  /**
   * Reads a whole file and sends it in pieces (`reply.chunk`); answers its
   * size and time. Over the encoding's cap: `file_too_large`, nothing sent.
   */
  async read(path: unknown, encoding: unknown, reply: ReplyStream): Promise<ReadFileTrailer> {
    const enc: ReadEncoding = encoding === undefined || encoding === null
      ? "utf8"
      : encoding === "utf8" || encoding === "base64"
      ? encoding
      : badEncoding(encoding);
    const real = await this.resolve(path);
    const cap = enc === "utf8" ? MAX_READ_UTF8_BYTES : MAX_READ_BASE64_BYTES;
    // Opened without waiting (a FIFO would wait for a writer) and checked as opened.
    let file;
    try {
      file = await readBoundedFile(real, cap);
    } catch (err) {
      if (!(err instanceof FileShapeError)) throw err;
      if (err.code === "not_a_file") throw new RequestError("not_a_file", `Not a file: '${path}'`);
      throw tooLarge(err.size ?? cap + 1, cap, enc);
    }
    const { bytes } = file;
    const size = bytes.byteLength;
    const mtime = file.mtime?.toISOString() ?? null;
    let chunks = 0;
    if (enc === "base64") {
      for (let at = 0; at < size; at += READ_CHUNK_BYTES) {
        await reply.chunk(
          Buffer.from(bytes.subarray(at, at + READ_CHUNK_BYTES)).toString("base64"),
        );
        chunks++;
      }
    } else {
      const text = utf8Text(bytes);
      if (text === null) {
        throw new RequestError(
          "binary_file",
          `Not UTF-8 text: '${path}' (read it with encoding 'base64')`,
        );
      }
      for (const piece of pieces(text, READ_CHUNK_BYTES)) {
        await reply.chunk(piece);
        chunks++;
      }
    }
    return { encoding: enc, size, mtime, chunks };
  }
}

function badEncoding(encoding: unknown): never {
  throw new RequestError(
    "bad_request",
    `Encoding must be 'utf8' or 'base64': '${String(encoding).slice(0, 40)}'`,
  );
}

function tooLarge(size: number, cap: number, enc: ReadEncoding): RequestError {
  return new RequestError(
    "file_too_large",
    `File is ${size} bytes; read-file returns at most ${cap} bytes as ${enc}` +
      (enc === "utf8" ? " (base64 takes up to 10 MiB)" : ""),
  );
}

/** The text of UTF-8 bytes, or null when they hold a NUL byte or are not UTF-8. */
function utf8Text(bytes: Uint8Array): string | null {
  if (bytes.includes(0)) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return null;
  }
}

/** `text` in pieces of at most `max` code units, never splitting a surrogate pair. */
export function* pieces(text: string, max: number): Generator<string> {
  let at = 0;
  while (at < text.length) {
    let end = Math.min(at + max, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    yield text.slice(at, end);
    at = end;
  }
}

/** By name ignoring case, then exactly (so `a` and `A` keep one order). */
function compareNames(a: string, b: string): number {
  const la = a.toLowerCase();
  const lb = b.toLowerCase();
  if (la !== lb) return la < lb ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
