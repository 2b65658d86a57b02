/**
 * Renaming a session in its header.
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { MAX_SESSION_TITLE } from "../../../../shared/protocol.ts";
import { renameSession } from "../../store.ts";
import { Icon } from "../icon.tsx";

/** The title in an input: Enter (or the check) saves, Escape (or the cross) cancels. */
export function RenameForm(
  { id, title, onDone }: { id: string; title: string; onDone: () => void },
) {
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
