import { join, resolve } from "node:path";
import { pathsOf } from "./platform/platform.ts";

type Os = typeof Deno.build.os;

/** A spawn or file request for a path the runner will not use. */
export class PathRejectedError extends Error {
  constructor(
    readonly code: "cwd_outside_roots" | "cwd_not_found" | "bad_request",
    message: string,
  ) {
    super(message);
    this.name = "PathRejectedError";
  }
}

/** Strips trailing separators, keeping a bare root (`/` or `C:\`). */
export function stripTrailingSlashes(p: string, os: Os = Deno.build.os): string {
  const stripped = p.replace(/[\\/]+$/, "");
  if (stripped === "") return os === "windows" ? p : "/";
  if (/^[A-Za-z]:$/.test(stripped)) return stripped + "\\";
  return stripped;
}

/**
 * Normalises configured roots: `~` expanded, made absolute, symlinks resolved
 * (a root that does not exist yet is kept as written), trailing slashes gone.
 */
export async function resolveRoots(
  roots: string[],
  home: string,
  os: Os = Deno.build.os,
): Promise<string[]> {
  const out: string[] = [];
  for (const r of roots) {
    const abs = pathsOf({ os }).resolve(expandHome(r, home, os));
    let real = abs;
    try {
      real = await Deno.realPath(abs);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    out.push(stripTrailingSlashes(real, os));
  }
  return out;
}

/**
 * A Windows path in one spelling, for comparison: `/` as `\`, the
 * long-path prefix gone (`\\?\C:\x` is `C:\x`, `\\?\UNC\srv\share` is
 * `\\srv\share`), lower case (NTFS compares names without case).
 */
export function windowsKey(p: string): string {
  return p.replace(/\//g, "\\").replace(/^\\\\\?\\UNC\\/i, "\\\\")
    .replace(/^\\\\\?\\(?=[a-z]:)/i, "").toLowerCase();
}

/** Whether `path` (a real path) equals `root` or lies inside it. */
export function isWithin(path: string, root: string, os: Os): boolean {
  const fold = (s: string) => os === "windows" ? windowsKey(s) : s;
  const p = stripTrailingSlashes(fold(path), os);
  const r = stripTrailingSlashes(fold(root), os);
  if (r === "/" || /^[a-z]:\\$/i.test(r)) return p.startsWith(r);
  const s = os === "windows" ? "\\" : "/";
  return p === r || p.startsWith(r + s);
}

/**
 * Resolves a requested working directory to its real path and checks it
 * against the roots (null: any folder). `..` and symlinks are resolved
 * before the comparison, so neither can escape a root.
 */
export async function checkCwd(
  cwd: string,
  roots: string[] | null,
  options: { home: string; os?: Os },
): Promise<string> {
  const os = options.os ?? Deno.build.os;
  const expanded = expandHome(cwd.trim(), options.home, os);
  if (!pathsOf({ os }).isAbsolute(expanded)) {
    throw new PathRejectedError("bad_request", `Folder must be an absolute path: '${cwd}'`);
  }
  let real: string;
  try {
    real = await Deno.realPath(expanded);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new PathRejectedError("cwd_not_found", `Folder does not exist: '${cwd}'`);
    }
    if (err instanceof Deno.errors.PermissionDenied) {
      throw new PathRejectedError("cwd_not_found", `Folder is not readable: '${cwd}'`);
    }
    throw err;
  }
  const info = await Deno.stat(real);
  if (!info.isDirectory) {
    throw new PathRejectedError("bad_request", `Not a folder: '${cwd}'`);
  }
  if (roots !== null && !roots.some((r) => isWithin(real, r, os))) {
    throw new PathRejectedError(
      "cwd_outside_roots",
      `Folder is outside the runner's workspace roots: '${cwd}' (roots: ${roots.join(", ")})`,
    );
  }
  return real;
}

/** The folder a session gets when the spawn names none: the first root, else home. */
export function defaultCwd(roots: string[] | null, home: string): string {
  return roots?.[0] ?? home;
}

/** `~` and `~/...` (`~\...` on Windows) made absolute against `home`; anything else as given. */
export function expandHome(p: string, home: string, os: Os = Deno.build.os): string {
  if (p === "~") return home;
  if (p.startsWith("~/") || (os === "windows" && p.startsWith("~\\"))) {
    return pathsOf({ os }).join(home, p.slice(2));
  }
  return p;
}

/**
 * The real path of `path` (absolute), which need not exist: its deepest
 * existing ancestor's real path followed by the rest. Symlinks and `..` are
 * resolved the way {@linkcode checkCwd} resolves a cwd, so a file tool's
 * target is compared with the sandbox's lists as what it really is. A
 * symlink whose target does not exist yet is followed by its text: a write
 * through it creates that target (`link -> ~/.bash_aliases`).
 */
export async function realPathOf(path: string): Promise<string> {
  let head = resolve(path);
  const tail: string[] = [];
  let hops = 0;
  for (;;) {
    try {
      const real = await Deno.realPath(head);
      return tail.length ? join(real, ...tail.reverse()) : real;
    } catch (err) {
      if (
        !(err instanceof Deno.errors.NotFound) && !(err instanceof Deno.errors.NotADirectory) &&
        !(err instanceof Deno.errors.PermissionDenied)
      ) throw err;
      const link = await Deno.readLink(head).catch(() => null);
      if (link !== null) {
        if (++hops > 40) throw new Deno.errors.FilesystemLoop(`Too many symlinks: '${path}'`);
        // /proc's links lead to what a process has open, not to a path: a memory-only or
        // deleted file's text (`/memfd:x (deleted)`) names nothing that could be checked.
        if (Deno.build.os === "linux" && isWithin(head, "/proc", "linux")) {
          throw new Deno.errors.NotFound(
            `'${path}' leads through /proc to '${link}', which is not a file on disk`,
          );
        }
        // A relative link is read against its folder's real path, as the kernel reads it.
        head = resolve(await realPathOf(resolve(head, "..")), link);
        continue;
      }
      const parent = resolve(head, "..");
      if (parent === head) return path;
      tail.push(head.slice(parent.length).replace(/^[\\/]/, ""));
      head = parent;
    }
  }
}
