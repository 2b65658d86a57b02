/**
 * The Webhooks card: the account's webhooks, a new one's secret shown once,
 * and each one's switch, URL, edit form and delete.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type {
  UpdateWebhookRequest,
  Webhook,
  WebhookListResponse,
  WebhookResponse,
} from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { runnerName } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { CopyButton, UndoableAction } from "../widgets.tsx";
import { bodyOf, curlExample, draftOf } from "./_webhook.ts";
import { WebhookForm } from "./_webhook_form.tsx";

/** Lists, creates, edits, switches and deletes the account's webhooks. */
export function Webhooks() {
  const [list, setList] = useState<Webhook[] | null>(null);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<string | null>(null);
  const [created, setCreated] = useState<Webhook | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<WebhookListResponse>("/api/webhooks").then(
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
            const r = await api<WebhookResponse>("/api/webhooks", {
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
        <NewSecret
          webhook={created}
          secret={created.secret}
          onDone={() => setCreated(null)}
        />
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
                    <WebhookSummary
                      webhook={w}
                      onEdit={() => setEditing(w.id)}
                      onChanged={load}
                      onError={setError}
                    />
                  )}
              </li>
            ))}
          </ul>
        )}
    </section>
  );
}

/** A created webhook's secret, URL and a curl line to try it; shown until Done. */
function NewSecret(
  { webhook, secret, onDone }: { webhook: Webhook; secret: string; onDone: () => void },
) {
  return (
    <div class="new-key" role="status">
      <p>
        <strong>{webhook.name}</strong> is ready. Its secret signs every delivery; copy it now.
      </p>
      <div class="key-row">
        <code id="new-key-value" class="key-value">{secret}</code>
        <CopyButton text={secret} />
      </div>
      <p class="hint">
        URL: <code>{webhook.url}</code>
      </p>
      <p class="hint">Try it with curl and openssl:</p>
      <pre class="tool-output">{curlExample(webhook, secret)}</pre>
      <button type="button" class="btn link small" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

/** A listed webhook: its switch, where it starts sessions, its URL, Edit and Delete. */
function WebhookSummary(
  { webhook: w, onEdit, onChanged, onError }: {
    webhook: Webhook;
    onEdit: () => void;
    onChanged: () => void;
    onError: (message: string) => void;
  },
) {
  return (
    <>
      <div class="webhook-head">
        <strong>{w.name}</strong>
        <span class="badge">{w.source}</span>
        {!w.enabled && <span class="badge">disabled</span>}
        {!w.requireReplayProtection && <span class="badge">replayable</span>}
        <label class="check switch">
          <input
            type="checkbox"
            checked={w.enabled}
            onChange={() =>
              api(`/api/webhooks/${w.id}`, {
                method: "PUT",
                body: { enabled: !w.enabled } satisfies UpdateWebhookRequest,
              }).then(onChanged, (e) => onError(e.message))}
          />
          Enabled
        </label>
      </div>
      <div class="hint">
        {w.runnerId ? runnerName(w.runnerId) : "no runner"}
        {w.cwd ? ` · ${w.cwd}` : ""}
        {w.eventFilter.length ? ` · only ${w.eventFilter.join(", ")}` : " · every event"}
      </div>
      <div class="key-row">
        <code class="key-value small">{w.url}</code>
        <CopyButton text={w.url} />
      </div>
      <div class="actions">
        <button type="button" class="btn small" onClick={onEdit}>
          Edit
        </button>
        <UndoableAction
          label="Delete"
          doneLabel="Deleted"
          describe={`Deleting ${w.name}`}
          onConfirm={async () => {
            await api(`/api/webhooks/${w.id}`, { method: "DELETE" });
            onChanged();
          }}
        />
      </div>
    </>
  );
}
