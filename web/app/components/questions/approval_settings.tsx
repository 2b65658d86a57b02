/**
 * Approval policies and collab mode: a runner's policy (a tab of its
 * settings page), and a session's own policy and collab switch (a panel of
 * its header's menu). docs/questions.md says what each allows.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type {
  ApprovalPolicy,
  CollabResponse,
  RunnerApprovalsResponse,
  SessionApprovalsResponse,
} from "../../../../shared/questions_api.ts";
import { api } from "../../api.ts";
import { Icon } from "../icon.tsx";
import { SidePanel } from "../side_panel.tsx";

const lines = (s: string) => s.split("\n").map((l) => l.trim()).filter(Boolean);

/** A policy's fields: mode, tools and command patterns (one per line). */
function PolicyForm(
  { idPrefix, value, onSave, extra, saving }: {
    idPrefix: string;
    value: ApprovalPolicy;
    onSave: (p: ApprovalPolicy) => void;
    extra?: preact.ComponentChildren;
    saving: boolean;
  },
) {
  const [mode, setMode] = useState(value.mode);
  const [tools, setTools] = useState(value.tools.join("\n"));
  const [commands, setCommands] = useState(value.commands.join("\n"));
  return (
    <form
      class="policy-form"
      onSubmit={(e) => {
        e.preventDefault();
        onSave({ mode, tools: lines(tools), commands: lines(commands) });
      }}
    >
      <fieldset class="seg-field">
        <legend>When the agent calls a tool</legend>
        <label>
          <input
            type="radio"
            name={`${idPrefix}-mode`}
            checked={mode === "auto"}
            onChange={() => setMode("auto")}
          />{" "}
          Run it (auto)
        </label>
        <label>
          <input
            type="radio"
            name={`${idPrefix}-mode`}
            checked={mode === "ask"}
            onChange={() => setMode("ask")}
          />{" "}
          Ask me first for the ones below (ask)
        </label>
      </fieldset>
      {mode === "ask" && (
        <>
          <label for={`${idPrefix}-tools`}>Tools (one per line; * for every tool)</label>
          <textarea
            id={`${idPrefix}-tools`}
            rows={2}
            value={tools}
            placeholder="write"
            onInput={(e) => setTools(e.currentTarget.value)}
          />
          <label for={`${idPrefix}-commands`}>Bash commands (globs, one per line)</label>
          <textarea
            id={`${idPrefix}-commands`}
            rows={2}
            value={commands}
            placeholder="git push*"
            onInput={(e) => setCommands(e.currentTarget.value)}
          />
          <p class="hint">
            Both empty: every tool call asks. Patterns are a convenience: list <code>bash</code>
            {" "}
            as a tool to hold every command.
          </p>
        </>
      )}
      {extra}
      <button type="submit" class="btn primary" disabled={saving}>
        {saving ? "Saving…" : "Save"}
      </button>
    </form>
  );
}

/** The runner's approval policy (its settings page). */
export function RunnerApprovals({ runnerId }: { runnerId: string }) {
  const [policy, setPolicy] = useState<ApprovalPolicy | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState(false);
  useEffect(() => {
    api<RunnerApprovalsResponse>(`/api/runners/${runnerId}/approvals`)
      .then((r) => setPolicy(r.policy), (e) => setError((e as Error).message));
  }, [runnerId]);
  const save = async (p: ApprovalPolicy) => {
    setSaving(true);
    setError(null);
    setSaved(false);
    try {
      setPolicy(
        (await api<RunnerApprovalsResponse>(`/api/runners/${runnerId}/approvals`, {
          method: "PUT",
          body: p,
        })).policy,
      );
      setSaved(true);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setSaving(false);
    }
  };
  return (
    <section class="card" aria-label="Approvals">
      <div class="card-head">
        <h2>
          <Icon name="shield" /> Approvals
        </h2>
      </div>
      <p class="hint">
        Sessions on this runner without a policy of their own follow this one, running sessions
        included. A held tool call waits for Approve or Deny in the session (and on your phone, in
        collab mode).
      </p>
      {policy && (
        <PolicyForm
          key={JSON.stringify(policy)}
          idPrefix={`runner-${runnerId}`}
          value={policy}
          onSave={save}
          saving={saving}
        />
      )}
      {saved && <p class="hint" role="status">Saved.</p>}
      {error && <p class="error" role="alert">{error}</p>}
    </section>
  );
}

/** A session's collab switch and approval policy: a side panel opened from its header. */
export function SessionAgentSettings({ id, onClose }: { id: string; onClose: () => void }) {
  const [collab, setCollab] = useState<boolean | null>(null);
  const [policies, setPolicies] = useState<SessionApprovalsResponse | null>(null);
  const [own, setOwn] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  useEffect(() => {
    api<CollabResponse>(`/api/sessions/${id}/collab`)
      .then((r) => setCollab(r.collab), (e) => setError((e as Error).message));
    api<SessionApprovalsResponse>(`/api/sessions/${id}/approvals`).then((r) => {
      setPolicies(r);
      setOwn(r.policy !== null);
    }, (e) => setError((e as Error).message));
  }, [id]);
  const toggleCollab = async (enabled: boolean) => {
    setError(null);
    try {
      setCollab(
        (await api<CollabResponse>(`/api/sessions/${id}/collab`, {
          method: "PUT",
          body: { enabled },
        })).collab,
      );
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const savePolicy = async (policy: ApprovalPolicy | null) => {
    setSaving(true);
    setError(null);
    try {
      const r = await api<SessionApprovalsResponse>(`/api/sessions/${id}/approvals`, {
        method: "PUT",
        body: { policy },
      });
      setPolicies(r);
      setOwn(r.policy !== null);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setSaving(false);
    }
  };
  return (
    <SidePanel
      name="agent-settings"
      class="agent-settings"
      icon="shield"
      title="Approvals"
      onClose={onClose}
    >
      <div class="panel-body">
        <label class="switch-row">
          <input
            type="checkbox"
            checked={collab === true}
            disabled={collab === null}
            onChange={(e) => toggleCollab(e.currentTarget.checked)}
          />{" "}
          <span>
            <strong>Collab mode</strong>
            <span class="hint">
              A notification's buttons and reply may answer this session's questions and approve or
              deny its tool calls, from the lock screen.
            </span>
          </span>
        </label>
        {policies && (
          <>
            <label class="switch-row">
              <input
                type="checkbox"
                checked={own}
                onChange={(e) => {
                  const on = e.currentTarget.checked;
                  setOwn(on);
                  if (!on && policies.policy !== null) savePolicy(null);
                }}
              />{" "}
              <span>
                <strong>A policy of its own</strong>
                <span class="hint">
                  Off: it follows the runner's ({policies.runner.mode === "auto" ? "auto" : "ask"}).
                </span>
              </span>
            </label>
            {own && (
              <PolicyForm
                key={JSON.stringify(policies.policy)}
                idPrefix={`session-${id}`}
                value={policies.policy ?? policies.runner}
                onSave={savePolicy}
                saving={saving}
              />
            )}
          </>
        )}
        {error && <p class="error" role="alert">{error}</p>}
      </div>
    </SidePanel>
  );
}
