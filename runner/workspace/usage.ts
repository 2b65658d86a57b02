/**
 * Token and cost analytics from pi's conversation files (`<batonDir>/sessions/
 * --<cwd>--/<time>_<uuid>.jsonl`, pi's session format: docs/session-format.md
 * in `@mariozechner/pi-coding-agent`). Every assistant message carries
 * `usage: {input, output, cacheRead, cacheWrite, cost: {total}}`.
 *
 * The index is incremental: per file it keeps the size, mtime, inode and the
 * byte offset read so far, and per UTC day and model the running totals. A
 * refresh stats every file (10k files: ~50-85 ms of `statSync` on this 2-core
 * machine; async `stat` took 330-430 ms, hence sync), reads only the bytes
 * appended to changed files, and re-reads a file from the start only when it
 * shrank or was replaced. The index is persisted (owner-only) to
 * `<batonDir>/runner/usage-index.json`, so a daemon restart does not rescan.
 *
 * Memory: a few hundred bytes per conversation file plus one bucket per (day,
 * model) it was active on; a line is held whole only up to
 * {@linkcode LINE_CAP} bytes (longer ones, e.g. pasted images, are skipped).
 *
 * The records themselves (what is kept per file, how a line is counted,
 * how they sum up to an answer) are in usage_records.ts; this module keeps
 * them current: the stat sweep, the appended-bytes reader, the persisted file.
 *
 * @module
 */
import { basename, dirname, join } from "node:path";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../../shared/private_files.ts";
import { RequestError } from "../control_link.ts";
import { isObject } from "../../shared/json.ts";
import { USAGE_RANGES, type UsageRange, type UsageResponse } from "../../shared/usage_api.ts";
import { countLine, emptyRecord, type FileRecord, isRecord, summarize } from "./usage_records.ts";

/**
 * A line longer than this is skipped without being held in memory. Assistant
 * messages are text and tool calls (kilobytes); the long lines are user
 * messages and tool results with images, which carry no usage.
 */
export const LINE_CAP = 4 * 1024 * 1024;
/** Bytes read from a file per call. */
const CHUNK = 1024 * 1024;
/** Bumped when the persisted shape changes: an older file is ignored (one rescan). */
const INDEX_VERSION = 1;
/**
 * Every file is checked (stat) at most this often; in between, a refresh
 * checks only the files written in the last {@linkcode HOT_MS} and lists
 * again the folders whose mtime moved (a conversation was added or removed).
 * So a conversation silent for over an hour that resumes shows its new turns
 * within this long. Checking all 10k files takes 50-85 ms of `statSync` on a
 * quiet 2-core machine but 250-600 ms under load (async `stat`: 330-430 ms
 * quiet); a warm refresh stats ~100 folders and the live files.
 */
const FULL_SWEEP_MS = 30_000;
const HOT_MS = 60 * 60_000;
/** A folder changed this recently is listed again whatever its mtime says. */
const RECENT_MS = 2_000;

/** Counters to observe the index's work (tests, bench). */
export interface UsageIndexStats {
  /** Files read (from their offset) by refreshes, all-time for this instance. */
  filesRead: number;
  bytesRead: number;
  /** Files read during the latest refresh. */
  lastRefreshFilesRead: number;
  /** Whether the latest refresh checked every file. */
  lastRefreshFull: boolean;
  /** Files the latest refresh checked (stat). */
  lastRefreshFilesChecked: number;
}

export interface UsageIndexOptions {
  /** pi's sessions folder (`<batonDir>/sessions`). */
  sessionsDir: string;
  /** Where the daemon remembers each baton session's pi file (`SessionRegistry.conversationsDir`). */
  conversationsDir: string;
  /** The persisted index. */
  indexFile: string;
  /** Wall clock (ms), for the ranges. */
  now?: () => number;
  /** Monotonic clock (ms) for the sweeps; default `performance.now`. */
  clock?: () => number;
  /** How often every file is checked; between sweeps only recent files and changed folders are. */
  fullSweepMs?: number;
}

/** pi's session files indexed incrementally; see the module doc. */
export class UsageIndex {
  readonly stats: UsageIndexStats = {
    filesRead: 0,
    bytesRead: 0,
    lastRefreshFilesRead: 0,
    lastRefreshFull: false,
    lastRefreshFilesChecked: 0,
  };
  #opts: UsageIndexOptions;
  #files = new Map<string, FileRecord>();
  /** Conversation link file name → pi file basename. */
  #links = new Map<string, string>();
  #loaded = false;
  #dirty = false;
  #saving: Promise<void> = Promise.resolve();
  #refreshing: Promise<void> | null = null;
  /** Answers since the index last changed, by range and first day. */
  #answers = new Map<string, UsageResponse>();
  /** Folder → its mtime at its last listing. */
  #dirs = new Map<string, number>();
  /** When the last full sweep ran (`clock`). */
  #lastFull: number | null = null;

  constructor(options: UsageIndexOptions) {
    this.#opts = options;
  }

  /** The usage summary over `range`, after bringing the index up to date. */
  async summary(range: UsageRange): Promise<UsageResponse> {
    await this.refresh();
    const from = rangeStart(range, (this.#opts.now ?? Date.now)());
    // Nothing changed since the last answer over the same days: give it again.
    const key = `${range}/${from}`;
    let answer = this.#answers.get(key);
    if (!answer) {
      // Four ranges; older days' answers go (each may be ~250 KB).
      if (this.#answers.size >= 4) this.#answers.clear();
      this.#answers.set(key, answer = summarize(this.#files, this.#links, range, from));
    }
    return answer;
  }

  /** Brings the index up to date with the files on disk (one refresh at a time). */
  refresh(): Promise<void> {
    // Concurrent callers share the refresh in flight.
    this.#refreshing ??= this.#refresh().finally(() => this.#refreshing = null);
    return this.#refreshing;
  }

  /** Waits for the index to be written (after a refresh that changed it). */
  flush(): Promise<void> {
    return this.#saving;
  }

  async #refresh(): Promise<void> {
    if (!this.#loaded) await this.#load();
    const checked = new Set<string>();
    let read = 0;
    const top = this.#opts.sessionsDir;
    const now = this.#opts.clock ? this.#opts.clock() : performance.now();
    const full = this.#lastFull === null ||
      now - this.#lastFull >= (this.#opts.fullSweepMs ?? FULL_SWEEP_MS);
    if (full) {
      read += await this.#scanDir(top, { top: true, all: true, checked });
      this.#lastFull = now;
    } else {
      // Quick: folders whose mtime moved (a file was added or removed) are
      // listed again, and the files written lately are checked.
      const wall = Date.now();
      const moved = (dir: string) => {
        const m = statOrNull(dir)?.mtime?.getTime() ?? -1;
        // Coarse file-system clocks: a change in the same tick as the last
        // listing leaves the mtime as it was, so a recent folder is listed anyway.
        return m !== this.#dirs.get(dir) || m > wall - RECENT_MS;
      };
      if (moved(top)) read += await this.#scanDir(top, { top: true, all: false, checked });
      for (const dir of [...this.#dirs.keys()]) {
        if (dir !== top && this.#dirs.has(dir) && !checked.has(dir) && moved(dir)) {
          read += await this.#scanDir(dir, { top: false, all: false, checked });
        }
      }
      for (const [path, rec] of [...this.#files]) {
        if (!checked.has(path) && rec.mtimeMs > wall - HOT_MS) {
          read += await this.#check(path, checked);
        }
      }
    }
    this.#refreshLinks();
    this.stats.lastRefreshFilesRead = read;
    this.stats.filesRead += read;
    this.stats.lastRefreshFull = full;
    this.stats.lastRefreshFilesChecked = [...checked].filter((p) => p.endsWith(".jsonl")).length;
    if (this.#dirty) {
      this.#dirty = false;
      this.#answers.clear();
      this.#saving = this.#saving.then(() => this.#save()).catch(() => {});
    }
  }

  /**
   * Lists `dir` again: checks every `.jsonl` in it and forgets the files gone
   * from it; at the top, goes into its folders (`all`: every one, else only
   * new ones). Returns how many files were read.
   */
  async #scanDir(
    dir: string,
    o: { top: boolean; all: boolean; checked: Set<string> },
  ): Promise<number> {
    o.checked.add(dir);
    // The mtime before the listing: a change during it shows at the next refresh.
    const mtime = statOrNull(dir)?.mtime?.getTime() ?? null;
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(dir)];
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      this.#forgetDir(dir, o.top);
      return 0;
    }
    this.#dirs.set(dir, mtime ?? -1);
    let read = 0;
    const files = new Set<string>();
    const dirs = new Set<string>();
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isFile && e.name.endsWith(".jsonl")) {
        files.add(path);
        read += await this.#check(path, o.checked);
      } else if (o.top && e.isDirectory) {
        dirs.add(path);
        if (o.all || !this.#dirs.has(path)) {
          read += await this.#scanDir(path, { ...o, top: false });
        }
      }
    }
    for (const path of this.#files.keys()) {
      if (!files.has(path) && dirname(path) === dir) this.#forget(path);
    }
    if (o.top) {
      for (const d of [...this.#dirs.keys()]) if (d !== dir && !dirs.has(d)) this.#forgetDir(d);
    }
    return read;
  }

  /** Brings one file's record up to date; 1 when bytes were read. */
  async #check(path: string, checked: Set<string>): Promise<number> {
    checked.add(path);
    const info = statOrNull(path);
    if (!info) {
      this.#forget(path);
      return 0;
    }
    const old = this.#files.get(path);
    const ino = info.ino ?? null;
    const mtimeMs = info.mtime?.getTime() ?? 0;
    if (old && old.ino === ino && old.size === info.size && old.mtimeMs === mtimeMs) return 0;
    const rec = old && old.ino === ino && info.size >= old.offset ? old : emptyRecord(ino);
    rec.size = info.size;
    rec.mtimeMs = mtimeMs;
    this.#files.set(path, rec);
    this.#dirty = true;
    if (info.size === rec.offset) return 0;
    try {
      await this.#readFrom(path, rec, info.size);
      return 1;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      this.#forget(path);
      return 0;
    }
  }

  #forget(path: string): void {
    if (this.#files.delete(path)) this.#dirty = true;
  }

  /** Forgets a folder and its files (`all`: the top folder, so every file). */
  #forgetDir(dir: string, all = false): void {
    this.#dirs.delete(dir);
    for (const path of [...this.#files.keys()]) {
      if (all || dirname(path) === dir) this.#forget(path);
    }
  }

  /** Reads `path` from the record's offset up to `size`, counting complete lines. */
  async #readFrom(path: string, rec: FileRecord, size: number): Promise<void> {
    using file = await Deno.open(path, { read: true });
    await file.seek(rec.offset, Deno.SeekMode.Start);
    const decoder = new TextDecoder();
    const buf = new Uint8Array(CHUNK);
    let readPos = rec.offset;
    let carry: Uint8Array = new Uint8Array(0);
    let skipping = false; // inside a line over LINE_CAP: drop it up to its newline
    while (readPos < size) {
      const n = await file.read(buf.subarray(0, Math.min(CHUNK, size - readPos)));
      if (n === null || n === 0) break;
      const chunkPos = readPos;
      readPos += n;
      this.stats.bytesRead += n;
      const chunk = buf.subarray(0, n);
      let start = 0;
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
        if (skipping || carry.length + nl - start > LINE_CAP) {
          skipping = false;
          rec.skippedLines++;
        } else {
          const part = chunk.subarray(start, nl);
          const line = carry.length ? concat(carry, part) : part;
          const first = rec.offset === 0;
          if (line.length > 0) countLine(rec, decoder.decode(line), first);
        }
        carry = new Uint8Array(0);
        start = nl + 1;
        rec.offset = chunkPos + start;
      }
      if (skipping) continue;
      const rest = chunk.subarray(start);
      if (carry.length + rest.length > LINE_CAP) {
        skipping = true;
        carry = new Uint8Array(0);
      } else {
        carry = concat(carry, rest);
      }
    }
    // A last line without its newline (pi still writing it, or a cut write) is
    // read again next time, from rec.offset.
  }

  /** Maps baton sessions to pi files: reads only link files not seen before. */
  #refreshLinks(): void {
    const names = new Set<string>();
    try {
      for (const e of Deno.readDirSync(this.#opts.conversationsDir)) {
        if (!e.isFile || !e.name.endsWith(".json")) continue;
        names.add(e.name);
        if (this.#links.has(e.name)) continue;
        try {
          const file = JSON.parse(
            Deno.readTextFileSync(join(this.#opts.conversationsDir, e.name)),
          )?.piSessionFile;
          if (typeof file === "string") {
            this.#links.set(e.name, basename(file));
            this.#dirty = true;
          }
        } catch {
          // Half-written or foreign: try again next refresh.
        }
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    for (const name of this.#links.keys()) {
      if (!names.has(name)) {
        this.#links.delete(name);
        this.#dirty = true;
      }
    }
  }

  async #load(): Promise<void> {
    this.#loaded = true;
    let saved: unknown;
    try {
      saved = JSON.parse(await Deno.readTextFile(this.#opts.indexFile));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof SyntaxError) return;
      throw err;
    }
    if (!isObject(saved) || saved.version !== INDEX_VERSION) return;
    if (isObject(saved.files)) {
      for (const [path, rec] of Object.entries(saved.files)) {
        if (isRecord(rec)) this.#files.set(path, rec);
      }
    }
    if (isObject(saved.links)) {
      for (const [name, file] of Object.entries(saved.links)) {
        if (typeof file === "string") this.#links.set(name, file);
      }
    }
  }

  async #save(): Promise<void> {
    const path = this.#opts.indexFile;
    await Deno.mkdir(join(path, ".."), { recursive: true, mode: PRIVATE_DIR_MODE });
    const body = JSON.stringify({
      version: INDEX_VERSION,
      files: Object.fromEntries(this.#files),
      links: Object.fromEntries(this.#links),
    });
    const tmp = `${path}.${crypto.randomUUID()}.tmp`;
    await Deno.writeTextFile(tmp, body, { mode: PRIVATE_FILE_MODE });
    await Deno.rename(tmp, path);
  }
}

/** The first UTC day (`YYYY-MM-DD`) of `range` ending today; `""` for all. */
export function rangeStart(range: UsageRange, now: number): string {
  if (range === "all") return "";
  const days = Number(range.slice(0, -1));
  return new Date(now - (days - 1) * 86_400_000).toISOString().slice(0, 10);
}

function statOrNull(path: string): Deno.FileInfo | null {
  try {
    return Deno.statSync(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** The index of a runner whose home folder is `batonDir` (pi's agent folder too). */
export function runnerUsageIndex(batonDir: string, conversationsDir: string): UsageIndex {
  return new UsageIndex({
    sessionsDir: join(batonDir, "sessions"),
    conversationsDir,
    indexFile: join(batonDir, "runner", "usage-index.json"),
  });
}

/** The `usage` request from the relay: `{range?}` (default `90d`). */
export function answerUsage(index: UsageIndex, data: unknown): Promise<UsageResponse> {
  const range = isObject(data) && data.range !== undefined ? data.range : "90d";
  if (typeof range !== "string" || !(USAGE_RANGES as readonly string[]).includes(range)) {
    return Promise.reject(
      new RequestError("bad_request", `Invalid range: '${String(range).slice(0, 20)}'`),
    );
  }
  return index.summary(range as UsageRange);
}
