/**
 * The app: sign-in, or the shell (sidebar, top bar, the page of the route,
 * the shortcuts dialog).
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import { linkState } from "../live.ts";
import { type Route, route } from "../route.ts";
import { me, sessions } from "../store.ts";
import { Automations } from "./automations/automations.tsx";
import { Icon } from "./icon.tsx";
import { NewSession } from "./new_session.tsx";
import { PageNotFound } from "./not_found.tsx";
import { RunnerSettings } from "./runner_settings/runner_settings.tsx";
import { SessionView } from "./session/session_view.tsx";
import { Settings } from "./settings/settings.tsx";
import { ShortcutsDialog, useShortcuts } from "./shortcuts.tsx";
import { Sidebar } from "./sidebar/sidebar.tsx";
import { SignIn } from "./sign_in.tsx";
import { UsagePage } from "./usage/usage_page.tsx";

/** A blank screen while loading, sign-in when signed out, else the shell. */
export function App() {
  if (me.value === undefined) return <div class="center-screen" aria-busy="true" />;
  if (me.value === null) return <SignIn />;
  return <Shell />;
}

/** The sidebar (a drawer on a phone) beside the page of the route. */
function Shell() {
  const [drawer, setDrawer] = useState(false);
  const [help, setHelp] = useState(false);
  const r = route.value;
  useShortcuts({
    onHelp: () => setHelp((h) => !h),
    onEscape: () => {
      setHelp(false);
      setDrawer(false);
    },
  });
  const title = usePageTitle(r);
  return (
    <div class={`shell ${drawer ? "drawer-open" : ""} ${r.page === "home" ? "at-home" : ""}`}>
      <a class="skip" href="#main">Skip to content</a>
      <aside class="side-wrap">
        <Sidebar onNavigate={() => setDrawer(false)} />
      </aside>
      <div class="backdrop" onClick={() => setDrawer(false)} aria-hidden="true" />
      <div class="main-wrap" id="main">
        <TopBar title={title} drawer={drawer} onMenu={() => setDrawer(true)} />
        <Page route={r} />
      </div>
      {help && <ShortcutsDialog onClose={() => setHelp(false)} />}
    </div>
  );
}

/**
 * The page's own name in the window's title (none at home, where the
 * product's name stands alone); returns the top bar's title.
 */
function usePageTitle(r: Route): string {
  const current = r.page === "session" ? sessions.value.find((s) => s.sessionId === r.id) : null;
  const pageTitle = r.page === "session"
    ? current?.title || "Session"
    : r.page === "settings"
    ? "Settings"
    : r.page === "runner"
    ? "Runner settings"
    : r.page === "automations"
    ? "Automations"
    : r.page === "usage"
    ? "Usage"
    : r.page === "new"
    ? "New session"
    : r.page === "missing"
    ? "Page not found"
    : null;
  useEffect(() => {
    document.title = pageTitle ? `${pageTitle} · baton` : "baton";
  }, [pageTitle]);
  return pageTitle ?? "baton";
}

/** The phone's bar: the menu button, the page's title, and the link when it is not open. */
function TopBar(
  { title, drawer, onMenu }: { title: string; drawer: boolean; onMenu: () => void },
) {
  return (
    <div class="topbar">
      <button
        type="button"
        class="icon-btn"
        aria-label="Open the menu"
        aria-expanded={drawer}
        onClick={onMenu}
      >
        <Icon name="menu" />
      </button>
      <span class="topbar-title">{title}</span>
      {linkState.value !== "open" && (
        <span class="pill off small" role="status">
          {linkState.value === "connecting" ? "connecting" : "offline"}
        </span>
      )}
    </div>
  );
}

/** The page of the route. */
function Page({ route: r }: { route: Route }) {
  return (
    <>
      {r.page === "session" && <SessionView key={r.id} id={r.id} />}
      {r.page === "settings" && <Settings />}
      {r.page === "runner" && <RunnerSettings key={r.id} id={r.id} />}
      {r.page === "automations" && <Automations />}
      {r.page === "usage" && <UsagePage key={r.runnerId ?? ""} runnerId={r.runnerId} />}
      {r.page === "new" && <NewSession />}
      {r.page === "missing" && <PageNotFound path={r.path} />}
      {r.page === "home" && (
        <div class="home">
          <NewSession />
        </div>
      )}
    </>
  );
}
