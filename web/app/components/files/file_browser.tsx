/**
 * The runner's files beside a session: its folder listed (folders first),
 * a way up and into folders, a fuzzy search by name, and a read-only viewer
 * for the file picked. Everything is read through the relay
 * (`/api/runners/{id}/files`, `/search-files`, `/read-file`); the runner
 * refuses what is outside its workspace roots.
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import type {
  FileEntry,
  ListFilesResponse,
  SearchFilesResponse,
} from "../../../../shared/workspace_files_api.ts";
import { api } from "../../api.ts";
import { SidePanel } from "../side_panel.tsx";
import { FileViewer } from "./_file_viewer.tsx";
import { FileGlyph, humanSize, joinPath, parentOf } from "./_files.tsx";

/** The files panel of a session on `runnerId`, starting in `cwd`. */
export function FileBrowser(
  { runnerId, cwd, onClose }: { runnerId: string; cwd: string; onClose: () => void },
) {
  const [dir, setDir] = useState(cwd);
  const [list, setList] = useState<ListFilesResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [query, setQuery] = useState("");
  const [found, setFound] = useState<SearchFilesResponse | null>(null);
  const [open, setOpen] = useState<string | null>(null);

  useEffect(() => setDir(cwd), [cwd]);
  useEffect(() => {
    let live = true;
    setError(null);
    setList(null);
    api<ListFilesResponse>(`/api/runners/${runnerId}/files`, {
      method: "POST",
      body: { path: dir },
    }).then((l) => live && setList(l), (e) => live && setError(e.message));
    return () => live = false;
  }, [runnerId, dir]);

  // Search as the person types, a moment after the last key.
  const seq = useRef(0);
  useEffect(() => {
    const q = query.trim();
    if (!q) {
      setFound(null);
      return;
    }
    const mine = ++seq.current;
    const timer = setTimeout(() => {
      api<SearchFilesResponse>(`/api/runners/${runnerId}/search-files`, {
        method: "POST",
        body: { cwd, query: q, limit: 50 },
      }).then(
        (r) => mine === seq.current && setFound(r),
        (e) => mine === seq.current && setError(e.message),
      );
    }, 200);
    return () => clearTimeout(timer);
  }, [runnerId, cwd, query]);

  const shown = list?.path ?? dir;
  const relative = shown === cwd
    ? ""
    : shown.startsWith(cwd + "/")
    ? shown.slice(cwd.length + 1)
    : shown;
  const pick = (e: FileEntry) => {
    const path = joinPath(shown, e.name);
    if (e.type === "directory") setDir(path);
    else setOpen(path);
  };

  return (
    <SidePanel name="files" class="files-panel" icon="folder" title="Files" onClose={onClose}>
      <div class="files-search">
        <input
          type="search"
          placeholder="Find a file by name"
          aria-label="Find a file by name"
          value={query}
          onInput={(e) => setQuery(e.currentTarget.value)}
        />
      </div>
      {error && <p class="error" role="alert">{error}</p>}
      {found
        ? (
          <ul class="files-list" aria-label="Files found">
            {found.files.length === 0 && <li class="muted pad">No file name matches.</li>}
            {found.files.map((f) => (
              <li key={f}>
                <button type="button" class="file-row" onClick={() => setOpen(joinPath(cwd, f))}>
                  <FileGlyph dir={false} />
                  <span class="file-name">{f}</span>
                </button>
              </li>
            ))}
            {found.truncated && <li class="muted pad">Stopped early: refine the search.</li>}
          </ul>
        )
        : (
          <>
            <nav class="files-crumbs" aria-label="Folder">
              <button
                type="button"
                class="btn small"
                disabled={!list || parentOf(shown) === shown}
                onClick={() => setDir(parentOf(shown))}
                aria-label="Up one folder"
              >
                ..
              </button>
              <span class="files-where" title={shown}>
                <bdi dir="ltr">{relative ? `./${relative}` : shown}</bdi>
              </span>
              {shown !== cwd && (
                <button type="button" class="btn small" onClick={() => setDir(cwd)}>
                  Session folder
                </button>
              )}
            </nav>
            <ul class="files-list" aria-label="Folder contents" aria-busy={!list && !error}>
              {!list && !error && <li class="muted pad">Loading…</li>}
              {list?.files.length === 0 && <li class="muted pad">This folder is empty.</li>}
              {list?.files.map((e) => (
                <li key={e.name}>
                  <button type="button" class="file-row" onClick={() => pick(e)}>
                    <FileGlyph dir={e.type === "directory"} />
                    <span class="file-name">{e.name}</span>
                    {e.type === "file" && <span class="file-size">{humanSize(e.size)}</span>}
                  </button>
                </li>
              ))}
              {list?.truncated && (
                <li class="muted pad">Only the first {list.files.length} entries are shown.</li>
              )}
            </ul>
          </>
        )}
      {open && <FileViewer runnerId={runnerId} path={open} onClose={() => setOpen(null)} />}
    </SidePanel>
  );
}
