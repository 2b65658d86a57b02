/**
 * A tool call of the agent as a card: what it does in one line, its state,
 * and its other arguments and output when opened.
 *
 * @module
 */
import { useMemo } from "preact/hooks";
import type { Block, ToolRun } from "../../../../shared/conversation.ts";
import { highlight } from "../../markdown.ts";
import { Icon } from "../icon.tsx";

const SUMMARY_KEYS = ["command", "path", "file_path", "pattern", "query", "url"];

/**
 * What a tool call does in one line (the command, the path, ...), and the
 * arguments left to show in its body: the summary is not shown twice.
 */
function toolSummary(args: unknown): { summary: string; rest: Record<string, unknown> | null } {
  const a = (args && typeof args === "object" ? args : {}) as Record<string, unknown>;
  // ask_user: its questions are the summary (their options show above the message box).
  const qs = a.questions as { question?: unknown }[] | undefined;
  if (Array.isArray(qs) && typeof qs[0]?.question === "string") {
    return { summary: qs.map((q) => String(q?.question ?? "")).join(" · "), rest: null };
  }
  const key = SUMMARY_KEYS.find((k) => typeof a[k] === "string") ??
    Object.keys(a).find((k) => typeof a[k] === "string");
  if (key === undefined) return { summary: "", rest: Object.keys(a).length > 0 ? a : null };
  const { [key]: summary, ...rest } = a;
  return { summary: String(summary), rest: Object.keys(rest).length > 0 ? rest : null };
}

const MAX_OUTPUT_CHARS = 20_000;

/** A call, with its run once the runner reported one; open while it runs or when it failed. */
export function ToolCard(
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
