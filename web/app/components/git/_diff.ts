/**
 * git's unified diff of one file as rows to draw: unified (a phone) or
 * side by side (a wide screen).
 *
 * @module
 */

/** One line of a unified diff. */
export interface DiffLine {
  kind: "add" | "del" | "ctx" | "hunk" | "note";
  text: string;
  /** Line number in the old file (del, ctx). */
  oldNo?: number;
  /** Line number in the new file (add, ctx). */
  newNo?: number;
}

/** A hunk: its `@@` header and its lines. */
export interface Hunk {
  header: string;
  lines: DiffLine[];
}

/** Parses the hunks of a one-file diff (headers before the first `@@` are skipped). */
export function parseDiff(text: string): Hunk[] {
  const hunks: Hunk[] = [];
  let cur: Hunk | null = null;
  let oldNo = 0, newNo = 0;
  for (const raw of text.split("\n")) {
    const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$/.exec(raw);
    if (m) {
      oldNo = Number(m[1]);
      newNo = Number(m[2]);
      cur = { header: raw, lines: [] };
      hunks.push(cur);
      continue;
    }
    if (!cur) continue;
    const c = raw[0];
    const body = raw.slice(1);
    if (c === "+") cur.lines.push({ kind: "add", text: body, newNo: newNo++ });
    else if (c === "-") cur.lines.push({ kind: "del", text: body, oldNo: oldNo++ });
    else if (c === " ") cur.lines.push({ kind: "ctx", text: body, oldNo: oldNo++, newNo: newNo++ });
    else if (c === "\\") cur.lines.push({ kind: "note", text: raw });
  }
  return hunks;
}

/** A row of the side-by-side view: the old line on the left, the new on the right. */
export interface SplitRow {
  left: DiffLine | null;
  right: DiffLine | null;
}

/** Pairs each run of removed lines with the run of added lines that follows it. */
export function splitRows(lines: DiffLine[]): SplitRow[] {
  const rows: SplitRow[] = [];
  for (let i = 0; i < lines.length;) {
    const l = lines[i]!;
    if (l.kind === "ctx" || l.kind === "note" || l.kind === "hunk") {
      rows.push({ left: l, right: l });
      i++;
      continue;
    }
    const dels: DiffLine[] = [];
    const adds: DiffLine[] = [];
    while (i < lines.length && lines[i]!.kind === "del") dels.push(lines[i++]!);
    while (i < lines.length && lines[i]!.kind === "add") adds.push(lines[i++]!);
    for (let k = 0; k < Math.max(dels.length, adds.length); k++) {
      rows.push({ left: dels[k] ?? null, right: adds[k] ?? null });
    }
  }
  return rows;
}

/** The highlight.js language of a file, from its extension. */
export function languageOf(path: string): string | undefined {
  const ext = path.split(".").pop()?.toLowerCase() ?? "";
  const map: Record<string, string> = {
    ts: "typescript",
    tsx: "typescript",
    mts: "typescript",
    js: "javascript",
    jsx: "javascript",
    mjs: "javascript",
    json: "json",
    py: "python",
    rs: "rust",
    go: "go",
    java: "java",
    c: "c",
    h: "c",
    cc: "cpp",
    cpp: "cpp",
    hpp: "cpp",
    css: "css",
    html: "xml",
    xml: "xml",
    svg: "xml",
    md: "markdown",
    yml: "yaml",
    yaml: "yaml",
    sh: "bash",
    bash: "bash",
    sql: "sql",
  };
  return map[ext];
}
