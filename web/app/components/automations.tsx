import { useEffect, useState } from "preact/hooks";
import { api } from "../api.ts";
import { modelRef, modelValue } from "../models.ts";
import { useRunnerModels } from "../runner_hooks.ts";
import { runnerName, runners } from "../store.ts";
import { Icon } from "./icon.tsx";
import { CopyButton, UndoableAction } from "./widgets.tsx";

interface Webhook {
  id: string;
  name: string;
  source: string;
  secret?: string;
  runnerId: string | null;
  cwd: string | null;
  prompt: string | null;
  model: { provider: string; id: string } | null;
  eventFilter: string[];
  enabled: boolean;
  url: string;
}

interface Listener {
  listenerId: string;
  triggerType: string;
  prompt: string;
  cwd: string | null;
  params: Record<string, unknown>;
}

interface RunnerTriggers {
  triggerDefs: {
    type: string;
    label: string;
    description: string;
    params: { name: string; type: string }[];
  }[];
  listeners: Listener[];
}

/** A shell script that fires the webhook, signed in enhanced mode with openssl. */
function curlExample(w: Webhook, secret: string): string {
  return [
    `secret='${secret}'`,
    `body='{"type":"${w.eventFilter[0] ?? "test"}","message":"hello"}'`,
    `ts=$(date -u +%Y-%m-%dT%H:%M:%SZ); nonce=$(openssl rand -hex 16)`,
    `sig=$(printf '%s.%s.%s' "$ts" "$nonce" "$body" | openssl dgst -sha256 -hmac "$secret" -hex | sed 's/^.* //')`,
    `curl -sS -X POST '${w.url}' -H 'content-type: application/json' \\`,
    `  -H "x-webhook-timestamp: $ts" -H "x-webhook-nonce: $nonce" -H "x-webhook-signature: $sig" \\`,
    `  --data-binary "$body"`,
  ].join("\n");
}

type Draft = {
  name: string;
  source: string;
  runnerId: string;
  cwd: string;
  model: string;
  prompt: string;
  eventFilter: string;
};

function draftOf(w?: Webhook): Draft {
  return {
    name: w?.name ?? "",
    source: w?.source ?? "custom",
    runnerId: w?.runnerId ?? runners.value.find((r) => r.connected)?.id ?? runners.value[0]?.id ??
      "",
    cwd: w?.cwd ?? "",
    model: w?.model ? modelValue(w.model) : "",
    prompt: w?.prompt ?? "",
    eventFilter: (w?.eventFilter ?? []).join(", "),
  };
}

function bodyOf(d: Draft) {
  return {
    name: d.name.trim(),
    source: d.source.trim(),
    runnerId: d.runnerId || null,
    cwd: d.cwd.trim() || null,
    prompt: d.prompt.trim() || null,
    model: modelRef(d.model),
    eventFilter: d.eventFilter.split(",").map((s) => s.trim()).filter(Boolean),
  };
}

function WebhookForm(
  { initial, submitLabel, onSubmit, onCancel }: {
    initial: Draft;
    submitLabel: string;
    onSubmit: (d: Draft) => Promise<void>;
    onCancel?: () => void;
  },
) {
  const [d, setD] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  const models = useRunnerModels(d.runnerId).models ?? [];
  const set = (k: keyof Draft) => (e: { currentTarget: { value: string } }) =>
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
        <select value={d.model} onChange={set("model")}>
          <option value="">Runner default</option>
          {d.model && !models.some((m) => modelValue(m) === d.model) && (
            <option value={d.model}>{d.model}</option>
          )}
          {models.map((m) => {
            const v = modelValue(m);
            return <option key={v} value={v}>{v}</option>;
          })}
        </select>
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
      {error && <p class="error span2" role="alert">{error}</p>}
      <div class="span2 actions">
        <button class="btn primary" type="submit">{submitLabel}</button>
        {onCancel && <button class="btn" type="button" onClick={onCancel}>Cancel</button>}
      </div>
    </form>
  );
}

function Webhooks() {
  const [list, setList] = useState<Webhook[] | null>(null);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<string | null>(null);
  const [created, setCreated] = useState<Webhook | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<{ webhooks: Webhook[] }>("/api/webhooks").then(
      (r) => setList(r.webhooks),
      (e) => setError(e.message),
    );
  useEffect(() => {
    load();
  }, []);

  return (
    <section class="card" aria-labelledby="webhooks-title">
      <div class="card-head">
        <h2 id="webhooks-title">
          <Icon name="webhook" /> Webhooks
        </h2>
        {!creating && (
          <button type="button" class="btn small" onClick={() => setCreating(true)}>
            <Icon name="plus" size={14} /> New webhook
          </button>
        )}
      </div>
      <p class="muted">
        A signed call to a webhook's URL starts a session on its runner, with the request body as a
        trigger. GitHub, Standard Webhooks and baton's own signing are accepted.
      </p>
      {creating && (
        <WebhookForm
          initial={draftOf()}
          submitLabel="Create webhook"
          onCancel={() => setCreating(false)}
          onSubmit={async (d) => {
            const r = await api<{ webhook: Webhook }>("/api/webhooks", {
              method: "POST",
              body: bodyOf(d),
            });
            setCreated(r.webhook);
            setCreating(false);
            load();
          }}
        />
      )}
      {created?.secret && (
        <div class="new-key" role="status">
          <p>
            <strong>{created.name}</strong> is ready. Its secret signs every delivery; copy it now.
          </p>
          <div class="key-row">
            <code id="new-key-value" class="key-value">{created.secret}</code>
            <CopyButton text={created.secret} />
          </div>
          <p class="hint">
            URL: <code>{created.url}</code>
          </p>
          <p class="hint">Try it with curl and openssl:</p>
          <pre class="tool-output">{curlExample(created, created.secret)}</pre>
          <button type="button" class="btn link small" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      {error && <p class="error" role="alert">{error}</p>}
      {list === null
        ? <p class="muted">Loading…</p>
        : list.length === 0 && !creating
        ? <p class="muted">No webhook yet.</p>
        : (
          <ul class="webhook-list">
            {list.map((w) => (
              <li key={w.id} class="webhook-item">
                {editing === w.id
                  ? (
                    <WebhookForm
                      initial={draftOf(w)}
                      submitLabel="Save"
                      onCancel={() => setEditing(null)}
                      onSubmit={async (d) => {
                        await api(`/api/webhooks/${w.id}`, { method: "PUT", body: bodyOf(d) });
                        setEditing(null);
                        load();
                      }}
                    />
                  )
                  : (
                    <>
                      <div class="webhook-head">
                        <strong>{w.name}</strong>
                        <span class="badge">{w.source}</span>
                        {!w.enabled && <span class="badge">disabled</span>}
                        <label class="check switch">
                          <input
                            type="checkbox"
                            checked={w.enabled}
                            onChange={() =>
                              api(`/api/webhooks/${w.id}`, {
                                method: "PUT",
                                body: { enabled: !w.enabled },
                              }).then(load, (e) => setError(e.message))}
                          />
                          Enabled
                        </label>
                      </div>
                      <div class="hint">
                        {w.runnerId ? runnerName(w.runnerId) : "no runner"}
                        {w.cwd ? ` · ${w.cwd}` : ""}
                        {w.eventFilter.length
                          ? ` · only ${w.eventFilter.join(", ")}`
                          : " · every event"}
                      </div>
                      <div class="key-row">
                        <code class="key-value small">{w.url}</code>
                        <CopyButton text={w.url} />
                      </div>
                      <div class="actions">
                        <button type="button" class="btn small" onClick={() => setEditing(w.id)}>
                          Edit
                        </button>
                        <UndoableAction
                          label="Delete"
                          doneLabel="Deleted"
                          describe={`Deleting ${w.name}`}
                          onConfirm={async () => {
                            await api(`/api/webhooks/${w.id}`, { method: "DELETE" });
                            load();
                          }}
                        />
                      </div>
                    </>
                  )}
              </li>
            ))}
          </ul>
        )}
    </section>
  );
}

function Listeners() {
  const list = runners.value;
  const [runnerId, setRunnerId] = useState(list[0]?.id ?? "");
  const [data, setData] = useState<RunnerTriggers | null>(null);
  const [type, setType] = useState("");
  const [prompt, setPrompt] = useState("");
  const [cwd, setCwd] = useState("");
  const [params, setParams] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!runnerId && list[0]) setRunnerId(list[0].id);
  }, [list.length]);
  const load = () => {
    if (!runnerId) return;
    api<RunnerTriggers>(`/api/runners/${runnerId}/triggers`).then(
      setData,
      (e) => setError(e.message),
    );
  };
  useEffect(load, [runnerId]);
  const def = data?.triggerDefs.find((d) => d.type === type);

  async function add(ev: Event) {
    ev.preventDefault();
    setError(null);
    try {
      await api(`/api/runners/${runnerId}/trigger-listeners`, {
        method: "POST",
        body: {
          triggerType: type,
          prompt,
          cwd: cwd.trim() || null,
          params: Object.fromEntries(Object.entries(params).filter(([, v]) => v.trim())),
        },
      });
      setType("");
      setPrompt("");
      setCwd("");
      setParams({});
      load();
    } catch (err) {
      setError((err as Error).message);
    }
  }

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
          {list.length > 1 && (
            <label>
              Runner
              <select value={runnerId} onChange={(e) => setRunnerId(e.currentTarget.value)}>
                {list.map((r) => <option key={r.id} value={r.id}>{r.name}</option>)}
              </select>
            </label>
          )}
          {data && data.listeners.length > 0 && (
            <ul class="history">
              {data.listeners.map((l) => (
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
                          load();
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
          )}
          {data && data.triggerDefs.length === 0
            ? (
              <p class="hint">
                {runnerName(runnerId)} offers no trigger yet: declare some in its{" "}
                <code>~/.baton/triggers.json</code>.
              </p>
            )
            : (
              <form class="form-grid" onSubmit={add}>
                <label>
                  Trigger
                  <select value={type} onChange={(e) => setType(e.currentTarget.value)}>
                    <option value="">Choose…</option>
                    {data?.triggerDefs.map((d) => (
                      <option key={d.type} value={d.type}>{d.label} ({d.type})</option>
                    ))}
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
            )}
        </>
      )}
    </section>
  );
}

/** Webhooks and runner listeners: what starts agents without a person. */
export function Automations() {
  return (
    <main class="page" aria-labelledby="automations-title">
      <h1 id="automations-title">Automations</h1>
      <Webhooks />
      <Listeners />
    </main>
  );
}
