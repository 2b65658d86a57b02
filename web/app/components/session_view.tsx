import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { type InputKind, MAX_SESSION_TITLE } from "../../../shared/protocol.ts";
import { api } from "../api.ts";
import { baseName, cost, tokens } from "../format.ts";
import { statusOf } from "../session_status.ts";
import { link, openSession, renameSession, runnerName, runners } from "../store.ts";
import { ConversationView } from "./conversation.tsx";
import { SessionTriggers } from "./session_triggers.tsx";
import { Icon } from "./icon.tsx";

/** The heart of the app: one session's live conversation and its composer. */
export function SessionView({ id }: { id: string }) {
  const open = openSession(id);
  const info = open.info.value;
  const conv = open.conv.value;
  const scroller = useRef<HTMLDivElement>(null);
  const [stuck, setStuck] = useState(true);
  const [panel, setPanel] = useState(false);
  const [renaming, setRenaming] = useState(false);

  // Follow the stream while the reader is at the bottom; stop when they scroll up.
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && stuck) el.scrollTop = el.scrollHeight;
  }, [conv, stuck]);
  useEffect(() => setStuck(true), [id]);

  if (open.error.value && !info) {
    return (
      <main class="page narrow">
        <div class="card empty">
          <Icon name="alert" size={28} />
          <h1>Session not found</h1>
          <p>It does not exist, or it belongs to another account.</p>
        </div>
      </main>
    );
  }

  const st = info ? statusOf(info) : { label: "loading", tone: "off" };
  const runner = info ? runners.value.find((r) => r.id === info.runnerId) : undefined;
  const ended = info?.status === "ended" || info?.status === "error";
  const model = conv.model ?? info?.model ?? null;
  const working = conv.working;
  // A prompt the agent lost in a runner restart goes again as a new message
  // (queued after the current turn while it works).
  const resend = useCallback(
    (text: string) => link.input(id, working ? "followUp" : "prompt", text).catch(() => {}),
    [id, working],
  );
  return (
    <main class="session" aria-labelledby="session-title">
      <header class="session-head">
        <div class="session-head-main">
          <h1
            id="session-title"
            class={`session-name ${renaming ? "sr-only" : ""}`}
            title={info?.title || undefined}
          >
            {info?.title || "Untitled session"}
          </h1>
          {renaming && info && (
            <RenameForm
              id={id}
              title={info.title}
              onDone={() => {
                setRenaming(false);
                document.getElementById("rename-session")?.focus();
              }}
            />
          )}
          <p class="session-meta">
            <span>
              <Icon name="server" size={13} /> {info ? runnerName(info.runnerId) : "…"}
              {runner && !runner.connected && <span class="warn-text">(offline)</span>}
            </span>
            <span title={conv.cwd ?? info?.cwd}>
              <Icon name="folder" size={13} />{" "}
              <span class="wide-only">{conv.cwd ?? info?.cwd ?? "…"}</span>
              <span class="narrow-only">{baseName(conv.cwd ?? info?.cwd ?? "…")}</span>
            </span>
            {model && (
              <span>
                <Icon name="sparkle" size={13} /> {model.provider}/{model.id}
              </span>
            )}
            <span class="usage" title="Tokens in / out and cost of this session">
              {tokens(conv.usage.input + conv.usage.cacheRead)} in · {tokens(conv.usage.output)}
              {" "}
              out · {cost(conv.usage.cost)}
            </span>
          </p>
        </div>
        <div class="session-head-side">
          <span class={`pill ${st.tone}`} role="status" aria-label={`Status: ${st.label}`}>
            {st.tone === "busy" && <span class="spinner" aria-hidden="true" />}
            {st.label}
          </span>
          <button
            type="button"
            class={`btn small ${panel ? "on" : ""}`}
            aria-pressed={panel}
            onClick={() => setPanel(!panel)}
          >
            <Icon name="bolt" size={14} /> Triggers
          </button>
          {info && (
            <SessionMenu
              id={id}
              pinned={info.isPinned}
              ended={ended}
              onRename={() => setRenaming(true)}
            />
          )}
        </div>
      </header>
      <div class="session-body">
        <div
          class="scroller"
          ref={scroller}
          onScroll={(e) => {
            const el = e.currentTarget;
            setStuck(el.scrollHeight - el.scrollTop - el.clientHeight < 40);
          }}
        >
          {!open.caughtUp.value && conv.items.length === 0 && (
            <p class="muted pad" aria-busy="true">Loading the conversation…</p>
          )}
          {open.caughtUp.value && conv.items.length === 0 && !conv.working && (
            <p class="muted pad">Nothing here yet. Send the agent a message below.</p>
          )}
          <ConversationView conv={conv} resend={ended ? null : resend} />
        </div>
        {panel && (
          <SessionTriggers
            id={id}
            version={conv.items.length}
            onClose={() => setPanel(false)}
          />
        )}
      </div>
      {!stuck && (
        <button type="button" class="btn jump" onClick={() => setStuck(true)}>
          Jump to latest
        </button>
      )}
      <Composer id={id} working={conv.working} ended={ended} queue={conv.queue} />
    </main>
  );
}

/** The title in an input: Enter (or the check) saves, Escape (or the cross) cancels. */
function RenameForm({ id, title, onDone }: { id: string; title: string; onDone: () => void }) {
  const [value, setValue] = useState(title);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    input.current?.focus();
    input.current?.select();
  }, []);

  async function save(ev: Event) {
    ev.preventDefault();
    const next = value.trim();
    if (!next) {
      setError("A title cannot be empty");
      return;
    }
    if (next === title) return onDone();
    setBusy(true);
    setError(null);
    try {
      await renameSession(id, next);
      onDone();
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  }

  return (
    <form class="rename" onSubmit={save}>
      <label class="sr-only" for="rename-input">Session title</label>
      <input
        id="rename-input"
        ref={input}
        value={value}
        maxLength={MAX_SESSION_TITLE}
        autocomplete="off"
        aria-invalid={error ? true : undefined}
        aria-describedby={error ? "rename-error" : undefined}
        onInput={(e) => {
          setValue(e.currentTarget.value);
          setError(null);
        }}
        onKeyDown={(e) => {
          if (e.key === "Escape") {
            e.preventDefault();
            onDone();
          }
        }}
      />
      <button type="submit" class="icon-btn" aria-label="Save the title" disabled={busy}>
        <Icon name="check" />
      </button>
      <button type="button" class="icon-btn" aria-label="Cancel renaming" onClick={onDone}>
        <Icon name="x" />
      </button>
      {error && <p id="rename-error" class="error small" role="alert">{error}</p>}
    </form>
  );
}

function SessionMenu(
  { id, pinned, ended, onRename }: {
    id: string;
    pinned: boolean;
    ended: boolean;
    onRename: () => void;
  },
) {
  const [confirming, setConfirming] = useState(false);
  const keep = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming) keep.current?.focus();
  }, [confirming]);
  return (
    <div class="session-actions">
      {/* While ending is confirmed, the question has the row (a phone has no room for more). */}
      {!confirming && (
        <>
          <button
            type="button"
            class={`icon-btn ${pinned ? "on" : ""}`}
            aria-pressed={pinned}
            aria-label={pinned ? "Unpin session" : "Pin session"}
            onClick={() => api(`/api/sessions/${id}/pin`, { method: pinned ? "DELETE" : "PUT" })}
          >
            <Icon name="pin" />
          </button>
          <button
            type="button"
            id="rename-session"
            class="icon-btn"
            aria-label="Rename session"
            title="Rename"
            onClick={onRename}
          >
            <Icon name="pencil" />
          </button>
        </>
      )}
      {!ended && (confirming
        ? (
          <span class="confirm">
            End this session?
            <button
              type="button"
              class="btn danger small"
              onClick={() => link.input(id, "end").finally(() => setConfirming(false))}
            >
              End
            </button>
            <button
              type="button"
              class="btn small"
              ref={keep}
              onClick={() => setConfirming(false)}
            >
              Keep
            </button>
          </span>
        )
        : (
          <button type="button" class="btn small" onClick={() => setConfirming(true)}>
            <span>
              End<span class="wide-only">&nbsp;session</span>
            </span>
          </button>
        ))}
    </div>
  );
}

function Composer(
  { id, working, ended, queue }: {
    id: string;
    working: boolean;
    ended: boolean;
    queue: { steering: string[]; followUp: string[] };
  },
) {
  const [text, setText] = useState("");
  const [mode, setMode] = useState<"steer" | "followUp">("steer");
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const area = useRef<HTMLTextAreaElement>(null);

  useLayoutEffect(() => {
    const el = area.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  }, [text]);

  async function send(kind: InputKind, body = text) {
    setError(null);
    setSending(true);
    try {
      await link.input(id, kind, body);
      if (kind !== "abort") {
        setText("");
        setNote(null);
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
    if (!text.trim() || sending) return;
    send(working ? mode : "prompt");
  }

  if (ended) {
    return (
      <footer class="composer ended">
        <p class="muted">This session has ended.</p>
      </footer>
    );
  }
  const queued = [
    ...queue.steering.map((t) => ["steer", t] as const),
    ...queue.followUp.map((t) => ["follow-up", t] as const),
  ];
  return (
    <footer class="composer">
      {queued.length > 0 && (
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
                onClick={() => unqueue(t)}
              >
                <Icon name="x" size={15} />
              </button>
            </li>
          ))}
        </ul>
      )}
      {error && <p class="error" role="alert">{error}</p>}
      {note && !error && (
        <p class="hint composer-note" role="status">
          {note}
          <button type="button" class="btn small" onClick={() => setNote(null)}>Dismiss</button>
        </p>
      )}
      <form class="composer-row" onSubmit={submit}>
        <label class="sr-only" for="composer-input">Message</label>
        <textarea
          id="composer-input"
          ref={area}
          rows={1}
          value={text}
          placeholder={working
            ? (mode === "steer"
              ? "Steer the agent (it reads this after its current step)…"
              : "Queue a follow-up for after this run…")
            : "Message the agent…"}
          onInput={(e) => setText(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              submit();
            } else if (e.key === "Escape") {
              e.currentTarget.blur();
            }
          }}
        />
        {working && (
          <div class="seg" role="radiogroup" aria-label="How to send while the agent works">
            <button
              type="button"
              role="radio"
              aria-checked={mode === "steer"}
              class={mode === "steer" ? "on" : ""}
              onClick={() =>
                setMode("steer")}
              title="Read by the agent once its current step ends (a tool call, or the answer it is writing)"
            >
              Steer
            </button>
            <button
              type="button"
              role="radio"
              aria-checked={mode === "followUp"}
              class={mode === "followUp" ? "on" : ""}
              onClick={() =>
                setMode("followUp")}
              title="Queue: delivered when the agent finishes"
            >
              Follow-up
            </button>
          </div>
        )}
        <button
          type="submit"
          class="btn primary icon-only"
          disabled={!text.trim() || sending}
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
