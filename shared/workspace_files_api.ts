/**
 * The runner's files as the HTTP API and the control channel carry them:
 * `POST /api/runners/{runnerId}/files`, `.../search-files` and `.../read-file`
 * (docs/api.md, "Runner files"), the ops `files`, `search_files` and
 * `read_file` with their chunked answer (docs/protocol.md), and the limits
 * both ends enforce.
 *
 * @module
 */

/** Most entries one listing returns; `truncated: true` says there were more. */
export const MAX_LIST_ENTRIES = 10_000;

/** Largest file `read-file` returns as UTF-8 text: 512 KiB. */
export const MAX_READ_UTF8_BYTES = 512 * 1024;
/** Largest file `read-file` returns as base64: 10 MiB. */
export const MAX_READ_BASE64_BYTES = 10 * 1024 * 1024;

/** Default and largest `limit` of `search-files`. */
export const SEARCH_DEFAULT_LIMIT = 100;
export const SEARCH_MAX_LIMIT = 1000;
/** Longest search query, in characters. */
export const SEARCH_MAX_QUERY = 200;

/**
 * Bytes of the file in one `chunk` frame of a `read_file` answer. A multiple
 * of 3, so each frame's base64 (64 KiB) stands alone and the frames
 * concatenate to the file's base64. UTF-8 text goes in pieces of at most
 * this many UTF-16 code units. Measured (tests/workspace_files_test.ts, six
 * concurrent 10 MiB reads by slow clients): 768 KiB frames grew the relay's
 * RSS by 114 MB, 96 KiB by 49 MB, 48 KiB by 32 MB: pieces over V8's
 * large-object size (128 KiB) live until a full GC.
 */
export const READ_CHUNK_BYTES = 48 * 1024;
/**
 * Chunks a runner may send before the relay acknowledges one: what the
 * relay holds of one read at most (512 KiB of base64), whatever the
 * client's pace; enough in flight to keep a loopback link busy.
 */
export const READ_WINDOW_CHUNKS = 8;

/** `POST /api/runners/{runnerId}/files`. */
export interface ListFilesRequest {
  /** An absolute folder (or `~`, `~/...`) inside the runner's workspace roots. */
  path: string;
}

/** One entry of a listing. */
export interface FileEntry {
  name: string;
  /** A symlink is reported as what it points to. */
  type: "directory" | "file";
  /** Bytes (0 for a folder). */
  size: number;
  /** Last modification, ISO 8601; null when the system does not say. */
  mtime: string | null;
  /** Present (true) when the entry is a symlink whose target is inside the roots. */
  symlink?: true;
}

/** The answer of `POST .../files`: folders first, then by name. */
export interface ListFilesResponse {
  ok: true;
  /** The folder's real path (symlinks and `..` resolved). */
  path: string;
  files: FileEntry[];
  /** True when the folder holds more than {@linkcode MAX_LIST_ENTRIES} entries. */
  truncated: boolean;
}

/** `POST /api/runners/{runnerId}/search-files`. */
export interface SearchFilesRequest {
  /** The folder to search under (inside the workspace roots). */
  cwd: string;
  /** Characters to find in order in a path (fuzzy); spaces separate terms that must all match. */
  query: string;
  /** Most paths returned; default {@linkcode SEARCH_DEFAULT_LIMIT}, at most {@linkcode SEARCH_MAX_LIMIT}. */
  limit?: number;
}

/** The answer of `POST .../search-files`. */
export interface SearchFilesResponse {
  ok: true;
  /** Paths relative to `cwd` with `/` separators, best match first. */
  files: string[];
  /** True when the walk stopped early (too many files, too long): better matches may exist. */
  truncated: boolean;
  /** What listed the files: ripgrep (`rg --files`) when on the runner's PATH, else baton's walker. */
  engine: "ripgrep" | "walker";
}

/** How `read-file` returns the content. */
export type ReadEncoding = "utf8" | "base64";

/** `POST /api/runners/{runnerId}/read-file`. */
export interface ReadFileRequest {
  path: string;
  /** Default `utf8`. */
  encoding?: ReadEncoding;
}

/** The answer of `POST .../read-file`: always the whole file. */
export interface ReadFileResponse {
  ok: true;
  content: string;
  encoding: ReadEncoding;
  /** Bytes of the file. */
  size: number;
  mtime: string | null;
}

/** What the runner's final `res` of a `read_file` carries (the content came in `chunk` frames). */
export interface ReadFileTrailer {
  encoding: ReadEncoding;
  size: number;
  mtime: string | null;
  chunks: number;
}

/**
 * The HTTP status of each error code the runner answers a file op with
 * (other codes keep the status the relay gives any runner error).
 */
export const FILE_ERROR_STATUS = {
  /** The path (after `..` and symlinks) is outside the workspace roots: nothing was read. */
  path_outside_roots: 403,
  path_not_found: 404,
  not_a_directory: 400,
  not_a_file: 400,
  bad_path: 400,
  file_too_large: 413,
  /** A file asked for as `utf8` that is not UTF-8 text (a NUL byte, invalid UTF-8). */
  binary_file: 415,
} as const;

/** An error code of {@linkcode FILE_ERROR_STATUS}. */
export type FileErrorCode = keyof typeof FILE_ERROR_STATUS;
