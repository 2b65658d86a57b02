/**
 * An answer of the agent: its text as Markdown, its thinking and its tool
 * calls in order, and how it ended.
 *
 * @module
 */
import { Fragment } from "preact";
import { memo } from "preact/compat";
import { useMemo, useRef } from "preact/hooks";
import type { Item, ToolRun } from "../../../../shared/conversation.ts";
import { renderMarkdown } from "../../markdown.ts";
import { Icon } from "../icon.tsx";
import { ToolCard } from "./_tool_card.tsx";
import { useSigils } from "../services/sigil_pill.tsx";
import { SubagentLinks } from "../subagents/subagents.tsx";

/** The assistant message `item`; `tools` holds the runs of its tool calls. */
export function AssistantMessage(
  { item, tools }: { item: Extract<Item, { kind: "assistant" }>; tools: Record<string, ToolRun> },
) {
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
        const children = tools[b.id]?.children;
        if (!children) return <ToolCard key={b.id || i} call={b} run={tools[b.id]} />;
        // A subagent call links its children below its card, open or closed.
        return (
          <Fragment key={b.id || i}>
            <ToolCard call={b} run={tools[b.id]} />
            <SubagentLinks ids={children} />
          </Fragment>
        );
      })}
      {item.streaming && item.blocks.length === 0 && <Typing label="The agent is answering" />}
      {item.error && item.stopReason !== "aborted" && (
        <p class="error" role="alert">
          <Icon name="alert" size={14} /> {item.error}
        </p>
      )}
      {item.stopReason === "aborted" && <p class="notice info">Stopped</p>}
      {item.interrupted && <p class="notice info">Interrupted by a runner restart</p>}
    </article>
  );
}

/** Three dots that say the agent is at work. */
export function Typing({ label }: { label: string }) {
  return (
    <p class="typing" aria-label={label}>
      <span />
      <span />
      <span />
    </p>
  );
}

/** Agent text as sanitised HTML, parsed again only when the text changes. */
const Markdown = memo(function Markdown({ text, streaming }: { text: string; streaming: boolean }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  const root = useRef<HTMLDivElement>(null);
  // `[[type:id]]` tokens of the runner's services become pills.
  useSigils(root, html);
  return (
    <div
      ref={root}
      class={`md ${streaming ? "streaming" : ""}`}
      // Sanitised by DOMPurify in renderMarkdown.
      dangerouslySetInnerHTML={{ __html: html }}
    />
  );
});
