/**
 * The History tab of a session's triggers panel: each trigger that reached
 * the session and what the agent answered.
 *
 * @module
 */
import type { TriggerHistoryEntry } from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { ago } from "../../format.ts";
import { Icon } from "../icon.tsx";

/** The triggers the session received or sent, and a button that clears them. */
export function History(
  { id, list, reload }: { id: string; list: TriggerHistoryEntry[] | null; reload: () => void },
) {
  if (list === null) return <p class="muted pad">Loading…</p>;
  if (list.length === 0) {
    return <p class="muted pad">No trigger has reached this session yet.</p>;
  }
  return (
    <div class="panel-body">
      <ul class="history">
        {list.map((e) => (
          <li key={e.triggerId + e.direction} class={e.direction}>
            <div class="history-head">
              <span class="badge">{e.direction === "inbound" ? "in" : "out"}</span>
              <strong>{e.summary ?? e.type}</strong>
            </div>
            <div class="hint">
              <code>{e.type}</code> · {e.source} · {ago(e.ts)}
            </div>
            {e.response && (
              <div class="response">
                <Icon name="check" size={13} />{" "}
                {e.response.action && <strong>{e.response.action}</strong>}
                {e.response.text && <span>{e.response.text}</span>}
              </div>
            )}
            <details>
              <summary class="small">Payload</summary>
              <pre class="tool-output">{JSON.stringify(e.payload, null, 2)}</pre>
            </details>
          </li>
        ))}
      </ul>
      <button
        type="button"
        class="btn small"
        onClick={() => api(`/api/sessions/${id}/triggers`, { method: "DELETE" }).then(reload)}
      >
        Clear history
      </button>
    </div>
  );
}
