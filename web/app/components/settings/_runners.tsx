/**
 * The Runners card: the account's runners, with restart and stop.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type { RunnerRequest } from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { runners } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { AppLink, UndoableAction } from "../widgets.tsx";
import { UsageLink } from "../usage/usage_page.tsx";

/** Each runner's state and platform; a connected one can be restarted or stopped. */
export function Runners() {
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const act = async (runnerId: string, what: "restart" | "stop", name: string) => {
    setError(null);
    setDone(null);
    try {
      const body: RunnerRequest = { runnerId };
      await api(`/api/runners/${what}`, { method: "POST", body });
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
                  <span class="push actions">
                    <AppLink
                      href={`/settings/runners/${encodeURIComponent(r.id)}`}
                      class="btn small"
                    >
                      Skills & agents
                    </AppLink>
                  </span>
                  {r.connected && (
                    <span class="actions">
                      <UsageLink runnerId={r.id} />
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
