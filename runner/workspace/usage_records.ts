/**
 * The usage index's records (runner/workspace/usage.ts): what it keeps of one
 * pi conversation file, how one of its lines is counted into them, and how
 * the records sum up to a `usage` answer. Pure: the index reads the files and
 * keeps the records current; nothing here touches the disk.
 *
 * @module
 */
import { basename } from "node:path";
import {
  USAGE_MAX_SESSIONS,
  type UsageAmounts,
  type UsageRange,
  type UsageResponse,
  type UsageSession,
} from "../../shared/usage_api.ts";
import { isObject } from "../../shared/json.ts";

/** The most characters kept of a text field (a session id, cwd or model). */
const MAX_TEXT = 1000;

/** Per (day, model): input, output, cacheRead, cacheWrite, cost, last activity (ms). */
export type Bucket = [number, number, number, number, number, number];

/** What the index keeps about one conversation file (persisted as is). */
export interface FileRecord {
  size: number;
  mtimeMs: number;
  ino: number | null;
  /** Bytes read and counted: the start of the first line not yet complete. */
  offset: number;
  piSessionId: string | null;
  cwd: string | null;
  startedAt: string | null;
  model: string | null;
  /** Key: `YYYY-MM-DD\tmodel`. */
  buckets: Record<string, Bucket>;
  skippedLines: number;
}

/** Counts one complete line; `first`: it starts the file (pi's header). */
export function countLine(rec: FileRecord, line: string, first: boolean): void {
  // Only the header and assistant messages matter; skip the parse of the rest.
  if (!first && !line.includes('"usage"')) return;
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    rec.skippedLines++;
    return;
  }
  if (!isObject(entry)) return void rec.skippedLines++;
  if (entry.type === "session") {
    rec.piSessionId = text(entry.id);
    rec.cwd = text(entry.cwd);
    rec.startedAt = isoTime(entry.timestamp);
    return;
  }
  const msg = entry.message;
  if (entry.type !== "message" || !isObject(msg) || msg.role !== "assistant") return;
  const usage = msg.usage;
  if (!isObject(usage)) return;
  const at = typeof msg.timestamp === "number" && Number.isFinite(msg.timestamp)
    ? msg.timestamp
    : Date.parse(typeof entry.timestamp === "string" ? entry.timestamp : "");
  if (!Number.isFinite(at)) return void rec.skippedLines++;
  const day = new Date(at).toISOString().slice(0, 10);
  const model = text(msg.model) ?? "unknown";
  const key = `${day}\t${model}`;
  const b = rec.buckets[key] ??= [0, 0, 0, 0, 0, 0];
  b[0] += count(usage.input);
  b[1] += count(usage.output);
  b[2] += count(usage.cacheRead);
  b[3] += count(usage.cacheWrite);
  b[4] += isObject(usage.cost) ? count(usage.cost.total) : 0;
  b[5] = Math.max(b[5], at);
  rec.model = model;
}

/**
 * The answer of a `usage` request from the records: totals, days and models
 * since `from` (a `YYYY-MM-DD`), and the costliest sessions, named by the
 * baton session whose link file (`<id>.json` in `links`) points at the pi file.
 */
export function summarize(
  files: ReadonlyMap<string, FileRecord>,
  links: ReadonlyMap<string, string>,
  range: UsageRange,
  from: string,
): UsageResponse {
  const sessionOf = new Map<string, string>();
  for (const [name, piFile] of links) sessionOf.set(piFile, name.slice(0, -5));
  const total = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
  const days = new Map<string, UsageAmounts>();
  const models = new Map<string, UsageAmounts>();
  // Sorted and cut first, shaped after: 10k sessions' ISO dates and string
  // compares cost more than the rest of the summary.
  const found: {
    path: string;
    rec: FileRecord;
    i: number;
    o: number;
    c: number;
    last: number;
  }[] = [];
  let skippedLines = 0;
  for (const [path, rec] of files) {
    skippedLines += rec.skippedLines;
    let i = 0, o = 0, c = 0, last = 0, any = false;
    for (const key in rec.buckets) {
      const day = key.slice(0, 10);
      if (day < from) continue;
      const b = rec.buckets[key]!;
      const input = b[0] + b[2] + b[3];
      any = true;
      i += input;
      o += b[1];
      c += b[4];
      if (b[5] > last) last = b[5];
      total.input += input;
      total.output += b[1];
      total.cacheRead += b[2];
      total.cacheWrite += b[3];
      total.cost += b[4];
      add(days, day, input, b[1], b[4]);
      add(models, key.slice(11), input, b[1], b[4]);
    }
    if (any) found.push({ path, rec, i, o, c: usd(c), last });
  }
  found.sort((a, b) => b.c - a.c || b.last - a.last);
  const sessions: UsageSession[] = found.slice(0, USAGE_MAX_SESSIONS).map((f) => ({
    sessionId: sessionOf.get(basename(f.path)) ?? null,
    piSessionId: f.rec.piSessionId,
    cwd: f.rec.cwd,
    model: f.rec.model,
    startedAt: f.rec.startedAt,
    lastActivityAt: f.last ? new Date(f.last).toISOString() : null,
    inputTokens: f.i,
    outputTokens: f.o,
    costUsd: f.c,
  }));
  return {
    ok: true,
    range,
    totalInputTokens: total.input,
    totalOutputTokens: total.output,
    totalCostUsd: usd(total.cost),
    totalCacheReadTokens: total.cacheRead,
    totalCacheWriteTokens: total.cacheWrite,
    sessions,
    sessionCount: found.length,
    truncated: found.length > USAGE_MAX_SESSIONS,
    days: [...days].sort(([a], [b]) => a.localeCompare(b)).map(([date, v]) => ({
      date,
      ...v,
      costUsd: usd(v.costUsd),
    })),
    models: [...models].sort(([, a], [, b]) => b.costUsd - a.costUsd).map(([model, v]) => ({
      model,
      ...v,
      costUsd: usd(v.costUsd),
    })),
    filesIndexed: files.size,
    skippedLines,
  };
}

/** A file not read yet. */
export function emptyRecord(ino: number | null): FileRecord {
  return {
    size: 0,
    mtimeMs: 0,
    ino,
    offset: 0,
    piSessionId: null,
    cwd: null,
    startedAt: null,
    model: null,
    buckets: {},
    skippedLines: 0,
  };
}

/** A persisted record as the index wrote it (else it is read again). */
export function isRecord(v: unknown): v is FileRecord {
  return isObject(v) && typeof v.size === "number" && typeof v.offset === "number" &&
    typeof v.mtimeMs === "number" && isObject(v.buckets) && typeof v.skippedLines === "number";
}

function text(v: unknown): string | null {
  return typeof v === "string" ? v.slice(0, MAX_TEXT) : null;
}

function isoTime(v: unknown): string | null {
  if (typeof v !== "string") return null;
  const t = Date.parse(v);
  return Number.isFinite(t) ? new Date(t).toISOString() : null;
}

/** A token count or cost: finite and not negative, else 0 (a corrupt field counts nothing). */
function count(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0;
}

/** Dollars rounded to a millionth (sums of floats otherwise show 0.30000000000000004). */
function usd(v: number): number {
  return Math.round(v * 1e6) / 1e6;
}

function add(m: Map<string, UsageAmounts>, key: string, i: number, o: number, c: number): void {
  const v = m.get(key);
  if (v) {
    v.inputTokens += i;
    v.outputTokens += o;
    v.costUsd += c;
  } else m.set(key, { inputTokens: i, outputTokens: o, costUsd: c });
}
