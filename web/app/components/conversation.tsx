import { memo } from "preact/compat";
import { useMemo, useState } from "preact/hooks";
import type { Block, Conversation, Item, ToolRun } from "../../../shared/conversation.ts";
import { highlight, renderMarkdown } from "../markdown.ts";
import { Icon } from "./icon.tsx";

const Markdown = memo(function Markdown({ text, streaming }: { text: string; streaming: boolean }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return (
    <div
      class={`md ${streaming ? "streaming" : ""}`}
      // Sanitised by DOMPurify in renderMarkdown.
      dangerouslySetInnerHTML={{ __html: html }}
    />
  );
});

const SUMMARY_KEYS = ["command", "path", "file_path", "pattern", "query", "url"];

/**
 * What a tool call does in one line (the command, the path, ...), and the
 * arguments left to show in its body: the summary is not shown twice.
 */
function toolSummary(args: unknown): { summary: string; rest: Record<string, unknown> | null } {
  const a = (args && typeof args === "object" ? args : {}) as Record<string, unknown>;
  const key = SUMMARY_KEYS.find((k) => typeof a[k] === "string") ??
    Object.keys(a).find((k) => typeof a[k] === "string");
  if (key === undefined) return { summary: "", rest: Object.keys(a).length > 0 ? a : null };
  const { [key]: summary, ...rest } = a;
  return { summary: String(summary), rest: Object.keys(rest).length > 0 ? rest : null };
}

const MAX_OUTPUT_CHARS = 20_000;

function ToolCard(
  { call, run }: { call: Extract<Block, { type: "toolCall" }>; run: ToolRun | undefined },
) {
  const status = run?.status ?? "pending";
  const name = run?.name ?? call.name ?? "tool";
  const args = run?.args ?? call.args;
  const { summary, rest } = useMemo(() => toolSummary(args), [args]);
  const output = run?.output ?? "";
  const shown = output.length > MAX_OUTPUT_CHARS
    ? "…" + output.slice(output.length - MAX_OUTPUT_CHARS)
    : output;
  const restJson = useMemo(() => rest && JSON.stringify(rest, null, 2), [rest]);
  const label = {
    running: "running",
    error: "failed",
    done: "done",
    pending: "waiting",
    interrupted: "interrupted",
  }[status];
  const hasBody = restJson !== null || shown !== "" || status === "running";
  return (
    <details
      class={`tool ${status}`}
      open={status === "running" || status === "error" || status === "interrupted"}
    >
      <summary>
        <span class="tool-icon" aria-hidden="true">
          <Icon name={name === "bash" ? "terminal" : "chevron"} size={14} />
        </span>
        <span class="tool-name">{name}</span>
        <code class="tool-summary">{summary}</code>
        <span class={`badge ${status}`}>
          {status === "running" && <span class="spinner" aria-hidden="true" />}
          {label}
        </span>
      </summary>
      {hasBody && (
        <div class="tool-body">
          {restJson !== null && (
            <pre class="code"><code class="hljs" dangerouslySetInnerHTML={{
              __html: highlight(restJson, "json"),
            }} /></pre>
          )}
          {(shown || status === "running") && (
            <pre class={`tool-output ${status === "error" ? "error-text" : ""}`} aria-live="off">
              {shown || "…"}
            </pre>
          )}
        </div>
      )}
    </details>
  );
}

/** Sends a forgotten prompt again (absent where the session cannot take input). */
export type Resend = ((text: string) => void) | null;

/** A message longer than this many lines or characters shows its start only, until asked. */
const FOLD_LINES = 20;
const FOLD_CHARS = 2000;

/** The start of a long text and what it leaves out, or null when it is short enough to show. */
function foldOf(text: string): { start: string; moreLines: number; moreChars: number } | null {
  // The end of the FOLD_LINES-th line, or -1 when there are fewer lines.
  let end = -1;
  for (let line = 0; line < FOLD_LINES; line++) {
    end = text.indexOf("\n", end + 1);
    if (end === -1) break;
  }
  const cut = Math.min(end === -1 ? text.length : end, FOLD_CHARS);
  const rest = text.slice(cut);
  if (!rest.trim()) return null;
  return {
    start: text.slice(0, cut).trimEnd(),
    moreLines: rest.trimEnd().split("\n").length - 1,
    moreChars: rest.length,
  };
}

const count = (n: number, what: string) =>
  `${n.toLocaleString("en-US")} more ${what}${n === 1 ? "" : "s"}`;

/** A user's message in a bubble, folded when it is long (a pasted log, a whole file). */
function UserText({ text, id }: { text: string; id: string }) {
  const fold = useMemo(() => foldOf(text), [text]);
  const [open, setOpen] = useState(false);
  if (!fold) return <div class="bubble">{text}</div>;
  const more = fold.moreLines > 0
    ? count(fold.moreLines, "line")
    : count(fold.moreChars, "character");
  return (
    <>
      <div class={`bubble ${open ? "" : "folded"}`} id={id}>
        {open ? text : `${fold.start}…`}
      </div>
      <button
        type="button"
        class="btn link small fold"
        aria-expanded={open}
        aria-controls={id}
        onClick={() => {
          setOpen(!open);
          // Folding a message read far down keeps its start in view.
          if (open) document.getElementById(id)?.scrollIntoView({ block: "nearest" });
        }}
      >
        {open ? "Show less" : `Show more · ${more}`}
      </button>
    </>
  );
}

const ItemView = memo(function ItemView(
  { item, tools, resend }: { item: Item; tools: Record<string, ToolRun>; resend: Resend },
) {
  if (item.kind === "user") {
    return (
      <article
        class={`msg user ${item.forgotten ? "forgotten" : ""}`}
        aria-label={item.forgotten ? "You (not remembered by the agent)" : "You"}
      >
        <UserText text={item.text} id={`msg-${item.key}`} />
        {item.images > 0 && <span class="hint">{item.images} image(s)</span>}
        {item.forgotten && (
          <p class="forgotten-note">
            <span>Not remembered by the agent</span>
            {resend && (
              <button type="button" class="btn small" onClick={() => resend(item.text)}>
                <Icon name="send" size={13} /> Send again
              </button>
            )}
          </p>
        )}
      </article>
    );
  }
  if (item.kind === "trigger") {
    return (
      <article class="msg trigger" aria-label={`Trigger ${item.type}`}>
        <div class="trigger-head">
          <Icon name="bolt" size={15} />
          <strong>{item.summary ?? item.type}</strong>
          <span class="badge">{item.source}</span>
          <span class="badge">{item.deliverAs === "followUp" ? "follow-up" : "steer"}</span>
        </div>
        {item.instruction && <p class="trigger-instruction">{item.instruction}</p>}
        <details class="trigger-payload">
          <summary>
            Payload of <code>{item.type}</code>
          </summary>
          <pre class="code"><code class="hljs" dangerouslySetInnerHTML={{
            __html: highlight(JSON.stringify(item.payload, null, 2), "json"),
          }} /></pre>
        </details>
      </article>
    );
  }
  if (item.kind === "notice") {
    return (
      <p class={`notice ${item.level}`} role={item.level === "error" ? "alert" : undefined}>
        {item.level === "error" && <Icon name="alert" size={14} />} {item.text}
      </p>
    );
  }
  const lastText = item.blocks.map((b) => b.type).lastIndexOf("text");
  return (
    <article class="msg assistant" aria-label="Agent">
      {item.blocks.map((b, i) => {
        if (b.type === "text") {
          if (!b.text && !item.streaming) return null;
          return <Markdown key={i} text={b.text} streaming={item.streaming && i === lastText} />;
        }
        if (b.type === "thinking") {
          return (
            <details key={i} class="thinking" open={item.streaming && i === item.blocks.length - 1}>
              <summary>Thinking</summary>
              <div class="thinking-text">{b.text}</div>
            </details>
          );
        }
        return <ToolCard key={b.id || i} call={b} run={tools[b.id]} />;
      })}
      {item.streaming && item.blocks.length === 0 && (
        <p class="typing" aria-label="The agent is answering">
          <span />
          <span />
          <span />
        </p>
      )}
      {item.error && item.stopReason !== "aborted" && (
        <p class="error" role="alert">
          <Icon name="alert" size={14} /> {item.error}
        </p>
      )}
      {item.stopReason === "aborted" && <p class="notice info">Stopped</p>}
      {item.interrupted && <p class="notice info">Interrupted by a runner restart</p>}
    </article>
  );
}, (a, b) => {
  if (a.item !== b.item || a.resend !== b.resend) return false;
  if (a.item.kind !== "assistant") return true;
  // Re-render when a tool this message called changed.
  for (const blk of a.item.blocks) {
    if (blk.type === "toolCall" && a.tools[blk.id] !== b.tools[blk.id]) return false;
  }
  return true;
});

/** The whole conversation of a session. */
export function ConversationView({ conv, resend }: { conv: Conversation; resend: Resend }) {
  return (
    <div class="conversation">
      {conv.items.map((item) => (
        <ItemView key={item.key} item={item} tools={conv.tools} resend={resend} />
      ))}
      {conv.working && !conv.items.some((i) => i.kind === "assistant" && i.streaming) && (
        <p class="typing" aria-label="The agent is working">
          <span />
          <span />
          <span />
        </p>
      )}
    </div>
  );
}
