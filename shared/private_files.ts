/**
 * Owner-only modes for baton's folders on disk (`~/.baton`, the relay's data
 * folder): they hold credentials, every transcript and the conversations a
 * worker resumes from. Folders become 0700; files lose every group and other
 * bit (0644 and 0666 become 0600, an executable such as a service's script 0700).
 *
 * Not exported from `mod.ts`: the web client shares that module and has no
 * file system.
 *
 * @module
 */
import { join } from "node:path";

/** Folder mode. */
export const PRIVATE_DIR_MODE = 0o700;
/** Mode of a file baton creates. */
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Walks `root` (not following symbolic links) and takes group and other
 * access off everything in it; returns how many modes it changed. A missing
 * `root` changes nothing. Entries that vanish during the walk, and those of
 * another owner (EPERM), are skipped.
 */
export async function makePrivate(root: string): Promise<number> {
  let changed = 0;
  const fix = async (path: string, isDir: boolean): Promise<void> => {
    let info: Deno.FileInfo;
    try {
      info = await Deno.lstat(path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      throw err;
    }
    if (info.isSymlink || info.mode === null) return;
    const mode = info.mode & 0o777;
    // A file keeps its owner's bits (a read-only file stays read-only, a
    // script executable) and loses the rest.
    const want = isDir ? PRIVATE_DIR_MODE : mode & 0o700;
    if (mode === want) return;
    try {
      await Deno.chmod(path, want);
      changed++;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.PermissionDenied) {
        return;
      }
      throw err;
    }
  };
  const walk = async (dir: string): Promise<void> => {
    await fix(dir, true);
    let entries: Deno.DirEntry[];
    try {
      entries = await Array.fromAsync(Deno.readDir(dir));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.PermissionDenied) {
        return;
      }
      throw err;
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isSymlink) continue;
      if (e.isDirectory) await walk(path);
      else if (e.isFile) await fix(path, false);
    }
  };
  try {
    const info = await Deno.lstat(root);
    if (!info.isDirectory) return 0;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return 0;
    throw err;
  }
  await walk(root);
  return changed;
}

/**
 * Makes `file` (if it exists) and the folders from it up to `root`
 * owner-only: for files a library creates with a wider mode than asked (pi's
 * session files come out 0666 from `node:fs` under Deno, whatever the umask).
 */
export async function makePathPrivate(root: string, file: string): Promise<void> {
  const chmod = async (path: string, mode: number) => {
    try {
      const info = await Deno.lstat(path);
      if (info.isSymlink || info.mode === null || (info.mode & 0o777) === mode) return;
      await Deno.chmod(path, mode);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  };
  await chmod(file, PRIVATE_FILE_MODE);
  const top = root.replace(/\/+$/, "");
  let dir = file.slice(0, file.lastIndexOf("/"));
  while (dir.length >= top.length && dir.startsWith(top)) {
    await chmod(dir, PRIVATE_DIR_MODE);
    if (dir === top) break;
    dir = dir.slice(0, dir.lastIndexOf("/"));
  }
}
