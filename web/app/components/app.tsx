import { useEffect, useState } from "preact/hooks";
import { linkState } from "../live.ts";
import { navigate, route } from "../route.ts";
import { me, sessionOrder, sessions } from "../store.ts";
import { Automations } from "./automations/automations.tsx";
import { Icon } from "./icon.tsx";
import { NewSession } from "./new_session.tsx";
import { SessionView } from "./session/session_view.tsx";
import { Settings } from "./settings/settings.tsx";
import { Sidebar } from "./sidebar/sidebar.tsx";
import { SignIn } from "./sign_in.tsx";

const SHORTCUTS: [string, string][] = [
  ["Enter", "Send the message"],
  ["Shift + Enter", "New line in the message"],
  ["/", "Focus the message box"],
  ["Esc", "Leave the message box"],
  ["Alt + ↑ / Alt + ↓", "Previous / next session"],
  ["Alt + N", "New session"],
  ["?", "Show these shortcuts"],
];

function typingIn(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  return !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
}

function Shell() {
  const [drawer, setDrawer] = useState(false);
  const [help, setHelp] = useState(false);
  const r = route.value;

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.altKey && (e.key === "ArrowUp" || e.key === "ArrowDown")) {
        const list = sessionOrder.value;
        if (list.length === 0) return;
        const cur = route.value.page === "session"
          ? list.findIndex((s) => s.sessionId === (route.value as { id: string }).id)
          : -1;
        const next = e.key === "ArrowDown"
          ? Math.min(list.length - 1, cur + 1)
          : Math.max(0, cur < 0 ? 0 : cur - 1);
        navigate(`/session/${list[next]!.sessionId}`);
        e.preventDefault();
      } else if (e.altKey && (e.key === "n" || e.key === "N")) {
        navigate("/new");
        e.preventDefault();
      } else if (!typingIn(e.target) && !e.ctrlKey && !e.metaKey && !e.altKey) {
        if (e.key === "/") {
          const box = document.getElementById("composer-input");
          if (box) {
            box.focus();
            e.preventDefault();
          }
        } else if (e.key === "?") setHelp((h) => !h);
        else if (e.key === "Escape") {
          setHelp(false);
          setDrawer(false);
        }
      }
    };
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, []);

  const current = r.page === "session" ? sessions.value.find((s) => s.sessionId === r.id) : null;
  /** The page's own name; none at home, where the product's name stands alone. */
  const pageTitle = r.page === "session"
    ? current?.title || "Session"
    : r.page === "settings"
    ? "Settings"
    : r.page === "automations"
    ? "Automations"
    : r.page === "new"
    ? "New session"
    : r.page === "missing"
    ? "Page not found"
    : null;
  const title = pageTitle ?? "baton";
  useEffect(() => {
    document.title = pageTitle ? `${pageTitle} · baton` : "baton";
  }, [pageTitle]);
  return (
    <div class={`shell ${drawer ? "drawer-open" : ""} ${r.page === "home" ? "at-home" : ""}`}>
      <a class="skip" href="#main">Skip to content</a>
      <aside class="side-wrap">
        <Sidebar onNavigate={() => setDrawer(false)} />
      </aside>
      <div class="backdrop" onClick={() => setDrawer(false)} aria-hidden="true" />
      <div class="main-wrap" id="main">
        <div class="topbar">
          <button
            type="button"
            class="icon-btn"
            aria-label="Open the menu"
            aria-expanded={drawer}
            onClick={() => setDrawer(true)}
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
        {r.page === "session" && <SessionView key={r.id} id={r.id} />}
        {r.page === "settings" && <Settings />}
        {r.page === "automations" && <Automations />}
        {r.page === "new" && <NewSession />}
        {r.page === "missing" && (
          <main class="page narrow">
            <div class="card empty">
              <Icon name="alert" size={28} />
              <h1>Page not found</h1>
              <p>
                baton has no page at <code>{r.path}</code>.
              </p>
              <p>
                <a href="/" onClick={(e) => (e.preventDefault(), navigate("/"))}>
                  Start a session
                </a>{" "}
                or pick one from the list.
              </p>
            </div>
          </main>
        )}
        {r.page === "home" && (
          <div class="home">
            <NewSession />
          </div>
        )}
      </div>
      {help && (
        <div class="dialog-wrap" onClick={() => setHelp(false)}>
          <div
            class="card dialog"
            role="dialog"
            aria-modal="true"
            aria-labelledby="help-title"
            onClick={(e) => e.stopPropagation()}
          >
            <h2 id="help-title">Keyboard shortcuts</h2>
            <dl class="shortcuts">
              {SHORTCUTS.map(([k, v]) => (
                <div key={k}>
                  <dt>
                    <kbd>{k}</kbd>
                  </dt>
                  <dd>{v}</dd>
                </div>
              ))}
            </dl>
            <button type="button" class="btn" onClick={() => setHelp(false)} autofocus>
              Close
            </button>
          </div>
        </div>
      )}
    </div>
  );
}

export function App() {
  if (me.value === undefined) return <div class="center-screen" aria-busy="true" />;
  if (me.value === null) return <SignIn />;
  return <Shell />;
}
