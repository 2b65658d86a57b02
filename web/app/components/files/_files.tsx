/** Small helpers of the files panel. */

/** `dir` joined with `name` (runner paths: `/`, or `\` on a Windows runner). */
export function joinPath(dir: string, name: string): string {
  const sep = dir.includes("\\") && !dir.includes("/") ? "\\" : "/";
  return dir.endsWith(sep) ? dir + name : `${dir}${sep}${name}`;
}

/** The folder holding `path` (a root is its own parent). */
export function parentOf(path: string): string {
  const trimmed = path.replace(/[\\/]+$/, "");
  const at = Math.max(trimmed.lastIndexOf("/"), trimmed.lastIndexOf("\\"));
  if (at <= 0) return trimmed.startsWith("/") ? "/" : path;
  const parent = trimmed.slice(0, at);
  return /^[A-Za-z]:$/.test(parent) ? parent + "\\" : parent;
}

/** 1536 → "1.5 KB". */
export function humanSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let n = bytes / 1024;
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return `${n < 10 ? n.toFixed(1) : Math.round(n)} ${units[u]}`;
}

const IMAGE_TYPES: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  avif: "image/avif",
  bmp: "image/bmp",
  ico: "image/x-icon",
  // In an <img>, an SVG's scripts do not run.
  svg: "image/svg+xml",
};

/** The image type of a file name, or null when it is not an image the viewer shows. */
export function imageType(name: string): string | null {
  const ext = name.toLowerCase().match(/\.([a-z0-9]+)$/)?.[1];
  return ext ? IMAGE_TYPES[ext] ?? null : null;
}

/** A folder or a file, drawn like the app's icons. */
export function FileGlyph({ dir }: { dir: boolean }) {
  return (
    <svg
      class="icon"
      width="16"
      height="16"
      viewBox="0 0 24 24"
      fill="none"
      stroke="currentColor"
      stroke-width="2"
      stroke-linecap="round"
      stroke-linejoin="round"
      aria-hidden="true"
    >
      <path
        d={dir
          ? "M3 7a2 2 0 0 1 2-2h4l2 2h8a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2z"
          : "M6 3h8l4 4v14H6zM14 3v4h4"}
      />
    </svg>
  );
}
