/**
 * The app's keyboard shortcuts, and the dialog that lists them (`?`).
 *
 * @module
 */
import { useEffect } from "preact/hooks";
import { navigate, route } from "../route.ts";
import { sessionOrder } from "../store.ts";

const SHORTCUTS: [string, string][] = [
  ["Enter", "Send the message"],
  ["Shift + Enter", "New line in the message"],
  ["/", "Focus the message box"],
  ["Esc", "Leave the message box"],
  ["Alt + ↑ / Alt + ↓", "Previous / next session"],
  ["Alt + N", "New session"],
  ["?", "Show these shortcuts"],
];

function typingIn(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  return !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
}

/** What the shell does on the shortcuts that concern it. */
export interface ShortcutHandlers {
  /** `?` outside a text field. */
  onHelp: () => void;
  /** Escape outside a text field. */
  onEscape: () => void;
}

/**
 * Listens for the shortcuts while the shell is on screen: Alt+↑/↓ and Alt+N
 * anywhere; `/`, `?` and Escape when not typing. The handlers of the first
 * render are the ones called.
 */
export function useShortcuts({ onHelp, onEscape }: ShortcutHandlers): void {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.altKey && (e.key === "ArrowUp" || e.key === "ArrowDown")) {
        const list = sessionOrder.value;
        if (list.length === 0) return;
        const cur = route.value.page === "session"
          ? list.findIndex((s) => s.sessionId === (route.value as { id: string }).id)
          : -1;
        const next = e.key === "ArrowDown"
          ? Math.min(list.length - 1, cur + 1)
          : Math.max(0, cur < 0 ? 0 : cur - 1);
        navigate(`/session/${list[next]!.sessionId}`);
        e.preventDefault();
      } else if (e.altKey && (e.key === "n" || e.key === "N")) {
        navigate("/new");
        e.preventDefault();
      } else if (!typingIn(e.target) && !e.ctrlKey && !e.metaKey && !e.altKey) {
        if (e.key === "/") {
          const box = document.getElementById("composer-input");
          if (box) {
            box.focus();
            e.preventDefault();
          }
        } else if (e.key === "?") onHelp();
        else if (e.key === "Escape") onEscape();
      }
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, []);
}

/** The list of shortcuts, in a modal dialog that a click outside closes. */
export function ShortcutsDialog({ onClose }: { onClose: () => void }) {
  return (
    <div class="dialog-wrap" onClick={onClose}>
      <div
        class="card dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby="help-title"
        onClick={(e) => e.stopPropagation()}
      >
        <h2 id="help-title">Keyboard shortcuts</h2>
        <dl class="shortcuts">
          {SHORTCUTS.map(([k, v]) => (
            <div key={k}>
              <dt>
                <kbd>{k}</kbd>
              </dt>
              <dd>{v}</dd>
            </div>
          ))}
        </dl>
        <button type="button" class="btn" onClick={onClose} autofocus>
          Close
        </button>
      </div>
    </div>
  );
}
