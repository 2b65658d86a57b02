/**
 * The Sandbox tab of a runner's settings page: whether the agent sandbox is
 * enforced there, its recent violations, and a form for the global config's
 * mode and lists (`PUT sandbox-config`; docs/sandbox.md).
 *
 * @module
 */
import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";
import {
  SANDBOX_MODES,
  type SandboxConfigSaved,
  type SandboxMode,
  type SandboxStatus,
} from "../../../../shared/sandbox_api.ts";
import { api } from "../../api.ts";
import { Icon } from "../icon.tsx";

/** The lists the form edits: where they live in the config and what they mean. */
const LISTS = [
  ["filesystem", "denyRead", "Also hide from agents", "~/secrets"],
  ["filesystem", "allowWrite", "Writable folders (empty: the session's folder and /tmp)", "."],
  ["filesystem", "denyWrite", "Also keep from writes", "config/prod.json"],
  ["network", "allowedDomains", "Allowed domains (full mode; empty: none)", "*.github.com"],
  ["network", "deniedDomains", "Denied domains", "evil.example"],
] as const;
type ListKey = typeof LISTS[number][1];

const MODE_HINT: Record<SandboxMode, string> = {
  none: "No sandbox: agents can do anything your user can",
  basic: "Secrets and other folders protected, network open (default)",
  full: "As basic, and the network closed except allowed domains",
};

function listOf(config: SandboxStatus["config"], group: string, key: string): string {
  const g = config[group] as Record<string, unknown> | undefined;
  const v = g?.[key];
  return Array.isArray(v) ? v.join("\n") : "";
}

/** The tab: status, violations, config form. */
export function SandboxPanel({ runnerId }: { runnerId: string }) {
  const url = `/api/runners/${encodeURIComponent(runnerId)}`;
  const [st, setSt] = useState<SandboxStatus | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [mode, setMode] = useState<SandboxMode>("basic");
  const [lists, setLists] = useState<Record<ListKey, string>>(
    Object.fromEntries(LISTS.map(([, k]) => [k, ""])) as Record<ListKey, string>,
  );

  const load = async () => {
    setError(null);
    try {
      const s = await api<SandboxStatus>(`${url}/sandbox-status`);
      setSt(s);
      setMode((s.config.mode as SandboxMode | undefined) ?? "basic");
      setLists(
        Object.fromEntries(LISTS.map(([g, k]) => [k, listOf(s.config, g, k)])) as Record<
          ListKey,
          string
        >,
      );
    } catch (err) {
      setError((err as Error).message);
    }
  };
  useEffect(() => {
    load();
  }, [url]);

  const save = async (ev: Event) => {
    ev.preventDefault();
    setError(null);
    setSaved(null);
    const patch: Record<string, Record<string, unknown> | string> = {
      mode,
      filesystem: {},
      network: {},
    };
    for (const [g, k] of LISTS) {
      const entries = lists[k].split("\n").map((l) => l.trim()).filter((l) => l !== "");
      // An empty list removes the key (the preset applies), except where [] means "nothing".
      (patch[g] as Record<string, unknown>)[k] = entries.length ? entries : null;
    }
    try {
      const res = await api<SandboxConfigSaved>(`${url}/sandbox-config`, {
        method: "PUT",
        body: patch,
      });
      setSaved(res.message);
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };

  if (!st) {
    return error ? <p class="error" role="alert">{error}</p> : <p class="muted">Loading…</p>;
  }
  return (
    <div class="sandbox-panel stack">
      <section class="card" aria-labelledby="sandbox-status-title">
        <h2 id="sandbox-status-title">
          <Icon name="shield" /> Status
        </h2>
        <dl class="sandbox-facts">
          <dt>Mode</dt>
          <dd>{st.mode}</dd>
          <dt>Enforced</dt>
          <dd>
            <span class={`badge ${st.active ? "" : "off"}`}>
              {st.active ? "active" : "inactive"}
            </span>
            {st.inactiveReason && <span class="hint">{st.inactiveReason}</span>}
          </dd>
          <dt>Platform</dt>
          <dd>{st.platform}</dd>
          {st.hiddenVariables.length > 0 && (
            <>
              <dt>Kept from tools</dt>
              <dd>
                <span>
                  {st.hiddenVariables.map((k, i) => (
                    <Fragment key={k}>
                      {i > 0 && ", "}
                      <code>{k}</code>
                    </Fragment>
                  ))}
                </span>
                <span class="hint">
                  Provider keys the agent's shell, hooks and MCP servers do not get; give them back
                  with <code>exposeProviderKeys</code> in <code>~/.baton/config.json</code>.
                </span>
              </dd>
            </>
          )}
          <dt>Violations</dt>
          <dd>{st.violations} since the runner started</dd>
        </dl>
        {st.recentViolations.length > 0 && (
          <ul class="sandbox-violations" aria-label="Recent violations">
            {st.recentViolations.map((v, i) => (
              <li key={`${v.timestamp}-${i}`}>
                <span class="badge">{v.operation}</span> <code>{v.target}</code>
                <span class="hint">
                  {new Date(v.timestamp).toLocaleString()} · {v.reason}
                </span>
              </li>
            ))}
          </ul>
        )}
        <p class="hint">
          In a session, type <code>/sandbox</code>, <code>/sandbox violations</code> or{" "}
          <code>/sandbox config</code>.
        </p>
      </section>
      <form class="card form-grid" onSubmit={save} aria-labelledby="sandbox-config-title">
        <h2 id="sandbox-config-title" class="span2">Global config</h2>
        <label class="span2">
          Mode
          <select
            value={mode}
            onChange={(e) => setMode(e.currentTarget.value as SandboxMode)}
          >
            {SANDBOX_MODES.map((m) => <option key={m} value={m}>{m}</option>)}
          </select>
          <span class="hint">{MODE_HINT[mode]}</span>
        </label>
        {LISTS.map(([, k, label, example]) => (
          <label key={k}>
            {label}
            <textarea
              rows={3}
              value={lists[k]}
              placeholder={`One per line, e.g. ${example}`}
              onInput={(e) => setLists({ ...lists, [k]: e.currentTarget.value })}
            />
          </label>
        ))}
        <p class="hint span2">
          Always protected in basic and full: ~/.ssh, ~/.aws, ~/.gnupg, cloud and browser
          credentials, .env files and baton's own keys. A project's .baton/config.json may only
          tighten this. Changes apply to sessions started from now on.
        </p>
        {error && <p class="error span2" role="alert">{error}</p>}
        {saved && <p class="span2" role="status">{saved}</p>}
        <div class="span2 actions">
          <button class="btn primary" type="submit">Save</button>
        </div>
      </form>
    </div>
  );
}
