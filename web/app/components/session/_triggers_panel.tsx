/**
 * The triggers panel beside a session's conversation.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type {
  AvailableTrigger,
  AvailableTriggersResponse,
  SubscriptionListResponse,
  TriggerHistoryEntry,
  TriggerHistoryResponse,
  TriggerSubscription,
} from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { SidePanel } from "../side_panel.tsx";
import { History } from "./_trigger_history.tsx";
import { Subscriptions } from "./_trigger_subscriptions.tsx";

/** A session's trigger history (with the agent's answers) and its subscriptions. */
export function SessionTriggers(
  { id, onClose, version }: { id: string; onClose: () => void; version: number },
) {
  const [tab, setTab] = useState<"history" | "subscriptions">("history");
  const [history, setHistory] = useState<TriggerHistoryEntry[] | null>(null);
  const [subs, setSubs] = useState<TriggerSubscription[] | null>(null);
  const [defs, setDefs] = useState<AvailableTrigger[]>([]);
  const [error, setError] = useState<string | null>(null);

  const load = () => {
    setError(null);
    Promise.all([
      api<TriggerHistoryResponse>(`/api/sessions/${id}/triggers?limit=100`),
      api<SubscriptionListResponse>(`/api/sessions/${id}/trigger-subscriptions`),
      api<AvailableTriggersResponse>(`/api/sessions/${id}/available-triggers`),
    ]).then(([h, s, d]) => {
      setHistory(h.triggers);
      setSubs(s.subscriptions);
      setDefs(d.triggerDefs);
    }, (e) => setError(e.message));
  };
  // Reload when the conversation shows a new trigger or answer.
  useEffect(load, [id, version]);

  return (
    <SidePanel name="triggers" icon="bolt" title="Triggers" onClose={onClose}>
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
    </SidePanel>
  );
}
