/**
 * Subagents in the web app (docs/subagents.md): a child session nested
 * under its parent in the sidebar, a "Subagent of" link in a child's
 * header, and links from a `subagent` tool call to the children it started.
 *
 * @module
 */
import { computed } from "@preact/signals";
import type { SessionInfo } from "../../../../shared/protocol.ts";
import { route } from "../../route.ts";
import { statusOf } from "../../session_status.ts";
import { sessions } from "../../store.ts";
import { AppLink } from "../widgets.tsx";

/** The listed sessions by id. */
const byId = computed(() => new Map(sessions.value.map((s) => [s.sessionId, s])));

/** Each listed parent's children, oldest first. */
export const childrenOf = computed(() => {
  const out = new Map<string, SessionInfo[]>();
  for (const s of sessions.value) {
    if (!s.parentId) continue;
    const list = out.get(s.parentId) ?? [];
    list.push(s);
    out.set(s.parentId, list);
  }
  for (const list of out.values()) list.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  return out;
});

function label(s: SessionInfo | undefined, fallback: string): string {
  return s?.title || fallback;
}

/** A child's line: its state, title and role, linking to it. */
function ChildLink({ id, index }: { id: string; index?: number | undefined }) {
  const s = byId.value.get(id);
  const st = s ? statusOf(s) : { label: "starting", tone: "off" };
  const r = route.value;
  const active = r.page === "session" && r.id === id;
  return (
    <AppLink href={`/session/${id}`} class="subagent-link" current={active}>
      <span class={`dot ${st.tone}`} title={st.label} aria-hidden="true" />
      <span class="subagent-title">
        {index !== undefined ? `${index + 1}. ` : ""}
        {label(s, "Subagent")}
      </span>
      {s?.agent && <span class="badge small">{s.agent}</span>}
      <span class="sr-only">, {st.label}</span>
    </AppLink>
  );
}

/** The sidebar's nested list of a parent's children (a pinned one is listed under Pinned). */
export function SidebarChildren({ parentId }: { parentId: string }) {
  const kids = childrenOf.value.get(parentId)?.filter((k) => !k.isPinned);
  if (!kids?.length) return null;
  return (
    <ul class="subagent-list" aria-label="Subagents">
      {kids.map((k) => (
        <li key={k.sessionId}>
          <ChildLink id={k.sessionId} />
          <SidebarChildren parentId={k.sessionId} />
        </li>
      ))}
    </ul>
  );
}

/** "Subagent of …" under a child's title. */
export function ParentLink({ info }: { info: SessionInfo | null }) {
  if (!info?.parentId) return null;
  const parent = byId.value.get(info.parentId);
  return (
    <p class="subagent-parent small">
      Subagent{info.agent ? ` (${info.agent})` : ""} of{" "}
      <AppLink href={`/session/${info.parentId}`}>{label(parent, "its parent session")}</AppLink>
    </p>
  );
}

/** Links from a `subagent` tool call to the children it started, in task order. */
export function SubagentLinks({ ids }: { ids: string[] }) {
  return (
    <ul class="subagent-list in-tool" aria-label="Subagents of this call">
      {ids.map((id, i) => (
        <li key={id}>
          <ChildLink id={id} index={ids.length > 1 ? i : undefined} />
        </li>
      ))}
    </ul>
  );
}
