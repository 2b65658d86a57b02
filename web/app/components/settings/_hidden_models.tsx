/**
 * The Models card: every model of a connected runner with a box, checked
 * when it is offered in new sessions; the hidden ones are the account's.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type {
  HiddenModelsRequest,
  HiddenModelsResponse,
  SetHiddenModelsResponse,
} from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { modelValue } from "../../models.ts";
import { useRunnerChoice, useRunnerModels } from "../../runner_hooks.ts";
import { runners } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { RunnerSelect } from "../widgets.tsx";

/** Shows and hides models, for every runner at once. */
export function HiddenModels() {
  const list = runners.value.filter((r) => r.connected);
  const [runnerId, setRunnerId] = useRunnerChoice(list[0]);
  const [hidden, setHidden] = useState<string[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  // The relay leaves hidden models out of a runner's list: ask again when they change.
  const { models, error: modelsError } = useRunnerModels(runnerId, { reloadOn: hidden });
  useEffect(() => {
    api<HiddenModelsResponse>("/api/settings/hidden-models").then(
      (r) => setHidden(r.hiddenModels),
      (e) => setError(e.message),
    );
  }, []);

  async function save(next: string[]) {
    setError(null);
    try {
      const r = await api<SetHiddenModelsResponse>("/api/settings/hidden-models", {
        method: "PUT",
        body: { hiddenModels: next } satisfies HiddenModelsRequest,
      });
      setHidden(r.hiddenModels);
    } catch (err) {
      setError((err as Error).message);
    }
  }

  const shown = (models ?? []).map(modelValue);
  const all = [...new Set([...shown, ...(hidden ?? [])])].sort();
  return (
    <section class="card" aria-labelledby="models-title">
      <h2 id="models-title">
        <Icon name="eye" /> Models
      </h2>
      <p class="muted">
        Checked models are offered when you start a session, on every runner. Uncheck a model to
        hide it from those lists.
      </p>
      <RunnerSelect list={list} value={runnerId} onChange={setRunnerId} />
      {list.length === 0 && <p class="muted">Connect a runner to see its models.</p>}
      {all.length > 0 && (
        <ul class="model-list">
          {all.map((m) => {
            const isHidden = hidden?.includes(m) ?? false;
            return (
              <li key={m}>
                <label class="check">
                  <input
                    type="checkbox"
                    checked={!isHidden}
                    onChange={() =>
                      save(
                        isHidden ? (hidden ?? []).filter((h) => h !== m) : [...(hidden ?? []), m],
                      )}
                  />
                  <code>{m}</code>
                  {isHidden && <span class="badge">hidden</span>}
                </label>
              </li>
            );
          })}
        </ul>
      )}
      {list.length > 0 && all.length === 0 && hidden !== null && (
        <p class="muted">This runner offers no model yet.</p>
      )}
      {(error ?? modelsError) && <p class="error" role="alert">{error ?? modelsError}</p>}
    </section>
  );
}
