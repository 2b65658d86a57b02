/**
 * The sidebar's runners: each one's state, and a click shows only its
 * sessions (again: all of them).
 *
 * @module
 */
import { runnerFilter, runners } from "../../store.ts";

/** The Runners group of the sidebar. */
export function RunnerList() {
  return (
    <section class="side-group" aria-label="Runners">
      <h2 class="side-heading">Runners</h2>
      {runners.value.length === 0
        ? (
          <p class="muted small">
            No runner yet. Start one with <code>baton runner</code>.
          </p>
        )
        : (
          <ul class="runner-list">
            {runners.value.map((r) => (
              <li key={r.id}>
                <button
                  type="button"
                  class={`runner-item ${runnerFilter.value === r.id ? "active" : ""}`}
                  aria-pressed={runnerFilter.value === r.id}
                  title={runnerFilter.value === r.id
                    ? "Show all sessions"
                    : "Show only this runner's sessions"}
                  onClick={() => runnerFilter.value = runnerFilter.value === r.id ? "" : r.id}
                >
                  <span class={`dot ${r.connected ? "ok" : "off"}`} aria-hidden="true" />
                  <span class="runner-name">{r.name}</span>
                  <span class="runner-meta">
                    {r.connected ? `${r.sessions.length} live` : "offline"}
                    {r.platform ? ` · ${r.platform}` : ""}
                  </span>
                  <span class="sr-only">{r.connected ? ", connected" : ", offline"}</span>
                </button>
              </li>
            ))}
          </ul>
        )}
    </section>
  );
}
