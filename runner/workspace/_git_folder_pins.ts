/**
 * Writable binds that a swap cannot redirect. git_sandbox.ts checks a
 * folder's real path, then bubblewrap binds the folder by name a moment
 * later: if the agent renames a folder on that path and links its name to
 * another place in between (a relative link, which bubblewrap resolves the
 * same inside its new root), the bind follows the link, and another
 * repository's `.git` is bound writable; the agent may put its folder back
 * at once, so that the name looks right again afterwards.
 *
 * So each writable folder's identity (device and inode of the folder
 * opened at its checked real path, no link on the way) is recorded here,
 * and inside the sandbox, before git starts, a shell checks that the last
 * mount at exactly that path is writable (a bind that followed a link sits
 * elsewhere; one the machine already had there came with the read-only
 * root) and holds that very folder; it stops on any difference
 * ({@linkcode FOLDER_MOVED_EXIT}). What is mounted cannot change after.
 *
 * @module
 */
import { constants, promises as fsp } from "node:fs";

/** The exit code of a sandboxed git whose folders changed before it started. */
export const FOLDER_MOVED_EXIT = 125;
/** Written to stderr with {@linkcode FOLDER_MOVED_EXIT}. */
export const FOLDER_MOVED_MARK = "baton-git-sandbox: folder changed:";

/**
 * The check run inside the sandbox: for each folder its path as
 * `/proc/self/mountinfo` writes it, its path and its identity; then `--`
 * and the command.
 */
const CHECK = `here=$PWD
while [ "$1" != "--" ]; do
  mounted=
  while read -r _id _parent _dev _root point options _rest; do
    [ "$point" = "$1" ] && mounted=$options
  done < /proc/self/mountinfo
  case "$mounted" in rw,* | rw) ;; *) mounted= ;; esac
  { [ -n "$mounted" ] && [ "$(stat -L -c %d:%i -- "$2" 2>/dev/null)" = "$3" ]; } ||
    { echo "${FOLDER_MOVED_MARK} $2" >&2; exit ${FOLDER_MOVED_EXIT}; }
  shift 3
done
shift
cd -- "$here" && exec "$@"`;

/** A path as the kernel writes it in mountinfo (space, tab, line break and backslash escaped). */
function mountinfoPath(path: string): string {
  return path.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);
}

/**
 * The identity (`dev:ino`) of folder `path` as it is now, or null when the
 * folder opened there is not at that real path (a swap under way) or cannot
 * be opened.
 */
export async function folderIdentity(path: string): Promise<string | null> {
  let handle;
  try {
    handle = await fsp.open(
      path,
      constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW,
    );
  } catch {
    return null;
  }
  try {
    if (await fsp.readlink(`/proc/self/fd/${handle.fd}`) !== path) return null;
    const st = await handle.stat({ bigint: true });
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  } finally {
    await handle.close();
  }
}

/** What runs `command` inside the sandbox once each folder (real path, identity) is checked. */
export function pinnedCommand(
  folders: [path: string, identity: string][],
  command: string[],
): string[] {
  const args = folders.flatMap(([path, id]) => [mountinfoPath(path), path, id]);
  return ["sh", "-c", CHECK, "sh", ...args, "--", ...command];
}

let checkRuns: Promise<boolean> | null = null;

/**
 * Whether the check runs inside bubblewrap here (`sh`, a `stat` that takes
 * `-c`, a mountinfo), given bubblewrap's base arguments. Kept once it does;
 * a failure is asked again next time.
 */
export function pinsRun(base: string[]): Promise<boolean> {
  checkRuns ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "baton-git-pins-" });
    try {
      const real = await Deno.realPath(dir);
      const id = await folderIdentity(real);
      if (id === null) return false;
      const probe = await new Deno.Command("bwrap", {
        args: [...base, "--bind", real, real, "--", ...pinnedCommand([[real, id]], ["true"])],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).output();
      return probe.success;
    } catch {
      return false;
    } finally {
      await Deno.remove(dir).catch(() => {});
    }
  })();
  const asked = checkRuns;
  asked.then((runs) => {
    if (!runs && checkRuns === asked) checkRuns = null;
  });
  return asked;
}
