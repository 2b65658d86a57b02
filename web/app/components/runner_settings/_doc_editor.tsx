/**
 * The Markdown editor of one skill or agent definition: a textarea and its
 * preview (side by side on a wide screen, switched on a phone), save, and
 * delete after a confirmation.
 *
 * @module
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import {
  type CreateDocRequest,
  DOC_CONTENT_MAX_BYTES,
  type DocKind,
  docNameProblem,
  type DocResponse,
  type UpdateDocRequest,
} from "../../../../shared/skills_api.ts";
import { api } from "../../api.ts";
import { renderMarkdown } from "../../markdown.ts";
import { Icon } from "../icon.tsx";

/** A new document's starting text: the frontmatter pi needs (a skill without a description is skipped). */
function template(kind: DocKind, name: string): string {
  const n = name || (kind === "skills" ? "my-skill" : "my-agent");
  return kind === "skills"
    ? `---\nname: ${n}\ndescription: What this skill does and when to use it.\n---\n\n# ${n}\n\n` +
      `Steps the agent follows…\n`
    : `---\nname: ${n}\ndescription: What this agent is for.\ntools: read, grep, find, ls\n---\n\n` +
      `You are …\n`;
}

/** The frontmatter (shown as it is) and the Markdown after it (rendered). */
function splitFrontmatter(text: string): { front: string | null; body: string } {
  const m = text.match(/^---\r?\n([\s\S]*?)\r?\n---\r?\n?/);
  return m ? { front: m[1]!, body: text.slice(m[0].length) } : { front: null, body: text };
}

const encoder = new TextEncoder();

export function DocEditor(
  { base, kind, isNew, doc, loadError, onClose, onSaved, onDeleted }: {
    base: string;
    kind: DocKind;
    isNew: boolean;
    doc: DocResponse | null;
    loadError: string | null;
    onClose: () => void;
    onSaved: (name: string) => Promise<void>;
    onDeleted: () => Promise<void>;
  },
) {
  const [name, setName] = useState("");
  const [content, setContent] = useState(isNew ? template(kind, "") : "");
  const [touched, setTouched] = useState(false);
  const [mode, setMode] = useState<"edit" | "preview">("edit");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const [confirming, setConfirming] = useState(false);
  useEffect(() => {
    if (doc) setContent(doc.content);
  }, [doc]);

  const one = kind === "skills" ? "skill" : "agent definition";
  const readOnly = !isNew && doc !== null && !doc.editable;
  const nameProblem = isNew && name !== "" ? docNameProblem(name) : null;
  const bytes = useMemo(() => encoder.encode(content).length, [content]);
  const tooBig = bytes > DOC_CONTENT_MAX_BYTES;
  const preview = useMemo(() => {
    const { front, body } = splitFrontmatter(content);
    return { front, html: renderMarkdown(body) };
  }, [content]);

  const save = async () => {
    setBusy(true);
    setError(null);
    setSaved(false);
    try {
      if (isNew) {
        const body: CreateDocRequest = { name, content };
        await api(base, { method: "POST", body });
      } else {
        const body: UpdateDocRequest = { content };
        await api(`${base}/${encodeURIComponent(doc!.name)}`, { method: "PUT", body });
      }
      setSaved(true);
      setTouched(false);
      await onSaved(isNew ? name : doc!.name);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    setBusy(true);
    setError(null);
    try {
      await api(`${base}/${encodeURIComponent(doc!.name)}`, { method: "DELETE" });
      await onDeleted();
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };

  if (!isNew && doc === null) {
    return (
      <section class="doc-editor card">
        <button type="button" class="btn small link back" onClick={onClose}>‹ Back</button>
        {loadError ? <p class="error" role="alert">{loadError}</p> : <p class="muted">Loading…</p>}
      </section>
    );
  }

  return (
    <section class={`doc-editor card mode-${mode}`} aria-label={`Edit ${one}`}>
      <div class="card-head doc-editor-head">
        <button type="button" class="btn small link back" onClick={onClose}>‹ Back</button>
        {isNew
          ? (
            <label class="doc-name">
              Name
              <input
                value={name}
                placeholder={kind === "skills" ? "release-notes" : "reviewer"}
                maxLength={64}
                autoFocus
                aria-invalid={nameProblem !== null}
                onInput={(e) => {
                  const v = (e.target as HTMLInputElement).value;
                  setName(v);
                  if (!touched) setContent(template(kind, v));
                }}
              />
            </label>
          )
          : <h2 class="doc-title">{doc!.name}</h2>}
        <div class="tabs doc-mode" role="tablist" aria-label="Edit or preview">
          {(["edit", "preview"] as const).map((m) => (
            <button
              key={m}
              type="button"
              role="tab"
              aria-selected={mode === m}
              class={mode === m ? "on" : ""}
              onClick={() => setMode(m)}
            >
              {m === "edit" ? "Edit" : "Preview"}
            </button>
          ))}
        </div>
      </div>
      {nameProblem && <p class="hint warn">{nameProblem}</p>}
      {!isNew && <p class="hint path">{doc!.path}</p>}
      {readOnly && (
        <p class="hint warn">
          Read-only here: this {one} is found in the {doc!.scope} folders, not in the runner's own.
        </p>
      )}
      <div class="doc-panes">
        <textarea
          class="doc-text"
          aria-label={`${one} Markdown`}
          spellcheck={false}
          readOnly={readOnly}
          value={content}
          onInput={(e) => {
            setTouched(true);
            setSaved(false);
            setContent((e.target as HTMLTextAreaElement).value);
          }}
        />
        <div class="doc-preview" aria-label="Preview">
          {preview.front !== null && <pre class="frontmatter">{preview.front}</pre>}
          <div class="md" dangerouslySetInnerHTML={{ __html: preview.html }} />
        </div>
      </div>
      <div class="doc-actions">
        {!readOnly && (
          <button
            type="button"
            class="btn primary"
            disabled={busy || tooBig || (isNew && (name === "" || nameProblem !== null))}
            onClick={save}
          >
            <Icon name="check" /> {isNew ? "Create" : "Save"}
          </button>
        )}
        <span class={`hint ${tooBig ? "warn" : ""}`}>
          {(bytes / 1024).toFixed(1)} KiB{tooBig ? " — over the 256 KiB limit" : ""}
        </span>
        {saved && <span class="hint" role="status">Saved</span>}
        {!isNew && !readOnly && (
          confirming
            ? (
              <span class="push actions" role="group" aria-label="Confirm delete">
                <span class="hint">
                  Delete {doc!.name}
                  {kind === "skills" ? " and its folder" : ""}?
                </span>
                <button type="button" class="btn danger small" disabled={busy} onClick={remove}>
                  Delete
                </button>
                <button type="button" class="btn small" onClick={() => setConfirming(false)}>
                  Cancel
                </button>
              </span>
            )
            : (
              <button
                type="button"
                class="btn small push"
                onClick={() => setConfirming(true)}
              >
                <Icon name="trash" /> Delete
              </button>
            )
        )}
      </div>
      {error && <p class="error" role="alert">{error}</p>}
    </section>
  );
}
