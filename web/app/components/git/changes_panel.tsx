/**
 * The Changes panel beside a session: the repository's branch, the changed
 * files (staged and not, with + and − counts) kept live by the runner's
 * `status_changed`, stage and unstage, commit, push, switch branch; a file's
 * diff with review comments, sent to the agent as one message.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import {
  formatReview,
  type GitBranch,
  type GitFileChange,
  type GitStatus,
  type ServiceReplyMessage,
} from "../../../../shared/git_api.ts";
import { linkState } from "../../live.ts";
import { link } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { SidePanel } from "../side_panel.tsx";
import { type DiffTarget, DiffView } from "./_diff_view.tsx";
import { reviewOf } from "./_review.ts";

/** Wide enough for a side-by-side diff. */
const WIDE = "(min-width: 1000px)";

function useWide(): boolean {
  const [wide, setWide] = useState(() => matchMedia(WIDE).matches);
  useEffect(() => {
    const mq = matchMedia(WIDE);
    const on = () => setWide(mq.matches);
    mq.addEventListener("change", on);
    return () => mq.removeEventListener("change", on);
  }, []);
  return wide;
}

/** The panel for session `id`; `working` decides how a review is sent (steer or follow-up). */
export function ChangesPanel(
  { id, working, onClose }: { id: string; working: boolean; onClose: () => void },
) {
  const [status, setStatus] = useState<GitStatus | null>(null);
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const [file, setFile] = useState<DiffTarget | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const wide = useWide();
  const review = reviewOf(id);

  const take = (st: GitStatus) => {
    setStatus(st);
    setVersion((v) => v + 1);
  };
  // Read again after a reconnect: changes made meanwhile were pushed to nobody.
  const online = linkState.value === "open";
  useEffect(() => {
    if (!online) return;
    setError(null);
    link.service<GitStatus>(id, "status").then(take, (e) => setError(e.message));
  }, [id, online]);
  useEffect(() => {
    setStatus(null);
    const listeners = link.serviceListeners.get(id) ?? new Set();
    link.serviceListeners.set(id, listeners);
    const on = (m: ServiceReplyMessage) => {
      if ("op" in m && m.op === "status_changed") take(m.data as GitStatus);
    };
    listeners.add(on);
    return () => void listeners.delete(on);
  }, [id]);

  /** Runs an op that answers a status (or `{status}`), showing it busy and its error. */
  const run = async (label: string, op: string, data: Record<string, unknown> = {}) => {
    setBusy(label);
    setError(null);
    setNote(null);
    try {
      const r = await link.service<GitStatus | { status: GitStatus }>(
        id,
        op,
        data,
        (p) => setNote((p as { text?: string }).text ?? null),
      );
      take("status" in r && typeof r.status === "object" ? r.status : r as GitStatus);
      return r;
    } catch (e) {
      setError((e as Error).message);
      return null;
    } finally {
      setBusy(null);
    }
  };

  const sendReview = async () => {
    setBusy("review");
    setError(null);
    try {
      await link.input(id, working ? "steer" : "followUp", formatReview(review.value));
      review.value = [];
      setNote(working ? "Review sent as a steer." : "Review sent to the agent.");
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(null);
    }
  };

  return (
    <SidePanel
      name="changes"
      class={`changes ${file ? "diff-open" : ""}`}
      icon="branch"
      title="Changes"
      onClose={onClose}
    >
      {review.value.length > 0 && (
        <div class="review-bar" role="region" aria-label="Review">
          <span>
            {review.value.length} comment{review.value.length === 1 ? "" : "s"}
          </span>
          <button
            type="button"
            class="btn primary small"
            disabled={busy !== null}
            onClick={sendReview}
          >
            <Icon name="send" size={14} /> Send review
          </button>
          <button type="button" class="btn small" onClick={() => review.value = []}>
            Discard
          </button>
        </div>
      )}
      {error && <p class="error pad" role="alert">{error}</p>}
      {note && <p class="hint pad" role="status">{note}</p>}
      <div class="panel-body">
        {!status && !error && <p class="muted" aria-busy="true">Reading the repository…</p>}
        {status && file && (
          <>
            <div class="diff-head">
              <button type="button" class="btn small" onClick={() => setFile(null)}>
                <Icon name="chevron" size={14} /> All changes
              </button>
              <span class="diff-path" title={file.path}>
                {file.origPath ? `${file.origPath} → ` : ""}
                {file.path} <span class="muted">({file.staged ? "staged" : "not staged"})</span>
              </span>
            </div>
            <p class="hint">Tap a line number, then another, to comment on those lines.</p>
            <DiffView id={id} file={file} wide={wide} version={version} />
          </>
        )}
        {status && !file && (
          <StatusView status={status} id={id} busy={busy} run={run} open={setFile} />
        )}
      </div>
    </SidePanel>
  );
}

type Run = (
  label: string,
  op: string,
  data?: Record<string, unknown>,
) => Promise<unknown>;

function StatusView(
  { status, id, busy, run, open }: {
    status: GitStatus;
    id: string;
    busy: string | null;
    run: Run;
    open: (f: DiffTarget) => void;
  },
) {
  const [message, setMessage] = useState("");
  const unstaged = [...status.conflicted, ...status.unstaged, ...status.untracked];
  const clean = status.staged.length === 0 && unstaged.length === 0;
  return (
    <>
      <BranchBar status={status} id={id} busy={busy} run={run} />
      {clean && <p class="muted">No changes: the work tree matches the last commit.</p>}
      <FileList
        title="Staged"
        files={status.staged}
        staged
        busy={busy}
        action={(f) => run(`unstage ${f.path}`, "unstage", { paths: pathsOf(f) })}
        open={open}
      />
      <FileList
        title="Changes"
        files={unstaged}
        staged={false}
        busy={busy}
        action={(f) => run(`stage ${f.path}`, "stage", { paths: pathsOf(f) })}
        open={open}
      />
      {status.omitted > 0 && <p class="hint">{status.omitted} more files are not listed.</p>}
      <form
        class="commit-form"
        onSubmit={async (e) => {
          e.preventDefault();
          if (await run("commit", "commit", { message })) setMessage("");
        }}
      >
        <label>
          <span class="sr-only">Commit message</span>
          <textarea
            rows={2}
            placeholder="Commit message"
            value={message}
            onInput={(e) => setMessage(e.currentTarget.value)}
          />
        </label>
        <div class="row-buttons">
          <button
            type="submit"
            class="btn primary small"
            disabled={busy !== null || !message.trim() || status.staged.length === 0}
          >
            <Icon name="check" size={14} /> Commit
          </button>
          <button
            type="button"
            class="btn small"
            disabled={busy !== null || !status.branch}
            onClick={() => run("push", "push")}
          >
            {busy === "push" && <span class="spinner" aria-hidden="true" />}
            Push{status.ahead ? ` (${status.ahead})` : ""}
          </button>
        </div>
      </form>
    </>
  );
}

function pathsOf(f: GitFileChange): string[] {
  return f.origPath ? [f.path, f.origPath] : [f.path];
}

function BranchBar(
  { status, id, busy, run }: { status: GitStatus; id: string; busy: string | null; run: Run },
) {
  const [branches, setBranches] = useState<GitBranch[] | null>(null);
  const load = () =>
    link.service<{ branches: GitBranch[] }>(id, "branches").then(
      (r) => setBranches(r.branches.filter((b) => !b.remote)),
      () => setBranches([]),
    );
  return (
    <div class="branch-bar">
      <label>
        <span class="sr-only">Branch</span>
        <select
          value={status.branch ?? ""}
          disabled={busy !== null}
          onFocus={() => branches === null && load()}
          onPointerDown={() => branches === null && load()}
          onChange={(e) => run(`switch`, "checkout", { branch: e.currentTarget.value })}
        >
          {!status.branch && <option value="">(detached)</option>}
          {(branches ?? []).filter((b) => b.name !== status.branch).map((b) => (
            <option key={b.name} value={b.name}>{b.name}</option>
          ))}
          {status.branch && <option value={status.branch}>{status.branch}</option>}
        </select>
      </label>
      <span class="muted small" title={status.upstream ?? "No upstream"}>
        {status.upstream ? `↑${status.ahead} ↓${status.behind}` : "no upstream"}
      </span>
    </div>
  );
}

const LETTER: Record<string, string> = {
  M: "modified",
  A: "added",
  D: "deleted",
  R: "renamed",
  C: "copied",
  T: "type changed",
  U: "conflict",
  "?": "new",
};

function FileList(
  { title, files, staged, busy, action, open }: {
    title: string;
    files: GitFileChange[];
    staged: boolean;
    busy: string | null;
    action: (f: GitFileChange) => void;
    open: (f: DiffTarget) => void;
  },
) {
  if (files.length === 0) return null;
  return (
    <section class="file-list" aria-label={title}>
      <h3>{title} ({files.length})</h3>
      <ul>
        {files.map((f) => (
          <li key={`${f.status}:${f.path}`}>
            <span class={`letter s-${f.status === "?" ? "N" : f.status}`} title={LETTER[f.status]}>
              {f.status === "?" ? "N" : f.status}
            </span>
            <button
              type="button"
              class="file-name"
              title={f.origPath ? `${f.origPath} → ${f.path}` : f.path}
              onClick={() =>
                open({ path: f.path, staged, ...(f.origPath ? { origPath: f.origPath } : {}) })}
            >
              {f.path}
            </button>
            <span class="counts">
              {f.binary ? <span class="muted">bin</span> : (
                <>
                  {f.additions !== undefined && <span class="plus">+{f.additions}</span>}
                  {f.deletions !== undefined && <span class="minus">−{f.deletions}</span>}
                </>
              )}
            </span>
            {f.status !== "U" && (
              <button
                type="button"
                class="btn small"
                disabled={busy !== null}
                aria-label={`${staged ? "Unstage" : "Stage"} ${f.path}`}
                onClick={() => action(f)}
              >
                {staged ? "Unstage" : "Stage"}
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
