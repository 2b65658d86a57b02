/**
 * The sidebar's sessions: pinned first, then grouped by what they do, each
 * a link with its state and a pin button.
 *
 * @module
 */
import type { SessionInfo } from "../../../../shared/protocol.ts";
import { api } from "../../api.ts";
import { ago, baseName, startTime } from "../../format.ts";
import { route } from "../../route.ts";
import { GROUPS, type SessionGroup, statusOf } from "../../session_status.ts";
import { runnerFilter, runnerName, sessionGroups } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { AppLink } from "../widgets.tsx";
import { SidebarChildren } from "../subagents/subagents.tsx";

const HEADINGS: Record<SessionGroup, string> = {
  working: "Working",
  idle: "Idle",
  asleep: "Asleep",
  ended: "Ended",
};

/** Every group of the account's sessions (of one runner when the list is filtered). */
export function SessionGroups() {
  const g = sessionGroups.value;
  const lists = [g.pinned, ...GROUPS.map((k) => g[k])];
  const empty = lists.every((l) => l.length === 0);
  const repeated = repeatedTitles(lists);
  return (
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

function SessionLink({ s, repeated }: { s: SessionInfo; repeated: boolean }) {
  const r = route.value;
  const active = r.page === "session" && r.id === s.sessionId;
  const st = statusOf(s);
  return (
    <li class={`session-item ${active ? "active" : ""}`}>
      <AppLink href={`/session/${s.sessionId}`} current={active}>
        <span class={`dot ${st.tone}`} title={st.label} aria-hidden="true" />
        <span class="session-text">
          <span class="session-title">{s.title || "Untitled session"}</span>
          <SubLine s={s} repeated={repeated} />
        </span>
        <span class="sr-only">, {st.label}</span>
      </AppLink>
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
      <SidebarChildren parentId={s.sessionId} />
    </li>
  );
}

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
