/**
 * The client's state as signals: who is signed in, the runner and session
 * feed, and the conversations on screen.
 *
 * @module
 */
import { batch, computed, effect, type Signal, signal } from "@preact/signals";
import type { RenameSessionRequest, SessionResponse } from "../../shared/api.ts";
import { applyEvents, type Conversation, emptyConversation } from "../../shared/conversation.ts";
import type { RunnerInfo, SessionEvent, SessionInfo } from "../../shared/protocol.ts";
import { api } from "./api.ts";
import { LiveLink } from "./live.ts";
import { navigate, route } from "./route.ts";
import { groupOf, GROUPS, type SessionGroup } from "./session_status.ts";

/** The signed-in user. */
export interface Me {
  id: string;
  email: string;
  name: string;
}

/** undefined while loading, null when signed out. */
export const me = signal<Me | null | undefined>(undefined);
/** The account's runners, from the live feed. */
export const runners = signal<RunnerInfo[]>([]);
/** The account's sessions, from the live feed. */
export const sessions = signal<SessionInfo[]>([]);
/** The runner whose sessions alone the sidebar lists; "" for all. */
export const runnerFilter = signal<string>("");

/** Sessions sorted for the sidebar: pinned, then by what they do, newest first in each. */
export const sessionGroups = computed(() => {
  const filter = runnerFilter.value;
  const list = sessions.value.filter((s) => !filter || s.runnerId === filter)
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  const groups: Record<"pinned" | SessionGroup, SessionInfo[]> = {
    pinned: [],
    working: [],
    idle: [],
    asleep: [],
    ended: [],
  };
  // A subagent is listed under its parent (components/subagents/), when its parent is listed.
  const listed = new Set(list.map((s) => s.sessionId));
  for (const s of list) {
    if (s.parentId && listed.has(s.parentId) && !s.isPinned) continue;
    groups[s.isPinned ? "pinned" : groupOf(s)].push(s);
  }
  return groups;
});

/** Every session in sidebar order (for keyboard navigation). */
export const sessionOrder = computed(() => {
  const g = sessionGroups.value;
  // Subagents follow their parent, as the sidebar nests them (oldest first).
  const kids = new Map<string, SessionInfo[]>();
  for (const s of [...sessions.value].sort((a, b) => a.createdAt.localeCompare(b.createdAt))) {
    if (s.parentId && !s.isPinned) kids.set(s.parentId, [...kids.get(s.parentId) ?? [], s]);
  }
  const withKids = (s: SessionInfo): SessionInfo[] => [
    s,
    ...(kids.get(s.sessionId) ?? []).flatMap(withKids),
  ];
  return [g.pinned, ...GROUPS.map((k) => g[k])].flat().flatMap(withKids);
});

/** A runner's name, for a line of text. */
export function runnerName(id: string): string {
  return runners.value.find((r) => r.id === id)?.name ?? "unknown runner";
}

function upsert<T>(list: T[], item: T, key: (t: T) => string): T[] {
  const i = list.findIndex((x) => key(x) === key(item));
  if (i < 0) return [item, ...list];
  const next = [...list];
  next[i] = item;
  return next;
}

/** The tab's live socket, feeding the signals above and the open sessions. */
export const link = new LiveLink({
  runners: (list) => runners.value = list,
  runner: (r) => runners.value = upsert(runners.value, r, (x) => x.id),
  sessions: (list) => sessions.value = list,
  session: (s) => {
    sessions.value = upsert(sessions.value, s, (x) => x.sessionId);
    const open = streams.get(s.sessionId);
    if (open) open.info.value = s;
  },
  sessionDeleted: (id) => forgetSession(id),
  signedOut: () => void stillSignedIn(),
});

/** Drops a deleted session from the lists; a view of it says it was deleted. */
function forgetSession(id: string): void {
  batch(() => {
    sessions.value = sessions.value.filter((x) => x.sessionId !== id);
    // Kept (marked) so that a view of it says so instead of asking again.
    const open = streams.get(id);
    if (open) open.deleted.value = true;
  });
}

/**
 * Deletes a session (one that runs is ended first): it leaves the list at
 * once, and the app goes home; other tabs hear it from the feed.
 */
export async function deleteSession(id: string): Promise<void> {
  await api(`/api/sessions/${id}`, { method: "DELETE" });
  forgetSession(id);
  navigate("/");
}

/** A change of the account's password in flight (see changePassword). */
let passwordChange: Promise<unknown> | null = null;

/**
 * The live socket was closed because its browser session ended. A password
 * change ends this browser's session too, and hands it a new one (the cookie
 * comes with the answer, which may arrive after the close): wait for it, and
 * stay signed in when the browser still has a session.
 */
async function stillSignedIn(): Promise<void> {
  await passwordChange?.catch(() => {});
  // Should the socket keep refusing a session the API accepts, do not loop.
  const again = Date.now() - lastRecheck < 10_000;
  lastRecheck = Date.now();
  try {
    const s = again ? null : await api<{ user: Me } | null>("/api/auth/get-session");
    if (s?.user && s.user.id === me.value?.id) {
      link.connect();
      return;
    }
  } catch {
    // Cannot tell: treat it as signed out.
  }
  signOutLocally();
}
let lastRecheck = 0;

/**
 * Changes the password and signs every other browser out; this one stays
 * signed in (with the new session better-auth hands it).
 */
export async function changePassword(currentPassword: string, newPassword: string): Promise<void> {
  const change = api("/api/auth/change-password", {
    method: "POST",
    body: { currentPassword, newPassword, revokeOtherSessions: true },
  });
  passwordChange = change;
  try {
    await change;
  } finally {
    if (passwordChange === change) passwordChange = null;
  }
}

/** Renames a session; the list and the open view show it at once, other tabs through the feed. */
export async function renameSession(id: string, title: string): Promise<void> {
  const { session } = await api<SessionResponse>(`/api/sessions/${id}`, {
    method: "PATCH",
    body: { title } satisfies RenameSessionRequest,
  });
  sessions.value = upsert(sessions.value, session, (x) => x.sessionId);
  const open = streams.get(id);
  if (open) open.info.value = session;
}

/** A session on screen: its listed info and its conversation. */
export interface OpenSession {
  id: string;
  info: Signal<SessionInfo | null>;
  conv: Signal<Conversation>;
  /** True once every stored event up to the subscription was received. */
  caughtUp: Signal<boolean>;
  error: Signal<string | null>;
  /** True once the session was deleted (here or in another tab). */
  deleted: Signal<boolean>;
}

const streams = new Map<string, OpenSession>();
const MAX_CACHED = 8;

/**
 * Opens (or returns the cached) stream of a session. A cached one resubscribes
 * from the last seq it holds, so switching back is instant.
 */
export function openSession(id: string): OpenSession {
  let s = streams.get(id);
  if (s) {
    // Most recently used last.
    streams.delete(id);
    streams.set(id, s);
    return s;
  }
  const open: OpenSession = {
    id,
    info: signal(sessions.value.find((x) => x.sessionId === id) ?? null),
    conv: signal(emptyConversation()),
    caughtUp: signal(false),
    error: signal(null),
    deleted: signal(false),
  };
  s = open;
  streams.set(id, open);
  link.subscribe(id, {
    since: () => open.conv.value.lastSeq,
    events: (events: SessionEvent[]) => open.conv.value = applyEvents(open.conv.value, events),
    reset: () =>
      batch(() => {
        open.conv.value = emptyConversation();
        open.caughtUp.value = false;
      }),
    caughtUp: () => open.caughtUp.value = true,
    info: (info) => open.info.value = info,
    error: (_code, message) => open.error.value = message,
  });
  while (streams.size > MAX_CACHED) {
    const oldest = streams.keys().next().value!;
    streams.delete(oldest);
    link.unsubscribe(oldest);
  }
  return open;
}

/** Loads who is signed in and starts the live link. */
export async function loadMe(): Promise<void> {
  try {
    const s = await api<{ user: Me } | null>("/api/auth/get-session");
    me.value = s?.user ?? null;
  } catch {
    me.value = null;
  }
  if (me.value) link.connect();
}

/** Forgets the account in this tab (the relay already ended the sign-in). */
export function signOutLocally(): void {
  link.close();
  for (const id of [...streams.keys()]) {
    streams.delete(id);
  }
  batch(() => {
    me.value = null;
    runners.value = [];
    sessions.value = [];
  });
}

/** Signs out at the relay, forgets the account here, and goes home. */
export async function signOut(): Promise<void> {
  await api("/api/auth/sign-out", { method: "POST", body: {} }).catch(() => {});
  signOutLocally();
  navigate("/");
}

/** Whether this tab's page is visible (not a background tab, not a locked phone). */
const pageVisible = signal(document.visibilityState === "visible");
document.addEventListener("visibilitychange", () => {
  pageVisible.value = document.visibilityState === "visible";
});
// The relay holds push notifications of the session on screen.
effect(() => {
  const r = route.value;
  link.setOnScreen(r.page === "session" && pageVisible.value ? r.id : null);
});
