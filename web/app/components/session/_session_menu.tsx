/**
 * A session's actions in its header: pin, rename, end and delete (the last
 * two asked twice).
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../../api.ts";
import { deleteSession, link } from "../../store.ts";
import { Icon } from "../icon.tsx";

/** Pin, rename, end and delete; while one is confirmed, the question has the row. */
export function SessionMenu(
  { id, pinned, ended, onRename }: {
    id: string;
    pinned: boolean;
    ended: boolean;
    onRename: () => void;
  },
) {
  const [confirming, setConfirming] = useState<"end" | "delete" | null>(null);
  const [error, setError] = useState<string | null>(null);
  /** A delete waits for a running session to end first: say so meanwhile. */
  const [busy, setBusy] = useState(false);
  const keep = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (confirming) keep.current?.focus();
  }, [confirming]);
  if (confirming) {
    const end = confirming === "end";
    return (
      <div class="session-actions">
        {/* The question has the row (a phone has no room for more). */}
        <span class="confirm" role="group" aria-label={end ? "End session" : "Delete session"}>
          {end ? "End this session?" : ended ? "Delete for good?" : "End and delete?"}
          <button
            type="button"
            class="btn danger small"
            disabled={busy}
            onClick={() => {
              setError(null);
              setBusy(true);
              (end ? link.input(id, "end") : deleteSession(id))
                .catch((e) => setError((e as Error).message))
                .finally(() => {
                  setBusy(false);
                  setConfirming(null);
                });
            }}
          >
            {busy ? (end ? "Ending…" : "Deleting…") : end ? "End" : "Delete"}
          </button>
          <button
            type="button"
            class="btn small"
            ref={keep}
            disabled={busy}
            onClick={() => setConfirming(null)}
          >
            Keep
          </button>
        </span>
      </div>
    );
  }
  return (
    <div class="session-actions">
      <button
        type="button"
        class={`icon-btn ${pinned ? "on" : ""}`}
        aria-pressed={pinned}
        aria-label={pinned ? "Unpin session" : "Pin session"}
        title={pinned ? "Unpin (retention may then delete it once ended)" : "Pin (kept for good)"}
        onClick={() =>
          api(`/api/sessions/${id}`, { method: "PATCH", body: { pinned: !pinned } }).catch((e) =>
            setError((e as Error).message)
          )}
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
      <button
        type="button"
        id="delete-session"
        class="icon-btn"
        aria-label="Delete session"
        title="Delete"
        onClick={() => setConfirming("delete")}
      >
        <Icon name="trash" />
      </button>
      {!ended && (
        <button type="button" class="btn small" onClick={() => setConfirming("end")}>
          <span>
            End<span class="wide-only">&nbsp;session</span>
          </span>
        </button>
      )}
      {error && <span class="error small" role="alert">{error}</span>}
    </div>
  );
}
