/**
 * The Subscriptions tab of a session's triggers panel: the triggers the
 * session is subscribed to, and a form to subscribe to one of its runner's.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type {
  AvailableTrigger,
  SubscribeRequest,
  TriggerSubscription,
} from "../../../../shared/api.ts";
import { api } from "../../api.ts";

/** Lists and removes the subscriptions; subscribes to a trigger with optional params. */
export function Subscriptions(
  { id, list, defs, reload }: {
    id: string;
    list: TriggerSubscription[] | null;
    defs: AvailableTrigger[];
    reload: () => void;
  },
) {
  const [type, setType] = useState("");
  const [params, setParams] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const def = defs.find((d) => d.type === type);

  async function subscribe(ev: Event) {
    ev.preventDefault();
    setError(null);
    const clean = Object.fromEntries(Object.entries(params).filter(([, v]) => v.trim() !== ""));
    const body: SubscribeRequest = { triggerType: type, params: clean };
    try {
      await api(`/api/sessions/${id}/trigger-subscriptions`, { method: "POST", body });
      setType("");
      setParams({});
      reload();
    } catch (err) {
      setError((err as Error).message);
    }
  }

  if (list === null) return <p class="muted pad">Loading…</p>;
  return (
    <div class="panel-body">
      {list.length === 0
        ? <p class="muted">This session is not subscribed to any trigger.</p>
        : (
          <ul class="history">
            {list.map((s) => (
              <li key={s.subscriptionId}>
                <div class="history-head">
                  <code>{s.triggerType}</code>
                  <button
                    type="button"
                    class="btn small danger push"
                    aria-label={`Unsubscribe from ${s.triggerType}`}
                    onClick={() =>
                      api(`/api/sessions/${id}/trigger-subscriptions/${s.subscriptionId}`, {
                        method: "DELETE",
                      }).then(reload, (e) => setError(e.message))}
                  >
                    Remove
                  </button>
                </div>
                {Object.keys(s.params).length > 0 && (
                  <div class="hint">
                    {Object.entries(s.params).map(([k, v]) => `${k} = ${v}`).join(", ")}
                  </div>
                )}
                {s.filters.length > 0 && (
                  <div class="hint">
                    {s.filters.map((f) => `${f.field} ${f.op ?? "eq"} ${JSON.stringify(f.value)}`)
                      .join(s.filterMode === "or" ? " or " : " and ")}
                  </div>
                )}
              </li>
            ))}
          </ul>
        )}
      {defs.length === 0
        ? (
          <p class="hint">
            This runner offers no trigger to subscribe to (see <code>~/.baton/triggers.json</code>).
          </p>
        )
        : (
          <form class="stack" onSubmit={subscribe}>
            <label>
              Subscribe to
              <select value={type} onChange={(e) => setType(e.currentTarget.value)}>
                <option value="">Choose a trigger…</option>
                {defs.map((d) => <option key={d.type} value={d.type}>{d.label} ({d.type})</option>)}
              </select>
            </label>
            {def?.description && <p class="hint">{def.description}</p>}
            {def?.params.map((p) => (
              <label key={p.name}>
                {p.name} <span class="hint">({p.type}, optional)</span>
                <input
                  value={params[p.name] ?? ""}
                  onInput={(e) => setParams({ ...params, [p.name]: e.currentTarget.value })}
                />
              </label>
            ))}
            {error && <p class="error" role="alert">{error}</p>}
            <button class="btn primary small" type="submit" disabled={!type}>Subscribe</button>
          </form>
        )}
    </div>
  );
}
