/**
 * Files for the composer: picked, dropped or pasted, each uploaded at once
 * into the session (`POST /api/sessions/{id}/attachments`) with its progress
 * shown on a chip that also removes it; the ids of those uploaded go with
 * the next message.
 *
 * @module
 */
import { useCallback, useRef, useState } from "preact/hooks";
import type {
  AttachmentInfo,
  UploadAttachmentsResponse,
} from "../../../../shared/attachments_api.ts";
import { Icon } from "../icon.tsx";

/** A file on its way or uploaded. */
export interface PendingAttachment {
  key: number;
  name: string;
  size: number;
  /** 0 to 1 while it uploads. */
  progress: number;
  uploaded: AttachmentInfo | null;
  error: string | null;
}

/** Uploads one file, reporting progress; resolves with what the relay stored. */
function uploadOne(
  sessionId: string,
  file: File,
  onProgress: (fraction: number) => void,
): Promise<AttachmentInfo> {
  return new Promise((resolve, reject) => {
    // fetch() reports no upload progress; XMLHttpRequest does.
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `/api/sessions/${encodeURIComponent(sessionId)}/attachments`);
    xhr.withCredentials = true;
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.onerror = () => reject(new Error("Cannot reach the relay. Check your connection."));
    xhr.onload = () => {
      let body: unknown = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // Not JSON: the status says enough.
      }
      if (xhr.status === 200) {
        const first = (body as UploadAttachmentsResponse | null)?.attachments?.[0];
        if (first) return resolve(first);
      }
      const message = (body as { error?: { message?: string } } | null)?.error?.message;
      reject(new Error(message ?? `The relay answered ${xhr.status}`));
    };
    const form = new FormData();
    form.append("file", file, file.name);
    xhr.send(form);
  });
}

/** The composer's attachments: add files, remove one, the ids ready to send, clear after. */
export function useAttachments(sessionId: string) {
  const [items, setItems] = useState<PendingAttachment[]>([]);
  const next = useRef(1);
  const add = useCallback((files: Iterable<File>) => {
    for (const file of files) {
      const key = next.current++;
      const item: PendingAttachment = {
        key,
        name: file.name || "pasted file",
        size: file.size,
        progress: 0,
        uploaded: null,
        error: null,
      };
      setItems((list) => [...list, item]);
      const patch = (p: Partial<PendingAttachment>) =>
        setItems((list) => list.map((i) => i.key === key ? { ...i, ...p } : i));
      uploadOne(sessionId, file, (progress) => patch({ progress })).then(
        (uploaded) => patch({ uploaded, progress: 1 }),
        (err) => patch({ error: (err as Error).message }),
      );
    }
  }, [sessionId]);
  const remove = useCallback((key: number) => {
    setItems((list) => list.filter((i) => i.key !== key));
  }, []);
  const clear = useCallback(() => setItems([]), []);
  const ready = items.filter((i) => i.uploaded).map((i) => i.uploaded!.attachmentId);
  const uploading = items.some((i) => !i.uploaded && !i.error);
  return { items, add, remove, clear, ready, uploading };
}

/** 1.2 MB, 340 KB, 12 B. */
export function formatSize(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${(bytes / 1000).toFixed(bytes < 10_000 ? 1 : 0)} KB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

/** One chip per file: name, size or progress or error, and a button that removes it. */
export function AttachmentChips(
  { items, onRemove }: { items: PendingAttachment[]; onRemove: (key: number) => void },
) {
  if (items.length === 0) return null;
  return (
    <ul class="attachment-chips" aria-label="Attached files">
      {items.map((i) => (
        <li key={i.key} class={i.error ? "chip failed" : i.uploaded ? "chip" : "chip uploading"}>
          <span class="chip-name" title={i.name}>{i.name}</span>
          <span class="chip-meta">
            {i.error
              ? <span role="alert">{i.error}</span>
              : i.uploaded
              ? formatSize(i.size)
              : `${Math.round(i.progress * 100)}%`}
          </span>
          {!i.uploaded && !i.error && (
            <progress
              class="chip-progress"
              max={1}
              value={i.progress}
              aria-label={`Uploading ${i.name}`}
            />
          )}
          <button
            type="button"
            class="icon-btn"
            aria-label={`Remove ${i.name}`}
            title="Remove"
            onClick={() =>
              onRemove(i.key)}
          >
            <Icon name="x" size={14} />
          </button>
        </li>
      ))}
    </ul>
  );
}

/** The paperclip: opens the file picker. */
export function AttachButton({ onFiles }: { onFiles: (files: File[]) => void }) {
  const input = useRef<HTMLInputElement>(null);
  return (
    <>
      <input
        ref={input}
        type="file"
        multiple
        hidden
        aria-hidden="true"
        tabIndex={-1}
        data-testid="attach-input"
        onChange={(e) => {
          const files = [...(e.currentTarget.files ?? [])];
          e.currentTarget.value = "";
          if (files.length) onFiles(files);
        }}
      />
      <button
        type="button"
        class="btn icon-only attach"
        aria-label="Attach files"
        title="Attach files (or drop or paste them)"
        onClick={() => input.current?.click()}
      >
        <Icon name="paperclip" />
      </button>
    </>
  );
}

/** Drag-and-drop handlers for the composer: files dropped on it are attached. */
export function dropHandlers(onFiles: (files: File[]) => void, setOver: (over: boolean) => void) {
  const hasFiles = (e: DragEvent) => [...(e.dataTransfer?.types ?? [])].includes("Files");
  return {
    onDragOver: (e: DragEvent) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      setOver(true);
    },
    onDragLeave: () => setOver(false),
    onDrop: (e: DragEvent) => {
      setOver(false);
      const files = [...(e.dataTransfer?.files ?? [])];
      if (!files.length) return;
      e.preventDefault();
      onFiles(files);
    },
  };
}

/** Files pasted into the message box (a screenshot from the clipboard). */
export function pastedFiles(e: ClipboardEvent): File[] {
  return [...(e.clipboardData?.files ?? [])];
}
