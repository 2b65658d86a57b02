/**
 * One file of the runner, read-only, in a dialog (the whole screen on a
 * phone): text with line numbers, images drawn, and a plain word for a file
 * too large or not text.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type { ReadFileResponse } from "../../../../shared/workspace_files_api.ts";
import { api, ApiError } from "../../api.ts";
import { baseName } from "../../format.ts";
import { Icon } from "../icon.tsx";
import { humanSize, imageType } from "./_files.tsx";

type Shown =
  | { kind: "loading" }
  | { kind: "text"; text: string; size: number }
  | { kind: "image"; url: string; size: number }
  | { kind: "refused"; title: string; detail: string };

/** Reads `path` on `runnerId` and shows it. */
export function FileViewer(
  { runnerId, path, onClose }: { runnerId: string; path: string; onClose: () => void },
) {
  const [shown, setShown] = useState<Shown>({ kind: "loading" });
  const image = imageType(path);

  useEffect(() => {
    let live = true;
    setShown({ kind: "loading" });
    api<ReadFileResponse>(`/api/runners/${runnerId}/read-file`, {
      method: "POST",
      body: { path, encoding: image ? "base64" : "utf8" },
    }).then((r) => {
      if (!live) return;
      setShown(
        image
          ? { kind: "image", url: `data:${image};base64,${r.content}`, size: r.size }
          : { kind: "text", text: r.content, size: r.size },
      );
    }, (e) => live && setShown(refusal(e, image !== null)));
    return () => live = false;
  }, [runnerId, path]);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => e.key === "Escape" && onClose();
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, [onClose]);

  return (
    <div class="dialog-wrap file-viewer-wrap" onClick={onClose}>
      <div
        class="card dialog file-viewer"
        role="dialog"
        aria-modal="true"
        aria-labelledby="file-viewer-title"
        onClick={(e) => e.stopPropagation()}
      >
        <div class="panel-head file-viewer-head">
          <h2 id="file-viewer-title" title={path}>
            {baseName(path)}
            {"size" in shown && <span class="muted file-size">{humanSize(shown.size)}</span>}
            <span class="muted file-readonly">read-only</span>
          </h2>
          <button
            type="button"
            class="icon-btn"
            aria-label="Close the file"
            onClick={onClose}
            autofocus
          >
            <Icon name="x" />
          </button>
        </div>
        <p class="muted file-path">{path}</p>
        {shown.kind === "loading" && <p class="muted pad" aria-busy="true">Reading…</p>}
        {shown.kind === "text" && <CodeView text={shown.text} />}
        {shown.kind === "image" && (
          <div class="file-image">
            <img src={shown.url} alt={baseName(path)} />
          </div>
        )}
        {shown.kind === "refused" && (
          <div class="file-refused" role="status">
            <Icon name="alert" size={22} />
            <p>
              <strong>{shown.title}</strong>
              <br />
              {shown.detail}
            </p>
          </div>
        )}
      </div>
    </div>
  );
}

/** Text with a gutter of line numbers; long lines scroll sideways rather than wrap. */
function CodeView({ text }: { text: string }) {
  const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
  const gutter = lines.map((_, i) => i + 1).join("\n");
  return (
    <div class="code-view" tabIndex={0} aria-label="File content">
      <pre class="code-gutter" aria-hidden="true">{gutter}</pre>
      <pre class="code-text">{lines.join("\n")}</pre>
    </div>
  );
}

function refusal(e: unknown, image: boolean): Shown {
  if (e instanceof ApiError && e.code === "file_too_large") {
    return {
      kind: "refused",
      title: "Too large to show",
      detail: image
        ? "Images up to 10 MB are shown here. " + e.message
        : "Text files up to 512 KB are shown here. " + e.message,
    };
  }
  if (e instanceof ApiError && e.code === "binary_file") {
    return {
      kind: "refused",
      title: "Not a text file",
      detail: "This file holds binary data, so it is not shown.",
    };
  }
  return {
    kind: "refused",
    title: "Cannot read this file",
    detail: e instanceof Error ? e.message : String(e),
  };
}
