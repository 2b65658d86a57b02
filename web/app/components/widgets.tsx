/**
 * Small controls that several pages share: a link within the app, a copy
 * button, a destructive action with an undo window and the choice of a
 * runner.
 *
 * @module
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { RunnerInfo } from "../../../shared/protocol.ts";
import { navigate } from "../route.ts";
import { Icon } from "./icon.tsx";

/** A link to a page of the app: followed without a reload, and marked when it is the current page. */
export function AppLink(
  { href, class: className, current, children }: {
    href: string;
    class?: string;
    current?: boolean;
    children: ComponentChildren;
  },
) {
  return (
    <a
      href={href}
      class={className}
      aria-current={current ? "page" : undefined}
      onClick={(e) => {
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}

/**
 * A destructive action with an undo window: the first click starts a
 * 3-second countdown with an Undo button; the action runs when it ends.
 */
export function UndoableAction(
  { label, doneLabel, onConfirm, describe }: {
    label: string;
    doneLabel: string;
    describe: string;
    onConfirm: () => Promise<void>;
  },
) {
  const [left, setLeft] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  const timer = useRef<ReturnType<typeof setInterval> | null>(null);
  useEffect(() => () => {
    if (timer.current) clearInterval(timer.current);
  }, []);
  function start() {
    setError(null);
    setLeft(3);
    timer.current = setInterval(() => {
      setLeft((n) => {
        if (n === null) return null;
        if (n <= 1) {
          clearInterval(timer.current!);
          onConfirm().catch((e) => setError((e as Error).message));
          return 0;
        }
        return n - 1;
      });
    }, 1000);
  }
  function undo() {
    if (timer.current) clearInterval(timer.current);
    setLeft(null);
  }
  if (left === 0) return <span class="muted small">{doneLabel}</span>;
  if (left !== null) {
    return (
      <span class="undo" role="status">
        {describe} in {left}…
        <button type="button" class="btn small" onClick={undo}>Undo</button>
      </span>
    );
  }
  return (
    <>
      <button type="button" class="btn danger small" onClick={start}>{label}</button>
      {error && <span class="error small" role="alert">{error}</span>}
    </>
  );
}

/** Copies `text`, saying so for two seconds. */
export function CopyButton({ text }: { text: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      class="btn small"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
        } catch {
          // Clipboard unavailable (http on a phone): select the text instead.
          const el = document.getElementById("new-key-value");
          if (el) getSelection()?.selectAllChildren(el);
        }
        setCopied(true);
        setTimeout(() => setCopied(false), 2000);
      }}
    >
      <Icon name={copied ? "check" : "copy"} size={14} /> {copied ? "Copied" : "Copy"}
    </button>
  );
}

/** The runner a card shows, by name; nothing to choose (and no select) with one runner. */
export function RunnerSelect(
  { list, value, onChange }: {
    list: RunnerInfo[];
    value: string;
    onChange: (runnerId: string) => void;
  },
) {
  if (list.length < 2) return null;
  return (
    <label>
      Runner
      <select value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        {list.map((r) => <option key={r.id} value={r.id}>{r.name}</option>)}
      </select>
    </label>
  );
}
