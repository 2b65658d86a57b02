/**
 * The Runner listeners card: on one runner at a time, the listeners that
 * start a session for each matching trigger, and a form to add one.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type {
  ListenerRequest,
  RunnerTriggerDef,
  RunnerTriggersResponse,
  TriggerListener,
} from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { useRunnerChoice } from "../../runner_hooks.ts";
import { runnerName, runners } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { RunnerSelect, UndoableAction } from "../widgets.tsx";

/** Lists, adds and removes a runner's listeners. */
export function Listeners() {
  const list = runners.value;
  const [runnerId, setRunnerId] = useRunnerChoice(list[0]);
  const [data, setData] = useState<RunnerTriggersResponse | null>(null);
  // One error line for the card (loading, adding), shown in the form.
  const [error, setError] = useState<string | null>(null);
  const load = () => {
    if (!runnerId) return;
    api<RunnerTriggersResponse>(`/api/runners/${runnerId}/triggers`).then(
      setData,
      (e) => setError(e.message),
    );
  };
  useEffect(load, [runnerId]);

  return (
    <section class="card" aria-labelledby="listeners-title">
      <h2 id="listeners-title">
        <Icon name="bolt" /> Runner listeners
      </h2>
      <p class="muted">
        A listener starts a new session on its runner for each matching trigger, with its own
        prompt.
      </p>
      {list.length === 0 ? <p class="muted">Connect a runner first.</p> : (
        <>
          <RunnerSelect list={list} value={runnerId} onChange={setRunnerId} />
          {data && data.listeners.length > 0 && (
            <ListenerList runnerId={runnerId} listeners={data.listeners} onRemoved={load} />
          )}
          {data && data.triggerDefs.length === 0
            ? (
              <p class="hint">
                {runnerName(runnerId)} offers no trigger yet: declare some in its{" "}
                <code>~/.baton/triggers.json</code>.
              </p>
            )
            : (
              <ListenerForm
                runnerId={runnerId}
                defs={data?.triggerDefs ?? []}
                error={error}
                onError={setError}
                onAdded={load}
              />
            )}
        </>
      )}
    </section>
  );
}

function ListenerList(
  { runnerId, listeners, onRemoved }: {
    runnerId: string;
    listeners: TriggerListener[];
    onRemoved: () => void;
  },
) {
  return (
    <ul class="history">
      {listeners.map((l) => (
        <li key={l.listenerId}>
          <div class="history-head">
            <code>{l.triggerType}</code>
            <span class="push">
              <UndoableAction
                label="Remove"
                doneLabel="Removed"
                describe="Removing"
                onConfirm={async () => {
                  await api(`/api/runners/${runnerId}/trigger-listeners/${l.listenerId}`, {
                    method: "DELETE",
                  });
                  onRemoved();
                }}
              />
            </span>
          </div>
          <div class="hint">
            {l.prompt ? `"${l.prompt.slice(0, 120)}"` : "no prompt"}
            {l.cwd ? ` · ${l.cwd}` : ""}
            {Object.keys(l.params).length
              ? ` · ${Object.entries(l.params).map(([k, v]) => `${k} = ${v}`).join(", ")}`
              : ""}
          </div>
        </li>
      ))}
    </ul>
  );
}

/** A trigger of the runner, a folder, the trigger's optional params and a prompt. */
function ListenerForm(
  { runnerId, defs, error, onError, onAdded }: {
    runnerId: string;
    defs: RunnerTriggerDef[];
    error: string | null;
    onError: (message: string | null) => void;
    onAdded: () => void;
  },
) {
  const [type, setType] = useState("");
  const [prompt, setPrompt] = useState("");
  const [cwd, setCwd] = useState("");
  const [params, setParams] = useState<Record<string, string>>({});
  const def = defs.find((d) => d.type === type);

  async function add(ev: Event) {
    ev.preventDefault();
    onError(null);
    const body: ListenerRequest = {
      triggerType: type,
      prompt,
      cwd: cwd.trim() || null,
      params: Object.fromEntries(Object.entries(params).filter(([, v]) => v.trim())),
    };
    try {
      await api(`/api/runners/${runnerId}/trigger-listeners`, { method: "POST", body });
      setType("");
      setPrompt("");
      setCwd("");
      setParams({});
      onAdded();
    } catch (err) {
      onError((err as Error).message);
    }
  }

  return (
    <form class="form-grid" onSubmit={add}>
      <label>
        Trigger
        <select value={type} onChange={(e) => setType(e.currentTarget.value)}>
          <option value="">Choose…</option>
          {defs.map((d) => <option key={d.type} value={d.type}>{d.label} ({d.type})</option>)}
        </select>
      </label>
      <label>
        Folder
        <input
          value={cwd}
          onInput={(e) => setCwd(e.currentTarget.value)}
          placeholder="Runner default"
        />
      </label>
      {def?.params.map((p) => (
        <label key={p.name}>
          Only when {p.name} is <span class="hint">({p.type}, optional)</span>
          <input
            value={params[p.name] ?? ""}
            onInput={(e) => setParams({ ...params, [p.name]: e.currentTarget.value })}
          />
        </label>
      ))}
      <label class="span2">
        Prompt
        <textarea
          rows={2}
          value={prompt}
          onInput={(e) => setPrompt(e.currentTarget.value)}
        />
      </label>
      {error && <p class="error span2" role="alert">{error}</p>}
      <div class="span2 actions">
        <button class="btn primary" type="submit" disabled={!type}>Add listener</button>
      </div>
    </form>
  );
}
