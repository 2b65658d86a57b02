import { useEffect, useState } from "preact/hooks";
import { api, type ApiError } from "../api.ts";
import { ago } from "../format.ts";
import { modelValue } from "../models.ts";
import { useRunnerChoice, useRunnerModels } from "../runner_hooks.ts";
import { changePassword, me, runners, signOut } from "../store.ts";
import { Icon } from "./icon.tsx";
import { CopyButton, UndoableAction } from "./widgets.tsx";

interface KeyRow {
  id: string;
  name: string;
  kind: "api" | "runner";
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  expired: boolean;
}

function Keys() {
  const [keys, setKeys] = useState<KeyRow[] | null>(null);
  const [name, setName] = useState("");
  const [kind, setKind] = useState<"api" | "runner">("runner");
  const [expiry, setExpiry] = useState("");
  const [created, setCreated] = useState<{ key: string; name: string; kind: string } | null>(null);
  const [error, setError] = useState<string | null>(null);

  const load = () =>
    api<{ keys: KeyRow[] }>("/api/keys").then((r) => setKeys(r.keys), (e) => setError(e.message));
  useEffect(() => {
    load();
  }, []);

  async function create(ev: Event) {
    ev.preventDefault();
    setError(null);
    const base = name.trim() || (kind === "runner" ? "laptop" : "cli");
    const fullName = kind === "runner" && !/^runner([:-]|$)/.test(base) ? `runner-${base}` : base;
    try {
      const res = await api<{ key: string; name: string; kind: string }>("/api/keys", {
        method: "POST",
        body: { name: fullName, ...(expiry ? { expiresInDays: Number(expiry) } : {}) },
      });
      setCreated(res);
      setName("");
      load();
    } catch (err) {
      setError((err as Error).message);
    }
  }

  return (
    <section class="card" aria-labelledby="keys-title">
      <h2 id="keys-title">
        <Icon name="key" /> API keys and runner tokens
      </h2>
      <p class="muted">
        A runner token lets a machine connect as a runner; an API key lets scripts and the CLI use
        the API. Both act as you. The full value is shown once.
      </p>
      {created && (
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
              On the runner machine:{" "}
              <code>
                BATON_RELAY_URL={location.origin} BATON_API_KEY={created.key} baton runner
              </code>
            </p>
          )}
          <button type="button" class="btn link small" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      <form class="key-form" onSubmit={create}>
        <label>
          Kind
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value as "api" | "runner")}>
            <option value="runner">Runner token</option>
            <option value="api">API key</option>
          </select>
        </label>
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
      {error && <p class="error" role="alert">{error}</p>}
      {keys === null
        ? <p class="muted">Loading…</p>
        : keys.length === 0
        ? <p class="muted">No keys yet.</p>
        : (
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
                    {k.name} <span class="badge">{k.kind === "runner" ? "runner" : "api"}</span>
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
                        load();
                      }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </section>
  );
}

function HiddenModels() {
  const list = runners.value.filter((r) => r.connected);
  const [runnerId, setRunnerId] = useRunnerChoice(list[0]);
  const [hidden, setHidden] = useState<string[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  // The relay leaves hidden models out of a runner's list: ask again when they change.
  const { models, error: modelsError } = useRunnerModels(runnerId, { reloadOn: hidden });
  useEffect(() => {
    api<{ hiddenModels: string[] }>("/api/settings/hidden-models").then(
      (r) => setHidden(r.hiddenModels),
      (e) => setError(e.message),
    );
  }, []);

  async function save(next: string[]) {
    setError(null);
    try {
      const r = await api<{ hiddenModels: string[] }>("/api/settings/hidden-models", {
        method: "PUT",
        body: { hiddenModels: next },
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
      {list.length > 1 && (
        <label>
          Runner
          <select value={runnerId} onChange={(e) => setRunnerId(e.currentTarget.value)}>
            {list.map((r) => <option key={r.id} value={r.id}>{r.name}</option>)}
          </select>
        </label>
      )}
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

/** The runners of the account, with restart and stop. */
function Runners() {
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const act = async (runnerId: string, what: "restart" | "stop", name: string) => {
    setError(null);
    setDone(null);
    try {
      await api(`/api/runners/${what}`, { method: "POST", body: { runnerId } });
      setDone(what === "restart" ? `${name} is restarting.` : `${name} was stopped.`);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const list = runners.value;
  return (
    <section class="card" aria-labelledby="runners-title">
      <h2 id="runners-title">
        <Icon name="server" /> Runners
      </h2>
      {list.length === 0
        ? (
          <p class="muted">
            No runner yet. On a machine, run <code>baton setup</code> then <code>baton runner</code>
            , or create a runner token below.
          </p>
        )
        : (
          <ul class="history">
            {list.map((r) => (
              <li key={r.id}>
                <div class="history-head">
                  <span class={`dot ${r.connected ? "ok" : "off"}`} aria-hidden="true" />
                  <strong>{r.name}</strong>
                  <span class="badge">{r.connected ? "connected" : "offline"}</span>
                  {r.connected && (
                    <span class="push actions">
                      <button
                        type="button"
                        class="btn small"
                        onClick={() => act(r.id, "restart", r.name)}
                      >
                        Restart
                      </button>
                      <UndoableAction
                        label="Stop"
                        doneLabel="Stopped"
                        describe={`Stopping ${r.name}`}
                        onConfirm={() => act(r.id, "stop", r.name)}
                      />
                    </span>
                  )}
                </div>
                <div class="hint">
                  {r.platform || "unknown platform"}
                  {r.version ? ` · baton ${r.version}` : ""} · {r.sessions.length} live session(s)
                  {" · "}
                  {r.roots.length ? `roots: ${r.roots.join(", ")}` : "any folder"}
                </div>
              </li>
            ))}
          </ul>
        )}
      {done && <p class="hint" role="status">{done}</p>}
      {error && <p class="error" role="alert">{error}</p>}
    </section>
  );
}

/** The smallest password the relay takes (better-auth's minPasswordLength). */
const MIN_PASSWORD = 8;

/** Changes the password; every other browser signed in to the account is signed out. */
function Password() {
  const [current, setCurrent] = useState("");
  const [fresh, setFresh] = useState("");
  const [again, setAgain] = useState("");
  const [error, setError] = useState<{ field: "current" | "fresh" | "again"; text: string } | null>(
    null,
  );
  const [done, setDone] = useState(false);
  const [busy, setBusy] = useState(false);

  async function submit(ev: Event) {
    ev.preventDefault();
    setDone(false);
    if (!current) return setError({ field: "current", text: "Enter your current password" });
    if (fresh.length < MIN_PASSWORD) {
      return setError({
        field: "fresh",
        text: `The new password needs at least ${MIN_PASSWORD} characters`,
      });
    }
    if (fresh !== again) {
      return setError({ field: "again", text: "The new passwords do not match" });
    }
    setError(null);
    setBusy(true);
    try {
      await changePassword(current, fresh);
      setCurrent("");
      setFresh("");
      setAgain("");
      setDone(true);
    } catch (err) {
      const e = err as ApiError;
      setError(
        e.code === "invalid_password"
          ? { field: "current", text: "The current password is wrong" }
          : e.code === "password_too_short"
          ? { field: "fresh", text: `The new password needs at least ${MIN_PASSWORD} characters` }
          : e.code === "password_too_long"
          ? { field: "fresh", text: "The new password is too long (256 characters at most)" }
          : { field: "current", text: e.message },
      );
    } finally {
      setBusy(false);
    }
  }

  const invalid = (field: "current" | "fresh" | "again") =>
    error?.field === field ? { "aria-invalid": true, "aria-describedby": "password-error" } : {};
  return (
    <form class="password-form" onSubmit={submit} noValidate aria-labelledby="password-title">
      <h3 id="password-title">Password</h3>
      <p class="muted small">
        Changing it signs out every other browser signed in to this account; this one stays signed
        in. API keys and runner tokens keep working.
      </p>
      <div class="password-fields">
        <label>
          Current password
          <input
            type="password"
            autocomplete="current-password"
            value={current}
            onInput={(e) => setCurrent(e.currentTarget.value)}
            {...invalid("current")}
          />
        </label>
        <label>
          New password
          <input
            type="password"
            autocomplete="new-password"
            value={fresh}
            onInput={(e) => setFresh(e.currentTarget.value)}
            {...invalid("fresh")}
          />
        </label>
        <label>
          New password again
          <input
            type="password"
            autocomplete="new-password"
            value={again}
            onInput={(e) => setAgain(e.currentTarget.value)}
            {...invalid("again")}
          />
        </label>
      </div>
      {error && <p id="password-error" class="error" role="alert">{error.text}</p>}
      {done && (
        <p class="hint" role="status">
          Password changed. Every other browser was signed out.
        </p>
      )}
      <button class="btn" type="submit" disabled={busy}>
        {busy ? "Changing…" : "Change password"}
      </button>
    </form>
  );
}

export function Settings() {
  return (
    <main class="page" aria-labelledby="settings-title">
      <h1 id="settings-title">Settings</h1>
      <section class="card" aria-labelledby="account-title">
        <h2 id="account-title">Account</h2>
        <p>
          Signed in as <strong>{me.value?.name}</strong> ({me.value?.email})
        </p>
        <button type="button" class="btn" onClick={() => signOut()}>
          <Icon name="logout" /> Sign out
        </button>
        <Password />
      </section>
      <Runners />
      <HiddenModels />
      <Keys />
    </main>
  );
}
