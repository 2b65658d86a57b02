import { useEffect, useState } from "preact/hooks";
import { api } from "../api.ts";
import { ago } from "../format.ts";
import { Icon } from "./icon.tsx";

interface HistoryEntry {
  triggerId: string;
  type: string;
  source: string;
  summary?: string;
  payload: unknown;
  deliverAs: string;
  ts: string;
  direction: "inbound" | "outbound";
  response?: { action?: string; text?: string; ts: string };
}

interface Subscription {
  subscriptionId: string;
  triggerType: string;
  params: Record<string, unknown>;
  filters: { field: string; value: unknown; op?: string }[];
  filterMode: string;
}

interface TriggerDef {
  type: string;
  label: string;
  description: string;
  params: { name: string; type: string }[];
}

/** A session's trigger history (with the agent's answers) and its subscriptions. */
export function SessionTriggers(
  { id, onClose, version }: { id: string; onClose: () => void; version: number },
) {
  const [tab, setTab] = useState<"history" | "subscriptions">("history");
  const [history, setHistory] = useState<HistoryEntry[] | null>(null);
  const [subs, setSubs] = useState<Subscription[] | null>(null);
  const [defs, setDefs] = useState<TriggerDef[]>([]);
  const [error, setError] = useState<string | null>(null);

  const load = () => {
    setError(null);
    Promise.all([
      api<{ triggers: HistoryEntry[] }>(`/api/sessions/${id}/triggers?limit=100`),
      api<{ subscriptions: Subscription[] }>(`/api/sessions/${id}/trigger-subscriptions`),
      api<{ triggerDefs: TriggerDef[] }>(`/api/sessions/${id}/available-triggers`),
    ]).then(([h, s, d]) => {
      setHistory(h.triggers);
      setSubs(s.subscriptions);
      setDefs(d.triggerDefs);
    }, (e) => setError(e.message));
  };
  // Reload when the conversation shows a new trigger or answer.
  useEffect(load, [id, version]);

  return (
    <aside class="side-panel" aria-labelledby="triggers-title">
      <div class="panel-head">
        <h2 id="triggers-title">
          <Icon name="bolt" /> Triggers
        </h2>
        <button
          type="button"
          class="icon-btn"
          aria-label="Close the triggers panel"
          onClick={onClose}
        >
          <Icon name="x" />
        </button>
      </div>
      <div class="tabs" role="tablist">
        <button
          type="button"
          role="tab"
          aria-selected={tab === "history"}
          class={tab === "history" ? "on" : ""}
          onClick={() => setTab("history")}
        >
          History{history ? ` (${history.length})` : ""}
        </button>
        <button
          type="button"
          role="tab"
          aria-selected={tab === "subscriptions"}
          class={tab === "subscriptions" ? "on" : ""}
          onClick={() => setTab("subscriptions")}
        >
          Subscriptions{subs ? ` (${subs.length})` : ""}
        </button>
      </div>
      {error && <p class="error" role="alert">{error}</p>}
      {tab === "history"
        ? <History id={id} list={history} reload={load} />
        : <Subscriptions id={id} list={subs} defs={defs} reload={load} />}
    </aside>
  );
}

function History(
  { id, list, reload }: { id: string; list: HistoryEntry[] | null; reload: () => void },
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

function Subscriptions(
  { id, list, defs, reload }: {
    id: string;
    list: Subscription[] | null;
    defs: TriggerDef[];
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
    try {
      await api(`/api/sessions/${id}/trigger-subscriptions`, {
        method: "POST",
        body: { triggerType: type, params: clean },
      });
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
