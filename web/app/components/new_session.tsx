/**
 * The new-session form (also the home page on a desktop): runner, folder,
 * model and a first prompt.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type { SpawnSessionRequest, SpawnSessionResponse } from "../../../shared/api.ts";
import type { RunnerInfo } from "../../../shared/protocol.ts";
import { api } from "../api.ts";
import { modelRef, modelValue } from "../models.ts";
import { useRecentFolders, useRunnerChoice, useRunnerModels } from "../runner_hooks.ts";
import { navigate } from "../route.ts";
import { runnerFilter, runners } from "../store.ts";
import { Icon } from "./icon.tsx";

/** A prompt past this many characters gets a word about its size; the relay takes 200,000. */
const LONG_PROMPT = 20_000;
const MAX_PROMPT = 200_000;

/** What stands in the way of starting with this prompt, or a word about its size. */
function promptNote(prompt: string): { blocking: boolean; text: string } | null {
  if (!prompt.trim()) return { blocking: true, text: "Write a prompt to start the session." };
  const n = prompt.length.toLocaleString("en-US");
  if (prompt.length > MAX_PROMPT) {
    return {
      blocking: true,
      text: `This prompt has ${n} characters; the most a prompt may have is 200,000.`,
    };
  }
  if (prompt.length > LONG_PROMPT) {
    // About four characters a token for English text and code.
    const approx = Math.round(prompt.length / 4 / 1000) * 1000;
    return {
      blocking: false,
      text: `This prompt is long: ${n} characters, about ${
        approx.toLocaleString("en-US")
      } tokens of the model's context, sent again with every later turn.`,
    };
  }
  return null;
}

/** Start a session: runner, folder, model and a first prompt. */
export function NewSession() {
  const list = runners.value;
  const preferred = list.find((r) => r.id === runnerFilter.value && r.connected) ??
    list.find((r) => r.connected) ?? list[0];
  const [runnerId, setRunnerId] = useRunnerChoice(preferred);
  const [cwd, setCwd] = useState("");
  const [model, setModel] = useState("");
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const runner = list.find((r) => r.id === runnerId);

  const note = promptNote(prompt);
  async function start(ev?: Event) {
    ev?.preventDefault();
    if (!runnerId || note?.blocking) return;
    setBusy(true);
    setError(null);
    try {
      const body: SpawnSessionRequest = {
        runnerId,
        cwd: cwd.trim() || null,
        prompt,
        model: modelRef(model),
      };
      const res = await api<SpawnSessionResponse>("/api/runners/spawn", { method: "POST", body });
      navigate(`/session/${res.sessionId}`);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }

  if (list.length === 0) return <NoRunner />;
  return (
    <main class="page narrow" aria-labelledby="new-title">
      <h1 id="new-title">Start a session</h1>
      <form class="card form-grid" onSubmit={start}>
        <label>
          Runner
          <select value={runnerId} onChange={(e) => setRunnerId(e.currentTarget.value)}>
            {list.map((r) => (
              <option value={r.id} key={r.id}>
                {r.name}
                {r.connected ? "" : " (offline)"}
              </option>
            ))}
          </select>
        </label>
        <FolderField runnerId={runnerId} runner={runner} value={cwd} onChange={setCwd} />
        <ModelField runnerId={runnerId} value={model} onChange={setModel} />
        <label class="span2">
          Prompt
          <textarea
            rows={5}
            value={prompt}
            placeholder="What should the agent do?"
            aria-describedby="prompt-note"
            onInput={(e) => setPrompt(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) start();
            }}
          />
          <span
            id="prompt-note"
            class={`hint ${note && !(note.blocking && !prompt.trim()) ? "warn" : ""}`}
          >
            {note?.text}
          </span>
        </label>
        {error && <p class="error span2" role="alert">{error}</p>}
        {runner && !runner.connected && (
          <p class="hint warn span2">{runner.name} is offline: start its runner to use it.</p>
        )}
        <div class="span2 actions">
          <button
            class="btn primary"
            type="submit"
            disabled={busy || !runner?.connected || note?.blocking}
            aria-describedby="prompt-note"
          >
            {busy ? "Starting…" : "Start session"}
          </button>
          <span class="hint">Ctrl+Enter</span>
        </div>
      </form>
    </main>
  );
}

/** The page while the account has no runner: what a runner is and how to start one. */
function NoRunner() {
  return (
    <main class="page narrow" aria-labelledby="new-title">
      <h1 id="new-title">Start a session</h1>
      <div class="card empty">
        <Icon name="server" size={28} />
        <h2>Connect a runner first</h2>
        <p>
          A runner is the machine where agents work. On that machine, run <code>baton setup</code>
          {" "}
          then <code>baton runner</code>, or start everything locally with <code>baton up</code>.
        </p>
      </div>
    </main>
  );
}

/** The folder, with the runner's recent folders as suggestions and its allowed roots. */
function FolderField(
  { runnerId, runner, value, onChange }: {
    runnerId: string;
    runner: RunnerInfo | undefined;
    value: string;
    onChange: (cwd: string) => void;
  },
) {
  const folders = useRecentFolders(runnerId);
  return (
    <label>
      Folder
      <input
        list="recent-folders"
        value={value}
        placeholder={runner?.roots[0] ? `${runner.roots[0]} (default)` : "~ (default: home folder)"}
        spellcheck={false}
        autocomplete="off"
        onInput={(e) => onChange(e.currentTarget.value)}
      />
      <datalist id="recent-folders">
        {folders.map((f) => <option value={f} key={f} />)}
      </datalist>
      {runner && runner.roots.length > 0 && (
        <span class="hint">Allowed: {runner.roots.join(", ")}</span>
      )}
    </label>
  );
}

/** The runner's models (by name where they have one), and why there are none. */
function ModelField(
  { runnerId, value, onChange }: {
    runnerId: string;
    value: string;
    onChange: (model: string) => void;
  },
) {
  const { models, error, configError } = useRunnerModels(runnerId);
  const problem = error ??
    (configError ? `The runner's models.json has a problem: ${configError}` : null);
  return (
    <label>
      Model
      <select value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">Runner default</option>
        {(models ?? []).map((m) => {
          const v = modelValue(m);
          return (
            <option value={v} key={v}>
              {m.name && m.name !== m.id ? `${m.name} (${v})` : v}
            </option>
          );
        })}
      </select>
      {models && models.length === 0 && (
        <span class="hint warn">
          This runner has no model configured: set a provider key or add{" "}
          <code>~/.baton/models.json</code> on it.
        </span>
      )}
      {problem && <span class="hint warn">{problem}</span>}
    </label>
  );
}
