/**
 * One file's diff: unified on a phone, side by side on a wide screen,
 * coloured by highlight.js, large diffs collapsed; a tap on line numbers
 * selects lines to comment on for the review.
 *
 * @module
 */
import { Fragment } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { GitDiff } from "../../../../shared/git_api.ts";
import { link } from "../../store.ts";
import { highlight } from "../../markdown.ts";
import { type DiffLine, type Hunk, languageOf, parseDiff, splitRows } from "./_diff.ts";
import { reviewOf, type Selection } from "./_review.ts";

/** Diffs longer than this many lines start collapsed. */
const COLLAPSE_LINES = 400;

/** The file a diff is shown for. */
export interface DiffTarget {
  path: string;
  origPath?: string;
  staged: boolean;
}

/** Loads and shows the diff of `file` in session `id`. */
export function DiffView(
  { id, file, wide, version }: { id: string; file: DiffTarget; wide: boolean; version: number },
) {
  const [diff, setDiff] = useState<GitDiff | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [expanded, setExpanded] = useState(false);
  const [sel, setSel] = useState<Selection | null>(null);
  useEffect(() => {
    setError(null);
    link.service<GitDiff>(id, "diff", {
      path: file.path,
      staged: file.staged,
      ...(file.origPath ? { origPath: file.origPath } : {}),
    }).then(setDiff, (e) => setError(e.message));
  }, [id, file.path, file.staged, file.origPath, version]);
  useEffect(() => setSel(null), [file.path, file.staged]);

  if (error) return <p class="error" role="alert">{error}</p>;
  if (!diff) return <p class="muted pad" aria-busy="true">Loading the diff…</p>;
  if (diff.binary) return <p class="muted pad">Binary file: no text diff.</p>;
  const hunks = parseDiff(diff.diff);
  const count = hunks.reduce((n, h) => n + h.lines.length, 0);
  if (hunks.length === 0) return <p class="muted pad">No changes to show.</p>;
  const lang = languageOf(file.path);
  const ctx: LineCtx = { id, path: file.path, lang, sel, setSel, hunks };
  return (
    <div class={`diff ${wide ? "split" : "unified"}`} aria-label={`Diff of ${file.path}`}>
      {diff.truncated && (
        <p class="hint pad">This diff is too large and was cut; the rest is not shown.</p>
      )}
      {count > COLLAPSE_LINES && !expanded
        ? (
          <button type="button" class="btn" onClick={() => setExpanded(true)}>
            Show large diff ({count} lines)
          </button>
        )
        : hunks.map((h, i) => (
          <section class="hunk" key={i}>
            <div class="hunk-head">{h.header}</div>
            {wide ? <SplitHunk hunk={h} ctx={ctx} /> : <UnifiedHunk hunk={h} ctx={ctx} />}
          </section>
        ))}
    </div>
  );
}

interface LineCtx {
  id: string;
  path: string;
  lang: string | undefined;
  sel: Selection | null;
  setSel: (s: Selection | null) => void;
  hunks: Hunk[];
}

/** The side and number a comment on this line refers to. */
function anchorOf(l: DiffLine): { side: "new" | "old"; no: number } | null {
  if (l.kind === "del" && l.oldNo !== undefined) return { side: "old", no: l.oldNo };
  if (l.newNo !== undefined) return { side: "new", no: l.newNo };
  return null;
}

function selected(l: DiffLine, sel: Selection | null): boolean {
  const a = anchorOf(l);
  return !!a && !!sel && a.side === sel.side && a.no >= sel.start && a.no <= sel.end;
}

/** A tap on a line: select it; a second tap on another line of the same side makes a range. */
function tap(l: DiffLine, ctx: LineCtx): void {
  const a = anchorOf(l);
  if (!a) return;
  const s = ctx.sel;
  if (s && s.side === a.side && s.start === s.end && s.start !== a.no) {
    ctx.setSel({ side: a.side, start: Math.min(s.start, a.no), end: Math.max(s.start, a.no) });
  } else if (s && s.start === s.end && s.start === a.no && s.side === a.side) ctx.setSel(null);
  else ctx.setSel({ side: a.side, start: a.no, end: a.no });
}

function Code({ l, lang }: { l: DiffLine; lang: string | undefined }) {
  return (
    <code
      class="hljs"
      // highlight() escapes what it does not colour.
      dangerouslySetInnerHTML={{ __html: highlight(l.text, lang) || " " }}
    />
  );
}

function Num({ l, ctx, no }: { l: DiffLine; ctx: LineCtx; no: number | undefined }) {
  if (no === undefined) return <span class="ln" />;
  return (
    <button
      type="button"
      class="ln"
      tabIndex={-1}
      aria-label={`Comment on line ${no}`}
      onClick={(e) => {
        e.stopPropagation();
        tap(l, ctx);
      }}
    >
      {no}
    </button>
  );
}

function UnifiedHunk({ hunk, ctx }: { hunk: Hunk; ctx: LineCtx }) {
  return (
    <div class="lines">
      {hunk.lines.map((l, i) => (
        <Fragment key={i}>
          <div
            class={`line ${l.kind} ${selected(l, ctx.sel) ? "sel" : ""}`}
            onClick={() => tap(l, ctx)}
          >
            <Num l={l} ctx={ctx} no={l.oldNo} />
            <Num l={l} ctx={ctx} no={l.newNo} />
            <span class="sign">{l.kind === "add" ? "+" : l.kind === "del" ? "−" : " "}</span>
            <Code l={l} lang={ctx.lang} />
          </div>
          <Notes l={l} ctx={ctx} />
        </Fragment>
      ))}
    </div>
  );
}

function SplitHunk({ hunk, ctx }: { hunk: Hunk; ctx: LineCtx }) {
  return (
    <div class="lines">
      {splitRows(hunk.lines).map((r, i) => {
        const last = r.right ?? r.left!;
        return (
          <Fragment key={i}>
            <div class="row">
              <Half l={r.left} ctx={ctx} side="old" />
              <Half l={r.right} ctx={ctx} side="new" />
            </div>
            {r.left && r.left !== r.right && <Notes l={r.left} ctx={ctx} />}
            <Notes l={last} ctx={ctx} />
          </Fragment>
        );
      })}
    </div>
  );
}

function Half({ l, ctx, side }: { l: DiffLine | null; ctx: LineCtx; side: "old" | "new" }) {
  if (!l) return <div class="line empty" />;
  const kind = l.kind === "ctx" ? "ctx" : side === "old" ? "del" : "add";
  return (
    <div
      class={`line ${kind} ${selected(l, ctx.sel) ? "sel" : ""}`}
      onClick={() => tap(l, ctx)}
    >
      <Num l={l} ctx={ctx} no={side === "old" ? l.oldNo : l.newNo} />
      <Code l={l} lang={ctx.lang} />
    </div>
  );
}

/** Under a line: the comments that end on it, and the form when the selection ends on it. */
function Notes({ l, ctx }: { l: DiffLine; ctx: LineCtx }) {
  const a = anchorOf(l);
  const review = reviewOf(ctx.id);
  if (!a) return null;
  const mine = review.value.filter((c) =>
    c.path === ctx.path && c.side === a.side && c.endLine === a.no
  );
  const formHere = ctx.sel && ctx.sel.side === a.side && ctx.sel.end === a.no;
  if (!mine.length && !formHere) return null;
  return (
    <div class="notes">
      {mine.map((c) => (
        <div class="note" key={`${c.startLine}-${c.body}`}>
          <span class="muted">
            {c.startLine === c.endLine
              ? `Line ${c.startLine}`
              : `Lines ${c.startLine}–${c.endLine}`}
          </span>
          <p>{c.body}</p>
          <button
            type="button"
            class="btn small"
            onClick={() => review.value = review.value.filter((x) => x !== c)}
          >
            Remove
          </button>
        </div>
      ))}
      {formHere && <CommentForm ctx={ctx} />}
    </div>
  );
}

function CommentForm({ ctx }: { ctx: LineCtx }) {
  const [body, setBody] = useState("");
  const box = useRef<HTMLTextAreaElement>(null);
  useEffect(() => box.current?.focus({ preventScroll: true }), []);
  const sel = ctx.sel!;
  const excerpt = ctx.hunks.flatMap((h) => h.lines).filter((l) => selected(l, sel))
    .map((l) => l.text).join("\n");
  const label = sel.start === sel.end ? `line ${sel.start}` : `lines ${sel.start}–${sel.end}`;
  return (
    <form
      class="comment-form"
      onSubmit={(e) => {
        e.preventDefault();
        if (!body.trim()) return;
        const review = reviewOf(ctx.id);
        review.value = [...review.value, {
          path: ctx.path,
          side: sel.side,
          startLine: sel.start,
          endLine: sel.end,
          excerpt: excerpt.slice(0, 2000),
          body: body.trim(),
        }];
        ctx.setSel(null);
      }}
    >
      <label>
        <span class="sr-only">Comment on {label}</span>
        <textarea
          rows={3}
          placeholder={`Comment on ${label}${sel.side === "old" ? " (removed)" : ""}`}
          value={body}
          onInput={(e) => setBody(e.currentTarget.value)}
          ref={box}
        />
      </label>
      <div class="row-buttons">
        <button type="submit" class="btn primary small" disabled={!body.trim()}>
          Add comment
        </button>
        <button type="button" class="btn small" onClick={() => ctx.setSel(null)}>Cancel</button>
      </div>
    </form>
  );
}
