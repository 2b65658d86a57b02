/**
 * The sidebar: the brand and the link's state, a new session, the runners,
 * the sessions, and the pages of the account.
 *
 * @module
 */
import { linkState } from "../../live.ts";
import { route } from "../../route.ts";
import { me, signOut } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { AppLink } from "../widgets.tsx";
import { RunnerList } from "./_runner_list.tsx";
import { SessionGroups } from "./_session_list.tsx";

/** The app's navigation; `onNavigate` runs when a link in it is followed (to close a drawer). */
export function Sidebar({ onNavigate }: { onNavigate?: () => void }) {
  return (
    <nav
      class="sidebar"
      aria-label="Sessions and runners"
      onClick={(e) => {
        if ((e.target as HTMLElement).closest("a")) onNavigate?.();
      }}
    >
      <div class="side-top">
        <AppLink href="/" class="brand">
          <span class="logo-mark" aria-hidden="true" /> baton
        </AppLink>
        <LinkState />
      </div>
      <AppLink href="/new" class="btn primary wide new-btn">
        <Icon name="plus" /> New session
      </AppLink>
      <RunnerList />
      <SessionGroups />
      <div class="side-bottom">
        <AppLink
          href="/automations"
          class="side-link"
          current={route.value.page === "automations"}
        >
          <Icon name="bolt" /> Automations
        </AppLink>
        <AppLink href="/usage" class="side-link" current={route.value.page === "usage"}>
          <Icon name="chart" /> Usage
        </AppLink>
        <AppLink
          href="/settings"
          class="side-link"
          current={route.value.page === "settings" || route.value.page === "runner"}
        >
          <Icon name="settings" /> Settings
        </AppLink>
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

/** A dot for the live link to the relay, with its state in words for screen readers. */
function LinkState() {
  const state = linkState.value;
  return (
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
  );
}
