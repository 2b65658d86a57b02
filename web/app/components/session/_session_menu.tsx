/**
 * A session's actions in its header: pin, rename, and end (asked twice).
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../../api.ts";
import { link } from "../../store.ts";
import { Icon } from "../icon.tsx";

/** Pin, rename and end; while ending is confirmed, the question has the row. */
export function SessionMenu(
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
