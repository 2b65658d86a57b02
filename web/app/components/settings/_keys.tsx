/**
 * The API keys and runner tokens card: create one (its value shown once),
 * list them, revoke with an undo window.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type {
  CreatedKey,
  CreateKeyRequest,
  CreateKeyResponse,
  KeyInfo,
  KeyListResponse,
} from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { runners } from "../../store.ts";
import { ago } from "../../format.ts";
import { Icon } from "../icon.tsx";
import { CopyButton, UndoableAction } from "../widgets.tsx";

/** Creates, lists and revokes the account's keys. */
export function Keys() {
  const [keys, setKeys] = useState<KeyInfo[] | null>(null);
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const [error, setError] = useState<string | null>(null);

  const load = () =>
    api<KeyListResponse>("/api/keys").then((r) => setKeys(r.keys), (e) => setError(e.message));
  useEffect(() => {
    load();
  }, []);

  return (
    <section class="card" aria-labelledby="keys-title">
      <h2 id="keys-title">
        <Icon name="key" /> API keys and runner tokens
      </h2>
      <p class="muted">
        A runner token lets one machine connect as a runner and its services fire triggers; an API
        key lets scripts and the CLI use the API, with all your rights, read-only, or for one runner
        only. The full value is shown once.
      </p>
      {created && <NewKey created={created} onDone={() => setCreated(null)} />}
      <KeyForm
        onCreated={(key) => {
          setCreated(key);
          load();
        }}
        onError={setError}
      />
      {error && <p class="error" role="alert">{error}</p>}
      {keys === null
        ? <p class="muted">Loading…</p>
        : keys.length === 0
        ? <p class="muted">No keys yet.</p>
        : <KeyTable keys={keys} onRevoked={load} />}
    </section>
  );
}

/** A created key's value, to copy now, and for a runner token the line that uses it. */
function NewKey({ created, onDone }: { created: CreatedKey; onDone: () => void }) {
  return (
    <div class="new-key" role="status">
      <p>
        <strong>{created.name}</strong> was created. Copy it now: it will not be shown again.
      </p>
      <div class="key-row">
        <code id="new-key-value" class="key-value">{created.key}</code>
        <CopyButton text={created.key} />
      </div>
      {created.kind === "runner" && (
        <p class="hint">
          On the runner machine, put it in <code>~/.baton/config.json</code> (readable by you only:
          {" "}
          <code>chmod 600</code>):{" "}
          <code>
            {JSON.stringify({ relayUrl: location.origin, apiKey: created.key })}
          </code>{" "}
          then run <code>baton runner</code>.
        </p>
      )}
      <button type="button" class="btn link small" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

/** What a new key is: a runner token, or an API key with all rights or read-only. */
type NewKind = "runner" | "full" | "read";

/** Kind, name, runner and expiry of a new key; a runner token's name starts with "runner-". */
function KeyForm(
  { onCreated, onError }: {
    onCreated: (key: CreatedKey) => void;
    onError: (message: string | null) => void;
  },
) {
  const [name, setName] = useState("");
  const [kind, setKind] = useState<NewKind>("runner");
  const [runnerId, setRunnerId] = useState("");
  const [expiry, setExpiry] = useState("");

  async function create(ev: Event) {
    ev.preventDefault();
    onError(null);
    const base = name.trim() || (kind === "runner" ? "laptop" : "cli");
    const fullName = kind === "runner" && !/^runner([:-]|$)/.test(base) ? `runner-${base}` : base;
    try {
      const body: CreateKeyRequest = {
        name: fullName,
        ...(kind === "runner" ? {} : { scope: kind }),
        ...(runnerId ? { runnerId } : {}),
        ...(expiry ? { expiresInDays: Number(expiry) } : {}),
      };
      const res = await api<CreateKeyResponse>("/api/keys", { method: "POST", body });
      setName("");
      onCreated(res);
    } catch (err) {
      onError((err as Error).message);
    }
  }

  return (
    <form class="key-form" onSubmit={create}>
      <label>
        Kind
        <select value={kind} onChange={(e) => setKind(e.currentTarget.value as NewKind)}>
          <option value="runner">Runner token</option>
          <option value="full">API key</option>
          <option value="read">API key, read-only</option>
        </select>
      </label>
      {runners.value.length > 0 && (
        <label>
          Runner
          <select value={runnerId} onChange={(e) => setRunnerId(e.currentTarget.value)}>
            <option value="">{kind === "runner" ? "The first to connect" : "Any"}</option>
            {runners.value.map((r) => <option key={r.id} value={r.id}>{r.name}</option>)}
          </select>
        </label>
      )}
      <label>
        Name
        <input
          value={name}
          maxLength={90}
          placeholder={kind === "runner" ? "laptop" : "cli"}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </label>
      <label>
        Expires
        <select value={expiry} onChange={(e) => setExpiry(e.currentTarget.value)}>
          <option value="">Never</option>
          <option value="30">In 30 days</option>
          <option value="90">In 90 days</option>
          <option value="365">In a year</option>
        </select>
      </label>
      <button class="btn primary" type="submit">Create</button>
    </form>
  );
}

function KeyTable({ keys, onRevoked }: { keys: KeyInfo[]; onRevoked: () => void }) {
  return (
    <table class="keys">
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Key</th>
          <th scope="col">Last used</th>
          <th scope="col">Expires</th>
          <th scope="col">
            <span class="sr-only">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {keys.map((k) => (
          <tr key={k.id}>
            <td>
              {k.name} <span class="badge">{scopeLabel(k)}</span>
            </td>
            <td>
              <code>{k.prefix}…</code>
            </td>
            <td>{k.lastUsedAt ? ago(k.lastUsedAt) : "never"}</td>
            <td class={k.expired ? "error-text" : ""}>
              {k.expired
                ? "expired"
                : k.expiresAt
                ? new Date(k.expiresAt).toLocaleDateString()
                : "never"}
            </td>
            <td class="right">
              <UndoableAction
                label="Revoke"
                doneLabel="Revoked"
                describe={`Revoking ${k.name}`}
                onConfirm={async () => {
                  await api(`/api/keys/${k.id}`, { method: "DELETE" });
                  onRevoked();
                }}
              />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A key's kind and reach in a word or two: "runner", "api", "read-only", "api · laptop". */
function scopeLabel(k: KeyInfo): string {
  const what = k.scope === "runner" ? "runner" : k.scope === "read" ? "read-only" : "api";
  if (!k.runnerId) return what;
  const name = runners.value.find((r) => r.id === k.runnerId)?.name ?? k.runnerId.slice(0, 8);
  return `${what} · ${name}`;
}
