/**
 * A message of the user: the text in a bubble (folded when it is long),
 * and a way to send it again when the agent forgot it.
 *
 * @module
 */
import { useMemo, useState } from "preact/hooks";
import type { Item } from "../../../../shared/conversation.ts";
import { Icon } from "../icon.tsx";

/** Sends a forgotten prompt again (absent where the session cannot take input). */
export type Resend = ((text: string) => void) | null;

/** The user's message `item`. */
export function UserMessage(
  { item, resend }: { item: Extract<Item, { kind: "user" }>; resend: Resend },
) {
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
