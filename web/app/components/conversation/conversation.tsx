/**
 * A session's conversation as the reader sees it: each item of the folded
 * event log in order, and a sign while the agent works.
 *
 * @module
 */
import { memo } from "preact/compat";
import type { Conversation, Item, ToolRun } from "../../../../shared/conversation.ts";
import { highlight } from "../../markdown.ts";
import { Icon } from "../icon.tsx";
import { AssistantMessage, Typing } from "./_assistant_message.tsx";
import { type Resend, UserMessage } from "./_user_message.tsx";

/** The whole conversation of a session. */
export function ConversationView({ conv, resend }: { conv: Conversation; resend: Resend }) {
  return (
    <div class="conversation">
      {conv.items.map((item) => (
        <ItemView key={item.key} item={item} tools={conv.tools} resend={resend} />
      ))}
      {conv.working && !conv.items.some((i) => i.kind === "assistant" && i.streaming) && (
        <Typing label="The agent is working" />
      )}
    </div>
  );
}

/**
 * One item, rendered again only when it changed (the reducer keeps the
 * identity of the others) or, for an answer, when one of its tool runs did.
 */
const ItemView = memo(function ItemView(
  { item, tools, resend }: { item: Item; tools: Record<string, ToolRun>; resend: Resend },
) {
  switch (item.kind) {
    case "user":
      return <UserMessage item={item} resend={resend} />;
    case "trigger":
      return <TriggerMessage item={item} />;
    case "notice":
      return <Notice item={item} />;
    case "sandbox":
      return <SandboxNote item={item} />;
    default:
      return <AssistantMessage item={item} tools={tools} />;
  }
}, (a, b) => {
  if (a.item !== b.item || a.resend !== b.resend) return false;
  if (a.item.kind !== "assistant") return true;
  // Re-render when a tool this message called changed.
  for (const blk of a.item.blocks) {
    if (blk.type === "toolCall" && a.tools[blk.id] !== b.tools[blk.id]) return false;
  }
  return true;
});

/** A trigger delivered into the session: what it is, from where, how, and its payload. */
function TriggerMessage({ item }: { item: Extract<Item, { kind: "trigger" }> }) {
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

/** What the sandbox blocked, or the runner's answer to `/sandbox …` (docs/sandbox.md). */
function SandboxNote({ item }: { item: Extract<Item, { kind: "sandbox" }> }) {
  if (item.variant === "violation") {
    return (
      <article class="msg sandbox violation" aria-label="Sandbox violation">
        <div class="sandbox-head">
          <Icon name="shield" size={15} />
          <strong>{item.title}</strong>
        </div>
        {item.text && <p class="sandbox-reason">{item.text}</p>}
      </article>
    );
  }
  return (
    <article class="msg sandbox info" aria-label={`Answer to ${item.title}`}>
      <div class="sandbox-head">
        <Icon name="shield" size={15} />
        <code>{item.title}</code>
      </div>
      <pre class="sandbox-text">{item.text}</pre>
    </article>
  );
}

/** A line from baton itself (a restart, a failure), not from the agent. */
function Notice({ item }: { item: Extract<Item, { kind: "notice" }> }) {
  return (
    <p class={`notice ${item.level}`} role={item.level === "error" ? "alert" : undefined}>
      {item.level === "error" && <Icon name="alert" size={14} />} {item.text}
    </p>
  );
}
