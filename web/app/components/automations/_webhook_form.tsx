/**
 * The form that creates or edits a webhook.
 *
 * @module
 */
import { useState } from "preact/hooks";
import { modelValue } from "../../models.ts";
import { useRunnerModels } from "../../runner_hooks.ts";
import { runners } from "../../store.ts";
import type { WebhookDraft } from "./_webhook.ts";

/** Name, source, runner, folder, model, event filter and prompt; errors shown under them. */
export function WebhookForm(
  { initial, submitLabel, onSubmit, onCancel }: {
    initial: WebhookDraft;
    submitLabel: string;
    onSubmit: (d: WebhookDraft) => Promise<void>;
    onCancel?: () => void;
  },
) {
  const [d, setD] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  const set = (k: keyof WebhookDraft) => (e: { currentTarget: { value: string } }) =>
    setD({ ...d, [k]: e.currentTarget.value });
  return (
    <form
      class="form-grid"
      onSubmit={async (ev) => {
        ev.preventDefault();
        setError(null);
        try {
          await onSubmit(d);
        } catch (err) {
          setError((err as Error).message);
        }
      }}
    >
      <label>
        Name
        <input required value={d.name} onInput={set("name")} placeholder="CI failures" />
      </label>
      <label>
        Source
        <input required value={d.source} onInput={set("source")} placeholder="github" />
        <span class="hint">The trigger's source becomes external:{d.source || "…"}</span>
      </label>
      <label>
        Runner
        <select value={d.runnerId} onChange={set("runnerId")}>
          <option value="">No runner yet</option>
          {runners.value.map((r) => <option key={r.id} value={r.id}>{r.name}</option>)}
        </select>
      </label>
      <label>
        Folder
        <input value={d.cwd} onInput={set("cwd")} placeholder="Runner default" spellcheck={false} />
      </label>
      <label>
        Model
        <ModelOptions runnerId={d.runnerId} value={d.model} onChange={set("model")} />
      </label>
      <label>
        Event filter
        <input
          value={d.eventFilter}
          onInput={set("eventFilter")}
          placeholder="Every event (or: push, pull_request.opened)"
        />
      </label>
      <label class="span2">
        Prompt
        <textarea
          rows={3}
          value={d.prompt}
          onInput={set("prompt")}
          placeholder="What should the agent do with each delivery?"
        />
      </label>
      <div class="span2">
        <label class="check">
          <input
            type="checkbox"
            name="requireReplayProtection"
            checked={d.requireReplayProtection}
            onChange={(e) => setD({ ...d, requireReplayProtection: e.currentTarget.checked })}
          />
          Refuse replayable deliveries
        </label>
        <span class="hint">
          {d.requireReplayProtection
            ? "Legacy signing (body only) and GitHub deliveries without X-GitHub-Delivery are refused, so a captured request cannot start a session again."
            : "Legacy signing and GitHub deliveries without a delivery id are accepted: anyone holding a copy of one can send it again."}
        </span>
      </div>
      {error && <p class="error span2" role="alert">{error}</p>}
      <div class="span2 actions">
        <button class="btn primary" type="submit">{submitLabel}</button>
        {onCancel && <button class="btn" type="button" onClick={onCancel}>Cancel</button>}
      </div>
    </form>
  );
}

/**
 * The runner's models; a model the webhook names that the runner does not
 * offer (now, or while it is offline) stays choosable.
 */
function ModelOptions(
  { runnerId, value, onChange }: {
    runnerId: string;
    value: string;
    onChange: (e: { currentTarget: { value: string } }) => void;
  },
) {
  const models = useRunnerModels(runnerId).models ?? [];
  return (
    <select value={value} onChange={onChange}>
      <option value="">Runner default</option>
      {value && !models.some((m) => modelValue(m) === value) && (
        <option value={value}>{value}</option>
      )}
      {models.map((m) => {
        const v = modelValue(m);
        return <option key={v} value={v}>{v}</option>;
      })}
    </select>
  );
}
