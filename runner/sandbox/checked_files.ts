/**
 * pi's `read`, `write` and `edit` with file operations that check the file
 * the kernel opened, not the path string the gate checked a moment before.
 * The gate (session.ts) resolves a path and lets the tool run; pi then opens
 * the path again, and a symlink the agent swaps in between (a detached loop
 * of its bash, or a parallel tool call) would be followed to `~/.ssh`.
 *
 * On Linux a descriptor names what it opened (`/proc/self/fd/N`), so:
 * - reads open first and check the descriptor's path before reading a byte;
 * - writes open the folder, check the folder's real path with the file's
 *   name, and create or open the file relative to that descriptor without
 *   following a final symlink (a link is followed one hop at a time, each
 *   hop checked again); nothing is created or truncated before its check;
 * - folders are made one level at a time, the same way.
 *
 * Elsewhere the operations check as much as they can without that (the gate
 * still runs first). On every platform they read only regular files, up to
 * {@linkcode MAX_FILE_BYTES}: pi's own `read` of `/dev/zero` or a named pipe
 * never returns (or fills the worker's memory).
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { constants, existsSync, promises as fsp } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import {
  createEditToolDefinition,
  createReadToolDefinition,
  createWriteToolDefinition,
  type EditOperations,
  type ReadOperations,
  type ToolDefinition,
  type WriteOperations,
} from "@mariozechner/pi-coding-agent";

/**
 * Why an operation on real path `path` is refused, or null to allow it
 * (the sandbox's policy; it reports the violation itself).
 */
export type OpenCheck = (op: "read" | "write", path: string) => string | null;

/**
 * The largest file the tools read or edit: pi reads the whole file before it
 * cuts the output to 50 KB, so this bounds the worker's memory. A bigger
 * file is read in parts with bash (`sed -n`, `head`, `tail`).
 */
export const MAX_FILE_BYTES = 256 * 1024 * 1024;

/** Symlinks a write follows before giving up (the kernel's own limit is 40). */
const MAX_HOPS = 40;

/** Options of {@linkcode checkedFileOperations}. */
export interface CheckedFileOptions {
  /**
   * Whether a descriptor's path can be read (`/proc/self/fd`): without it the
   * check falls back to the path as given. Default: Linux with /proc mounted.
   */
  namesOpened?: boolean;
}

/** The operations of the three tools. */
export interface CheckedFileOperations {
  read: ReadOperations;
  write: WriteOperations;
  edit: EditOperations;
}

const O = constants;
/** No blocking on a pipe or device, and no terminal becoming ours, when opening to look. */
const LOOK = (O.O_NONBLOCK ?? 0) | (O.O_NOCTTY ?? 0);

/** Where `/proc/self/fd` names open files. */
function procFdWorks(): boolean {
  return Deno.build.os === "linux" && existsSync("/proc/self/fd");
}

/** The path the kernel gives descriptor `fd` (a deleted file's with its ` (deleted)`). */
async function pathOfFd(fd: number): Promise<string> {
  return await fsp.readlink(`/proc/self/fd/${fd}`);
}

/** What descriptor `fd` has open (`/proc/self/fd/N` follows to it whatever its name). */
async function fstatOf(fd: number): Promise<{ dev: number; ino: number }> {
  return await fsp.stat(`/proc/self/fd/${fd}`);
}

function refuse(why: string | null): void {
  if (why) throw new Error(why);
}

/**
 * An error that reads like node's (`EISDIR: …`) but carries no `code`:
 * pi's `edit` shows only the code of an error that has one.
 */
function fsError(code: string, message: string): Error {
  return new Error(`${code}: ${message}`);
}

/** File operations for pi's tools that check what was opened (see the module's comment). */
export function checkedFileOperations(
  check: OpenCheck,
  options: CheckedFileOptions = {},
): CheckedFileOperations {
  const named = options.namesOpened ?? procFdWorks();
  // Without named descriptors the gate's check (on real paths) is all there is: the
  // policy's real paths do not match a path as given (macOS's /tmp is /private/tmp).
  const verify: OpenCheck = named ? check : () => null;

  /** Checks descriptor `fd` opened for `op` (`given` names it in errors). */
  async function checkFd(op: "read" | "write", fd: number, given: string): Promise<void> {
    if (!named) return;
    const real = await pathOfFd(fd);
    // A pipe, socket or anonymous file: nothing the policy can place.
    if (!isAbsolute(real)) throw fsError("EINVAL", `'${given}' is not a file on disk`);
    // The name must lead back to what is open: a memory-only file (`/memfd:x`, reached
    // through another process's /proc/<pid>/fd) or a deleted one has a name that does not.
    const [opened, named_] = await Promise.all([
      fstatOf(fd),
      fsp.stat(real).catch(() => null),
    ]);
    if (!named_ || named_.dev !== opened.dev || named_.ino !== opened.ino) {
      throw new Error(`Sandbox: cannot check '${given}' (it is not a file on disk)`);
    }
    refuse(verify(op, real));
  }

  /** Opens `path` for reading (and writing with `rw`): a regular file, checked, within bounds. */
  async function openFile(path: string, rw = false): Promise<FileHandle> {
    const handle = await fsp.open(path, (rw ? O.O_RDWR : O.O_RDONLY) | LOOK);
    try {
      await checkFd("read", handle.fd, path);
      if (rw) await checkFd("write", handle.fd, path);
      const st = await handle.stat();
      if (st.isDirectory()) throw fsError("EISDIR", `illegal operation on a directory: '${path}'`);
      if (!st.isFile()) {
        throw fsError("EINVAL", `'${path}' is not a regular file (a device, pipe or socket)`);
      }
      if (st.size > MAX_FILE_BYTES) {
        throw fsError(
          "EFBIG",
          `'${path}' is larger than ${
            MAX_FILE_BYTES / 1024 / 1024
          } MiB: read parts of it with bash`,
        );
      }
      return handle;
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  /** The whole of a checked file (as long as it was when opened: a growing file is cut there). */
  async function readWhole(path: string): Promise<Buffer> {
    const handle = await openFile(path);
    try {
      const size = (await handle.stat()).size;
      const buf = Buffer.alloc(size);
      let at = 0;
      while (at < size) {
        const { bytesRead } = await handle.read(buf, at, size - at, at);
        if (bytesRead === 0) break;
        at += bytesRead;
      }
      return at === size ? buf : buf.subarray(0, at);
    } finally {
      await handle.close();
    }
  }

  /** Runs `fn` with folder `dir` open: its real path and how to name an entry inside it. */
  async function inFolder<T>(
    dir: string,
    fn: (realDir: string, entry: (name: string) => string) => Promise<T>,
  ): Promise<T> {
    if (!named) return await fn(dir, (name) => join(dir, name));
    const handle = await fsp.open(dir, O.O_RDONLY | O.O_DIRECTORY);
    try {
      // The magic link reaches the folder that was opened, whatever its path names now.
      return await fn(await pathOfFd(handle.fd), (name) => `/proc/self/fd/${handle.fd}/${name}`);
    } finally {
      await handle.close();
    }
  }

  /** `mkdir -p`, one checked level at a time. */
  async function makeFolder(dir: string, depth = 0): Promise<void> {
    if (depth > 255) throw fsError("ENAMETOOLONG", `'${dir}' is too deep`);
    try {
      if ((await fsp.stat(dir)).isDirectory()) return;
      throw fsError("ENOTDIR", `not a directory: '${dir}'`);
    } catch (err) {
      if ((err as { code?: string }).code !== "ENOENT") throw err;
    }
    const parent = dirname(dir);
    if (parent === dir) throw fsError("ENOENT", `no such directory: '${dir}'`);
    await makeFolder(parent, depth + 1);
    await inFolder(parent, async (realParent, entry) => {
      refuse(verify("write", join(realParent, basename(dir))));
      try {
        await fsp.mkdir(entry(basename(dir)));
      } catch (err) {
        if ((err as { code?: string }).code !== "EEXIST") throw err;
      }
    });
  }

  /** Writes `content` to `path`, following symlinks one checked hop at a time. */
  async function writeWhole(path: string, content: string): Promise<void> {
    let target = path;
    for (let hop = 0; hop <= MAX_HOPS; hop++) {
      const next = await inFolder(dirname(target), async (realDir, entry) => {
        const name = basename(target);
        refuse(verify("write", join(realDir, name)));
        let handle: FileHandle;
        try {
          handle = await fsp.open(
            entry(name),
            O.O_WRONLY | O.O_CREAT | (named ? O.O_NOFOLLOW : 0) | LOOK,
            0o666,
          );
        } catch (err) {
          if (!named || (err as { code?: string }).code !== "ELOOP") throw err;
          // The name is a symlink: its target gets the same check.
          return resolve(realDir, await fsp.readlink(entry(name)));
        }
        try {
          await checkFd("write", handle.fd, target);
          if (!(await handle.stat()).isFile()) {
            throw fsError("EINVAL", `'${path}' is not a regular file (a device, pipe or socket)`);
          }
          await handle.truncate(0);
          const bytes = Buffer.from(content, "utf-8");
          let at = 0;
          while (at < bytes.length) {
            at += (await handle.write(bytes, at, bytes.length - at, at)).bytesWritten;
          }
          return null;
        } finally {
          await handle.close();
        }
      });
      if (next === null) return;
      target = next;
    }
    throw fsError("ELOOP", `too many levels of symbolic links: '${path}'`);
  }

  return {
    read: {
      readFile: readWhole,
      access: async (path) => await (await openFile(path)).close(),
      detectImageMimeType: async (path) => {
        const handle = await openFile(path);
        try {
          const head = Buffer.alloc(12);
          const { bytesRead } = await handle.read(head, 0, 12, 0);
          return imageType(head.subarray(0, bytesRead));
        } finally {
          await handle.close();
        }
      },
    },
    write: { writeFile: writeWhole, mkdir: (dir) => makeFolder(dir) },
    edit: {
      readFile: readWhole,
      writeFile: writeWhole,
      access: async (path) => await (await openFile(path, true)).close(),
    },
  };
}

/** The image types pi's `read` passes to the model, by their first bytes. */
export function imageType(head: Uint8Array): string | null {
  const starts = (...bytes: number[]) => bytes.every((b, i) => head[i] === b);
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  const ascii = new TextDecoder().decode(head);
  if (ascii.startsWith("GIF87a") || ascii.startsWith("GIF89a")) return "image/gif";
  if (ascii.startsWith("RIFF") && ascii.slice(8, 12) === "WEBP") return "image/webp";
  return null;
}

/** pi's `read`, `write` and `edit` for a session in `cwd`, on checked operations. */
export function checkedFileTools(
  cwd: string,
  check: OpenCheck,
  options: CheckedFileOptions & { autoResizeImages: boolean },
): ToolDefinition[] {
  const ops = checkedFileOperations(check, options);
  return [
    createReadToolDefinition(cwd, {
      operations: ops.read,
      autoResizeImages: options.autoResizeImages,
    }),
    createWriteToolDefinition(cwd, { operations: ops.write }),
    createEditToolDefinition(cwd, { operations: ops.edit }),
  ] as unknown as ToolDefinition[];
}
