/**
 * Reading a file that the agent may have put in place, in the runner's
 * daemon or a worker: a project's `.baton/config.json`, a `.gitignore`, a
 * skill, a repository's `.git` file. Read naively, a symlink to `/dev/zero`
 * fills the process's memory and a named pipe never answers; a check before
 * the read (`stat`, then `readFile`) loses to a swap in between. So the file
 * is opened without blocking (a pipe opens at once), the open descriptor is
 * checked (a regular file, not over the cap), and at most the cap is read.
 *
 * @module
 */
import { constants, promises as fsp } from "node:fs";

/** A file refused for its kind or size. */
export class FileShapeError extends Error {
  constructor(
    readonly code: "not_a_file" | "too_large",
    message: string,
    /** For `too_large`: the size found (at least the cap plus one). */
    readonly size?: number,
  ) {
    super(message);
    this.name = "FileShapeError";
  }
}

/** Options of {@linkcode readBounded}. */
export interface BoundedReadOptions {
  /** Refuse a symlink as the last part of the path instead of following it (default: follow). */
  noFollow?: boolean;
}

const O = constants;

/**
 * The bytes of regular file `path`, at most `maxBytes` of them.
 * Throws `Deno.errors.NotFound` for a path that does not exist,
 * `Deno.errors.PermissionDenied` for one that may not be opened,
 * {@linkcode FileShapeError} for anything but a regular file (a folder, a
 * pipe, a device, a final symlink with `noFollow`) or for a file over the
 * cap, also one that grew past it while being read.
 */
export async function readBounded(
  path: string,
  maxBytes: number,
  options: BoundedReadOptions = {},
): Promise<Uint8Array> {
  return (await readBoundedFile(path, maxBytes, options)).bytes;
}

/** {@linkcode readBounded} with the time the file was last changed. */
export async function readBoundedFile(
  path: string,
  maxBytes: number,
  options: BoundedReadOptions = {},
): Promise<{ bytes: Uint8Array; mtime: Date | null }> {
  const flags = O.O_RDONLY | (O.O_NONBLOCK ?? 0) | (O.O_NOCTTY ?? 0) |
    (options.noFollow ? (O.O_NOFOLLOW ?? 0) : 0);
  let handle;
  try {
    handle = await fsp.open(path, flags);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new Deno.errors.NotFound(`No such file: '${path}'`);
    }
    if (code === "EACCES" || code === "EPERM") {
      throw new Deno.errors.PermissionDenied(`Permission denied: '${path}'`);
    }
    if (code === "ELOOP" || code === "EISDIR") throw notAFile(path);
    throw err;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw notAFile(path);
    if (info.size > maxBytes) throw tooLarge(path, maxBytes, info.size);
    // Read to the end, not to the stat's size: a file that grew meanwhile is read whole
    // or, once one byte past the cap, refused.
    let buf = new Uint8Array(info.size + 1);
    let at = 0;
    for (;;) {
      if (at === buf.length) {
        if (at > maxBytes) throw tooLarge(path, maxBytes, at);
        const more = new Uint8Array(Math.min(buf.length * 2, maxBytes + 1));
        more.set(buf);
        buf = more;
      }
      const { bytesRead } = await handle.read(buf, at, buf.length - at, null);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    return { bytes: buf.subarray(0, at), mtime: info.mtime ?? null };
  } finally {
    await handle.close();
  }
}

/** {@linkcode readBounded} as UTF-8 text. */
export async function readBoundedText(
  path: string,
  maxBytes: number,
  options: BoundedReadOptions = {},
): Promise<string> {
  return new TextDecoder().decode(await readBounded(path, maxBytes, options));
}

function notAFile(path: string): FileShapeError {
  return new FileShapeError("not_a_file", `Not a regular file: '${path}'`);
}

function tooLarge(path: string, maxBytes: number, size: number): FileShapeError {
  return new FileShapeError("too_large", `'${path}' is larger than ${maxBytes} bytes`, size);
}
