import type { SessionInfo } from "../../../shared/protocol.ts";
import { api } from "../api.ts";
import { ago, baseName, startTime } from "../format.ts";
import { linkState } from "../live.ts";
import { navigate, route } from "../route.ts";
import { GROUPS, type SessionGroup, statusOf } from "../session_status.ts";
import { me, runnerFilter, runnerName, runners, sessionGroups, signOut } from "../store.ts";
import { Icon } from "./icon.tsx";

const HEADINGS: Record<SessionGroup, string> = {
  working: "Working",
  idle: "Idle",
  asleep: "Asleep",
  ended: "Ended",
};

/**
 * The line under a session's title. Sessions whose titles repeat (the same
 * first prompt) are told apart by folder and start time instead; a long
 * folder name gives way, the time does not.
 */
function SubLine({ s, repeated }: { s: SessionInfo; repeated: boolean }) {
  const folder = s.cwd ? baseName(s.cwd) : "…";
  if (!repeated) {
    return (
      <span class="session-sub">
        {runnerName(s.runnerId)} · {folder} · {ago(s.createdAt)}
      </span>
    );
  }
  return (
    <span class="session-sub repeated">
      <span class="sub-folder">{folder}</span>
      <span class="sub-time">&nbsp;· started {startTime(s.createdAt)}</span>
    </span>
  );
}

function SessionLink({ s, repeated }: { s: SessionInfo; repeated: boolean }) {
  const r = route.value;
  const active = r.page === "session" && r.id === s.sessionId;
  const st = statusOf(s);
  const href = `/session/${s.sessionId}`;
  return (
    <li class={`session-item ${active ? "active" : ""}`}>
      <a
        href={href}
        aria-current={active ? "page" : undefined}
        onClick={(e) => {
          e.preventDefault();
          navigate(href);
        }}
      >
        <span class={`dot ${st.tone}`} title={st.label} aria-hidden="true" />
        <span class="session-text">
          <span class="session-title">{s.title || "Untitled session"}</span>
          <SubLine s={s} repeated={repeated} />
        </span>
        <span class="sr-only">, {st.label}</span>
      </a>
      <button
        type="button"
        class={`icon-btn pin ${s.isPinned ? "on" : ""}`}
        aria-label={s.isPinned ? `Unpin ${s.title || "session"}` : `Pin ${s.title || "session"}`}
        aria-pressed={s.isPinned}
        onClick={() =>
          api(`/api/sessions/${s.sessionId}/pin`, { method: s.isPinned ? "DELETE" : "PUT" }).catch(
            () => {},
          )}
      >
        <Icon name="pin" size={15} />
      </button>
    </li>
  );
}

function Group(
  { title, list, repeated }: { title: string; list: SessionInfo[]; repeated: Set<string> },
) {
  if (list.length === 0) return null;
  return (
    <section class="side-group" aria-label={title}>
      <h2 class="side-heading">{title}</h2>
      <ul class="session-list">
        {list.map((s) => (
          <SessionLink key={s.sessionId} s={s} repeated={repeated.has(s.title || "")} />
        ))}
      </ul>
    </section>
  );
}

/** The titles that more than one listed session has. */
function repeatedTitles(lists: SessionInfo[][]): Set<string> {
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const list of lists) {
    for (const s of list) {
      const t = s.title || "";
      if (seen.has(t)) repeated.add(t);
      seen.add(t);
    }
  }
  return repeated;
}

export function Sidebar({ onNavigate }: { onNavigate?: () => void }) {
  const g = sessionGroups.value;
  const state = linkState.value;
  const lists = [g.pinned, ...GROUPS.map((k) => g[k])];
  const empty = lists.every((l) => l.length === 0);
  const repeated = repeatedTitles(lists);
  return (
    <nav
      class="sidebar"
      aria-label="Sessions and runners"
      onClick={(e) => {
        if ((e.target as HTMLElement).closest("a")) onNavigate?.();
      }}
    >
      <div class="side-top">
        <a
          href="/"
          class="brand"
          onClick={(e) => {
            e.preventDefault();
            navigate("/");
          }}
        >
          <span class="logo-mark" aria-hidden="true" /> baton
        </a>
        <span
          class={`link-state ${state}`}
          role="status"
          title={state === "open"
            ? "Connected"
            : state === "connecting"
            ? "Connecting…"
            : "Offline, reconnecting…"}
        >
          <span class="sr-only">
            {state === "open" ? "Connected" : state === "connecting" ? "Connecting" : "Offline"}
          </span>
        </span>
      </div>
      <a
        href="/new"
        class="btn primary wide new-btn"
        onClick={(e) => {
          e.preventDefault();
          navigate("/new");
        }}
      >
        <Icon name="plus" /> New session
      </a>

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

      <div class="side-sessions">
        {runnerFilter.value && (
          <p class="filter-note small">
            Showing {runnerName(runnerFilter.value)} only ·{" "}
            <button type="button" class="btn link small" onClick={() => runnerFilter.value = ""}>
              show all
            </button>
          </p>
        )}
        <Group title="Pinned" list={g.pinned} repeated={repeated} />
        {GROUPS.map((k) => <Group key={k} title={HEADINGS[k]} list={g[k]} repeated={repeated} />)}
        {empty && <p class="muted small pad">No sessions yet.</p>}
      </div>

      <div class="side-bottom">
        <a
          href="/automations"
          class="side-link"
          aria-current={route.value.page === "automations" ? "page" : undefined}
          onClick={(e) => {
            e.preventDefault();
            navigate("/automations");
          }}
        >
          <Icon name="bolt" /> Automations
        </a>
        <a
          href="/settings"
          class="side-link"
          aria-current={route.value.page === "settings" ? "page" : undefined}
          onClick={(e) => {
            e.preventDefault();
            navigate("/settings");
          }}
        >
          <Icon name="settings" /> Settings
        </a>
        <div class="me-row">
          <span class="me-email" title={me.value?.email}>{me.value?.email}</span>
          <button type="button" class="icon-btn" aria-label="Sign out" onClick={() => signOut()}>
            <Icon name="logout" />
          </button>
        </div>
      </div>
    </nav>
  );
}
