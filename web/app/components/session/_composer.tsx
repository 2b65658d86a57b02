/**
 * The message box under a conversation: a prompt when the agent is idle;
 * while it works, a steer or a queued follow-up, the queue itself, and Stop.
 *
 * @module
 */
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import type { InputKind } from "../../../../shared/protocol.ts";
import { link } from "../../store.ts";
import { Icon } from "../icon.tsx";
import {
  AttachButton,
  AttachmentChips,
  dropHandlers,
  pastedFiles,
  useAttachments,
} from "../attachments/attachments.tsx";

/** How a message goes while the agent works. */
type Mode = "steer" | "followUp";

/** The messages waiting for the agent, by how they were sent. */
interface Queue {
  steering: string[];
  followUp: string[];
}

/** Sends into session `id`; an ended session has a line that says so instead. */
export function Composer(
  { id, working, ended, queue }: { id: string; working: boolean; ended: boolean; queue: Queue },
) {
  const [text, setText] = useState("");
  const [mode, setMode] = useState<Mode>("steer");
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const files = useAttachments(id);
  const [dragOver, setDragOver] = useState(false);

  async function send(kind: InputKind, body = text) {
    setError(null);
    setSending(true);
    const withFiles = kind === "prompt" || kind === "steer" || kind === "followUp";
    try {
      await link.input(id, kind, body, withFiles ? files.ready : []);
      if (kind !== "abort") {
        // What was typed while it was on its way stays in the box.
        setText((now) => now === body ? "" : now);
        setNote(null);
        if (withFiles) files.clear();
      }
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setSending(false);
    }
  }

  /** Stops the agent; what was queued is dropped, and its text comes back to the box. */
  async function stop() {
    const queuedText = [...queue.steering, ...queue.followUp];
    await send("abort", "");
    if (queuedText.length > 0) {
      setText((t) => [t.trim(), ...queuedText].filter((x) => x).join("\n\n"));
      setNote("Stop cleared the queued messages: their text is back in the message box");
    }
  }

  async function unqueue(message: string) {
    setError(null);
    try {
      await link.input(id, "dequeue", message);
    } catch (err) {
      setError((err as Error).message);
    }
  }

  function submit(ev?: Event) {
    ev?.preventDefault();
    if ((!text.trim() && files.ready.length === 0) || sending || files.uploading) return;
    send(working ? mode : "prompt");
  }

  if (ended) {
    return (
      <footer class="composer ended">
        <p class="muted">This session has ended.</p>
      </footer>
    );
  }
  return (
    <footer
      class={dragOver ? "composer drag-over" : "composer"}
      {...dropHandlers(files.add, setDragOver)}
    >
      <QueuedMessages queue={queue} onRemove={unqueue} />
      <AttachmentChips items={files.items} onRemove={files.remove} />
      {error && <p class="error" role="alert">{error}</p>}
      {note && !error && (
        <p class="hint composer-note" role="status">
          {note}
          <button type="button" class="btn small" onClick={() => setNote(null)}>Dismiss</button>
        </p>
      )}
      <form class={`composer-row ${working ? "working" : ""}`} onSubmit={submit}>
        <AttachButton onFiles={files.add} />
        <MessageBox
          text={text}
          onText={setText}
          onSubmit={submit}
          onPasteFiles={files.add}
          placeholder={working
            ? (mode === "steer"
              ? "Steer the agent (it reads this after its current step)…"
              : "Queue a follow-up for after this run…")
            : "Message the agent…"}
        />
        {working && <SendMode mode={mode} onMode={setMode} />}
        <button
          type="submit"
          class="btn primary icon-only"
          disabled={(!text.trim() && files.ready.length === 0) || sending || files.uploading}
          aria-label={working ? (mode === "steer" ? "Send steer" : "Queue follow-up") : "Send"}
        >
          <Icon name="send" />
        </button>
        {working && (
          <button
            type="button"
            class="btn danger icon-only"
            aria-label="Stop the agent"
            title="Stop (abort the current run)"
            onClick={stop}
          >
            <Icon name="stop" />
          </button>
        )}
      </form>
    </footer>
  );
}

/** The queue, each message with a button that takes it back out. */
function QueuedMessages(
  { queue, onRemove }: { queue: Queue; onRemove: (message: string) => void },
) {
  const queued = [
    ...queue.steering.map((t) => ["steer", t] as const),
    ...queue.followUp.map((t) => ["follow-up", t] as const),
  ];
  if (queued.length === 0) return null;
  return (
    <ul class="queue" aria-label="Queued messages">
      {queued.map(([k, t], i) => (
        <li key={i}>
          <span class="badge">{k}</span>
          <span class="queue-text" title={t}>{t}</span>
          <button
            type="button"
            class="icon-btn"
            aria-label={`Remove queued ${k}: ${t.slice(0, 60)}`}
            title="Remove from the queue"
            onClick={() => onRemove(t)}
          >
            <Icon name="x" size={15} />
          </button>
        </li>
      ))}
    </ul>
  );
}

/**
 * The text area, as tall as its text up to 240 pixels; Enter sends,
 * Shift+Enter makes a new line, Escape leaves it.
 */
function MessageBox(
  { text, onText, onSubmit, onPasteFiles, placeholder }: {
    text: string;
    onText: (text: string) => void;
    onSubmit: () => void;
    onPasteFiles: (files: File[]) => void;
    placeholder: string;
  },
) {
  const area = useRef<HTMLTextAreaElement>(null);
  useLayoutEffect(() => {
    const el = area.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  }, [text]);
  return (
    <>
      <label class="sr-only" for="composer-input">Message</label>
      <textarea
        id="composer-input"
        ref={area}
        rows={1}
        value={text}
        placeholder={placeholder}
        onInput={(e) => onText(e.currentTarget.value)}
        onPaste={(e) => {
          const files = pastedFiles(e);
          if (files.length === 0) return;
          e.preventDefault();
          onPasteFiles(files);
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            onSubmit();
          } else if (e.key === "Escape") {
            e.currentTarget.blur();
          }
        }}
      />
    </>
  );
}

/** Steer or Follow-up, as a pair of radio buttons. */
function SendMode({ mode, onMode }: { mode: Mode; onMode: (mode: Mode) => void }) {
  return (
    <div class="seg" role="radiogroup" aria-label="How to send while the agent works">
      <button
        type="button"
        role="radio"
        aria-checked={mode === "steer"}
        class={mode === "steer" ? "on" : ""}
        onClick={() => onMode("steer")}
        title="Read by the agent once its current step ends (a tool call, or the answer it is writing)"
      >
        Steer
      </button>
      <button
        type="button"
        role="radio"
        aria-checked={mode === "followUp"}
        class={mode === "followUp" ? "on" : ""}
        onClick={() => onMode("followUp")}
        title="Queue: delivered when the agent finishes"
      >
        Follow-up
      </button>
    </div>
  );
}
