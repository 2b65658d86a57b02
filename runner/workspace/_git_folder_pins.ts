/**
 * Writable binds that a swap cannot redirect. git_sandbox.ts checks a
 * folder's real path, then bubblewrap binds the folder by name a moment
 * later: if the agent renames a folder on that path and links its name to
 * another place in between (a relative link, which bubblewrap resolves the
 * same inside its new root), the bind follows the link, and another
 * repository's `.git` is bound writable where git will look for this one.
 * So inside the sandbox, before git starts, a shell checks with its own
 * builtins (no program to start) that each writable folder's name still
 * leads to itself, no link on the way, and stops on any difference
 * ({@linkcode FOLDER_MOVED_EXIT}). A swap after the mounts changes nothing
 * git can write: a bind holds the folder itself, and the machine around it
 * is read-only.
 *
 * @module
 */

/** The exit code of a sandboxed git whose folders changed before it started. */
export const FOLDER_MOVED_EXIT = 125;
/** Written to stderr with {@linkcode FOLDER_MOVED_EXIT}. */
export const FOLDER_MOVED_MARK = "baton-git-sandbox: folder changed:";

/** The check run inside the sandbox: the folders' real paths, then `--`, then the command. */
const CHECK = `here=$PWD
while [ "$1" != "--" ]; do
  { cd -P -- "$1" 2>/dev/null && [ "$PWD" = "$1" ]; } ||
    { echo "${FOLDER_MOVED_MARK} $1" >&2; exit ${FOLDER_MOVED_EXIT}; }
  shift
done
shift
cd -- "$here" && exec "$@"`;

/** What runs `command` inside the sandbox once each of `folders` (real paths) is checked. */
export function pinnedCommand(folders: string[], command: string[]): string[] {
  return ["sh", "-c", CHECK, "sh", ...folders, "--", ...command];
}

let checkRuns: Promise<boolean> | null = null;

/** Whether the check runs inside bubblewrap here, given its base arguments (once per process). */
export function pinsRun(base: string[]): Promise<boolean> {
  checkRuns ??= (async () => {
    try {
      const probe = await new Deno.Command("bwrap", {
        args: [...base, "--", ...pinnedCommand(["/"], ["true"])],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).output();
      return probe.success;
    } catch {
      return false;
    }
  })();
  return checkRuns;
}
