/**
 * A runner's settings page (`/settings/runners/{id}`): its skills and agent
 * definitions, edited as Markdown with a preview, its plugins and its sandbox.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type {
  AgentsListResponse,
  DocEntry,
  DocKind,
  DocResponse,
  PluginsResponse,
  SkillsListResponse,
} from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import { runners } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { AppLink } from "../widgets.tsx";
import { DocEditor } from "./_doc_editor.tsx";
import { SandboxPanel } from "../sandbox/sandbox_panel.tsx";
import { RunnerApprovals } from "../questions/approval_settings.tsx";

type Tab = DocKind | "plugins" | "sandbox" | "approvals";

const TAB_LABEL: Record<Tab, string> = {
  skills: "Skills",
  agents: "Agents",
  plugins: "Plugins",
  sandbox: "Sandbox",
  approvals: "Approvals",
};

/** The page: the runner's name and state, then one tab of skills, agents or plugins. */
export function RunnerSettings({ id }: { id: string }) {
  const [tab, setTab] = useState<Tab>("skills");
  const runner = runners.value.find((r) => r.id === id);
  return (
    <main class="page runner-settings" aria-labelledby="runner-settings-title">
      <p class="crumbs">
        <AppLink href="/settings">Settings</AppLink> <span aria-hidden="true">›</span> Runners
      </p>
      <h1 id="runner-settings-title">
        <Icon name="server" /> {runner?.name ?? "Runner"}
        {runner && (
          <span class={`badge ${runner.connected ? "" : "off"}`}>
            {runner.connected ? "connected" : "offline"}
          </span>
        )}
      </h1>
      <p class="hint">
        Skills and agent definitions are pi's own Markdown files on this runner; a new session loads
        what is saved here.
      </p>
      <div class="tabs" role="tablist" aria-label="What to edit">
        {(Object.keys(TAB_LABEL) as Tab[]).map((t) => (
          <button
            key={t}
            type="button"
            role="tab"
            aria-selected={tab === t}
            class={tab === t ? "on" : ""}
            onClick={() => setTab(t)}
          >
            {TAB_LABEL[t]}
          </button>
        ))}
      </div>
      {runner && !runner.connected
        ? <p class="error" role="alert">This runner is offline: its files cannot be read now.</p>
        : tab === "plugins"
        ? <Plugins key={id} runnerId={id} />
        : tab === "sandbox"
        ? <SandboxPanel key={id} runnerId={id} />
        : tab === "approvals"
        ? <RunnerApprovals key={id} runnerId={id} />
        : <Docs key={`${id}-${tab}`} runnerId={id} kind={tab} />}
    </main>
  );
}

/** What is open in the editor: nothing, a new document, or an existing one. */
type Open = null | { isNew: true } | { isNew: false; name: string };

/** The list of one kind beside (desktop) or instead of (phone) its editor. */
function Docs({ runnerId, kind }: { runnerId: string; kind: DocKind }) {
  const base = `/api/runners/${encodeURIComponent(runnerId)}/${kind}`;
  const [entries, setEntries] = useState<DocEntry[] | null>(null);
  const [folder, setFolder] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState<Open>(null);
  const [doc, setDoc] = useState<DocResponse | null>(null);

  const load = async (refresh = false) => {
    setError(null);
    try {
      if (refresh) await api(`${base}/refresh`, { method: "POST" });
      const res = await api<SkillsListResponse | AgentsListResponse>(base);
      setEntries(res.entries);
      setFolder(res.folder);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  useEffect(() => {
    load();
  }, [base]);

  const select = async (name: string) => {
    setError(null);
    setDoc(null);
    setOpen({ isNew: false, name });
    try {
      setDoc(await api<DocResponse>(`${base}/${encodeURIComponent(name)}`));
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const one = kind === "skills" ? "skill" : "agent";
  const openName = open && !open.isNew ? open.name : null;

  return (
    <div class={`docs ${open ? "editing" : ""}`}>
      <section class="docs-list card" aria-label={TAB_LABEL[kind]}>
        <div class="card-head">
          <button
            type="button"
            class="btn primary small"
            onClick={() => {
              setDoc(null);
              setOpen({ isNew: true });
            }}
          >
            <Icon name="plus" /> New {one}
          </button>
          <button type="button" class="btn small" onClick={() => load(true)}>
            Refresh
          </button>
        </div>
        {entries === null ? <p class="muted">Loading…</p> : entries.length === 0
          ? (
            <p class="muted">
              No {kind} yet. New ones are saved in <code>{folder}</code>.
            </p>
          )
          : (
            <ul class="doc-items">
              {entries.map((e) => (
                <li key={e.path}>
                  <button
                    type="button"
                    class={`doc-item ${openName === e.name ? "on" : ""}`}
                    aria-current={openName === e.name ? "true" : undefined}
                    onClick={() => select(e.name)}
                  >
                    <span class="doc-item-head">
                      <strong>{e.name}</strong>
                      {!e.editable && <span class="badge">{e.scope} · read-only</span>}
                    </span>
                    {e.description && <span class="hint">{e.description}</span>}
                  </button>
                </li>
              ))}
            </ul>
          )}
        {error && !open && <p class="error" role="alert">{error}</p>}
      </section>
      {open && (
        <DocEditor
          key={open.isNew ? "new" : open.name}
          base={base}
          kind={kind}
          isNew={open.isNew}
          doc={open.isNew ? null : doc}
          loadError={error}
          onClose={() => setOpen(null)}
          onSaved={async (name) => {
            await load();
            await select(name);
          }}
          onDeleted={async () => {
            setOpen(null);
            await load();
          }}
        />
      )}
    </div>
  );
}

/** The plugins pi loads for sessions on the runner. */
function Plugins({ runnerId }: { runnerId: string }) {
  const base = `/api/runners/${encodeURIComponent(runnerId)}/plugins`;
  const [res, setRes] = useState<PluginsResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async (refresh = false) => {
    setError(null);
    try {
      setRes(
        await api<PluginsResponse>(refresh ? `${base}/refresh` : base, {
          method: refresh ? "POST" : "GET",
        }),
      );
    } catch (err) {
      setError((err as Error).message);
    }
  };
  useEffect(() => {
    load();
  }, [base]);
  return (
    <section class="card" aria-label="Plugins">
      <div class="card-head">
        <p class="hint">
          pi extensions in <code>~/.baton/extensions</code> and packages of its settings.json.
        </p>
        <button type="button" class="btn small" onClick={() => load(true)}>
          Refresh
        </button>
      </div>
      {res?.skipped && (
        <p class="hint warn" role="status">
          This runner runs with --no-plugins: its sessions load none of these.
        </p>
      )}
      {res === null && !error && <p class="muted">Loading…</p>}
      {res && res.plugins.length === 0 && <p class="muted">No plugins.</p>}
      {res && res.plugins.length > 0 && (
        <ul class="history">
          {res.plugins.map((p) => (
            <li key={p.path}>
              <div class="history-head">
                <strong>{p.name}</strong>
                <span class="badge">{p.scope}</span>
                {p.source !== "auto" && <span class="badge">{p.source}</span>}
              </div>
              <div class="hint path">{p.path}</div>
            </li>
          ))}
        </ul>
      )}
      {error && <p class="error" role="alert">{error}</p>}
    </section>
  );
}
