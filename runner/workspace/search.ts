/**
 * `search_files`: file names under a folder, found fuzzily. The files come
 * from `rg --files` when ripgrep is on the runner's PATH (its output is read
 * as it streams and only the best `limit` paths are kept), else from a walk
 * in Deno that honours `.gitignore` (gitignore.ts). Both list hidden files,
 * skip `.git`, do not follow symlinks, and read only the `.gitignore` files
 * at and below the searched folder (and its `.git/info/exclude`).
 *
 * @module
 */
import { join } from "node:path";
import { fuzzyScore, queryTerms } from "./fuzzy.ts";
import { type IgnoreRule, isIgnored, parseGitignore } from "./gitignore.ts";
import { readBoundedText } from "../bounded_read.ts";

/** Most files one search looks at; past it the answer says `truncated`. */
export const SEARCH_MAX_FILES = 1_000_000;
/** Longest one search may take. */
export const SEARCH_MAX_MS = 10_000;

/** Options of {@linkcode searchFiles}. */
export interface SearchOptions {
  limit: number;
  signal?: AbortSignal;
  /** The PATH to find `rg` on (undefined: none: walk). */
  path?: string | undefined;
  /** Default SEARCH_MAX_FILES. */
  maxFiles?: number;
}

/** What a search found. */
export interface SearchResult {
  files: string[];
  truncated: boolean;
  engine: "ripgrep" | "walker";
}

const RG_ARGS = [
  "--files",
  "--hidden",
  "--no-require-git",
  "--no-ignore-parent",
  "--no-ignore-global",
  "--no-ignore-dot",
  "--no-config",
  "--no-messages",
  "--glob",
  "!.git",
];

/** The best `limit` paths under `cwd` (a real folder) for `query`, relative, `/`-separated. */
export async function searchFiles(
  cwd: string,
  query: string,
  options: SearchOptions,
): Promise<SearchResult> {
  const best = new TopK(options.limit, queryTerms(query));
  const maxFiles = options.maxFiles ?? SEARCH_MAX_FILES;
  const deadline = Date.now() + SEARCH_MAX_MS;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  let seen = 0;
  let truncated = false;
  // Whether to go on: false once enough is seen (an empty query needs only `limit` files).
  const take = (path: string): boolean => {
    best.offer(path);
    seen++;
    if (best.empty && seen >= options.limit) return false;
    if (seen >= maxFiles || Date.now() > deadline) {
      truncated = true;
      return false;
    }
    return !stop.signal.aborted;
  };
  try {
    const rg = await findOnPath("rg", options.path);
    if (rg) {
      await ripgrepFiles(rg, cwd, take, stop);
    } else {
      await walkFiles(cwd, take);
    }
    return { files: best.paths(), truncated, engine: rg ? "ripgrep" : "walker" };
  } finally {
    options.signal?.removeEventListener("abort", onAbort);
  }
}

/** The best paths so far, at most `limit` of them. */
class TopK {
  readonly #items: { path: string; score: number }[] = [];
  constructor(readonly limit: number, readonly terms: string[]) {}

  /** True when the query has no terms: every path matches, shortest first. */
  get empty(): boolean {
    return this.terms.length === 0;
  }

  offer(path: string): void {
    const score = fuzzyScore(path, this.terms);
    if (score === null) return;
    const items = this.#items;
    if (items.length === this.limit && !better(score, path, items[items.length - 1]!)) return;
    // Binary search for the place (best first); limit is at most 1,000.
    let lo = 0;
    let hi = items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (better(score, path, items[mid]!)) hi = mid;
      else lo = mid + 1;
    }
    items.splice(lo, 0, { path, score });
    if (items.length > this.limit) items.pop();
  }

  paths(): string[] {
    return this.#items.map((i) => i.path);
  }
}

function better(score: number, path: string, than: { path: string; score: number }): boolean {
  return score !== than.score ? score > than.score : path < than.path;
}

/** The first executable file named `name` on `path` (a PATH value). */
export async function findOnPath(name: string, path: string | undefined): Promise<string | null> {
  if (!path) return null;
  const windows = Deno.build.os === "windows";
  for (const dir of path.split(windows ? ";" : ":")) {
    if (!dir) continue;
    const candidate = join(dir, windows ? `${name}.exe` : name);
    try {
      const info = await Deno.stat(candidate);
      if (info.isFile && (windows || ((info.mode ?? 0) & 0o111) !== 0)) return candidate;
    } catch {
      // Not there.
    }
  }
  return null;
}

/** Feeds `take` each line of `rg --files` as it comes; kills rg once `take` says stop. */
async function ripgrepFiles(
  rg: string,
  cwd: string,
  take: (path: string) => boolean,
  stop: AbortController,
): Promise<void> {
  const child = new Deno.Command(rg, {
    args: RG_ARGS,
    cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "null",
    signal: stop.signal,
  }).spawn();
  let rest = "";
  const windows = Deno.build.os === "windows";
  try {
    read: for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) {
      const lines = (rest + text).split("\n");
      rest = lines.pop()!;
      for (const line of lines) {
        if (line === "") continue;
        if (!take(windows ? line.replaceAll("\\", "/") : line)) {
          break read;
        }
      }
    }
    if (rest !== "" && !stop.signal.aborted) take(rest);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already exited.
    }
    await child.status;
  }
}

/** Walks `root` (depth first), honouring `.gitignore`, feeding `take` each file's relative path. */
async function walkFiles(root: string, take: (path: string) => boolean): Promise<void> {
  const exclude = await readText(join(root, ".git", "info", "exclude"));
  const stack: { dir: string; rules: IgnoreRule[] }[] = [{
    dir: "",
    rules: exclude ? parseGitignore(exclude, "") : [],
  }];
  while (stack.length > 0) {
    const { dir, rules: inherited } = stack.pop()!;
    const abs = dir === "" ? root : join(root, dir);
    const own = await readText(join(abs, ".gitignore"));
    const rules = own ? [...inherited, ...parseGitignore(own, dir)] : inherited;
    const entries: Deno.DirEntry[] = [];
    try {
      for await (const e of Deno.readDir(abs)) entries.push(e);
    } catch {
      continue;
    }
    entries.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
    for (const e of entries) {
      if (e.isSymlink) continue;
      const rel = dir === "" ? e.name : `${dir}/${e.name}`;
      if (e.isDirectory) {
        if (e.name === ".git" || isIgnored(rel, true, rules)) continue;
        stack.push({ dir: rel, rules });
      } else if (!isIgnored(rel, false, rules)) {
        if (!take(rel)) return;
      }
    }
  }
}

/** The largest ignore file read: one the agent made a link to `/dev/zero` is not read at all. */
const MAX_IGNORE_FILE_BYTES = 1024 * 1024;

async function readText(path: string): Promise<string | null> {
  try {
    return await readBoundedText(path, MAX_IGNORE_FILE_BYTES);
  } catch {
    return null;
  }
}
