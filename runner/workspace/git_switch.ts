/**
 * A switch to an existing branch from the Changes panel, to the very
 * commit that was checked. The branch may be the agent's (it commits inside
 * its sandbox), so a switch that would write a file the agent's sandbox
 * protects is refused (git_protected.ts). `git switch <name>` would read
 * the branch again, and guess among remote-tracking refs by rules the
 * repository's config steers (`checkout.defaultRemote`, a remote's fetch
 * refspec): a branch flipped between the check and the switch, or a guess
 * the check did not make, would write unchecked files. So the name is
 * resolved here, to a local branch or to the one `refs/remotes/<remote>/`
 * branch of that name, the commit is checked, and git checks out that
 * commit (`--detach`, in the git sandbox), then HEAD is pointed at the
 * branch (made first, with its upstream, for a remote one).
 *
 * @module
 */
import { git, GitError, runGit } from "./git_run.ts";
import { protectedFile } from "./git_protected.ts";

const dec = new TextDecoder();

/** Where branch `name` is: a local branch, or one remote's. */
interface Target {
  oid: string;
  /** The remote of a branch that exists only as `refs/remotes/<remote>/<name>`. */
  remote: string | null;
}

async function resolve(top: string, name: string): Promise<Target> {
  const local = await runGit(["rev-parse", "-q", "--verify", `refs/heads/${name}^{commit}`], {
    cwd: top,
  });
  if (local.code === 0) return { oid: dec.decode(local.stdout).trim(), remote: null };
  const refs = await git(
    ["for-each-ref", "--format=%(refname)%00%(objectname)", "refs/remotes/"],
    { cwd: top },
  );
  const found = dec.decode(refs.stdout).split("\n").flatMap((line) => {
    const [ref = "", oid = ""] = line.split("\0");
    const m = ref.match(/^refs\/remotes\/([^/]+)\/(.+)$/);
    return m && m[2] === name ? [{ oid, remote: m[1]! }] : [];
  });
  if (found.length === 1) return found[0]!;
  throw new GitError(
    "not_found",
    found.length === 0
      ? `No branch '${name}' here or on a remote`
      : `'${name}' is a branch of several remotes (${found.map((f) => f.remote).join(", ")}): ` +
        "switch in your own terminal",
  );
}

/** Switches to existing branch `name` (local, or one remote's, then tracked). */
export async function switchChecked(top: string, name: string): Promise<void> {
  const target = await resolve(top, name);
  const head = await runGit(["rev-parse", "-q", "--verify", "HEAD^{commit}"], { cwd: top });
  const changed = head.code === 0
    ? await git(["diff", "--name-only", "-z", "--no-renames", "HEAD", target.oid, "--"], {
      cwd: top,
    })
    : await git(["ls-tree", "-r", "-z", "--name-only", target.oid], { cwd: top });
  const files = dec.decode(changed.stdout).split("\0").filter(Boolean);
  const refused = await protectedFile(top, files);
  if (refused) {
    throw new GitError(
      "protected_path",
      `Switching to '${name}' would write '${refused.path}', ${refused.why}: the agent's ` +
        "sandbox keeps it from being written, and the branch may be the agent's. Switch in " +
        "your own terminal",
    );
  }
  // git refuses here when local changes would be overwritten, as `git switch` does.
  await git(["switch", "-q", "--detach", target.oid], { cwd: top });
  if (target.remote !== null) {
    await git(["update-ref", `refs/heads/${name}`, target.oid, ""], { cwd: top });
    // The repository's config is read-only in the sandbox; `git config` runs no program.
    const set = (key: string, value: string) =>
      git(["config", key, value], { cwd: top, asPerson: true });
    await set(`branch.${name}.remote`, target.remote);
    await set(`branch.${name}.merge`, `refs/heads/${name}`);
  }
  const now = await runGit(["rev-parse", "-q", "--verify", `refs/heads/${name}`], { cwd: top });
  if (dec.decode(now.stdout).trim() !== target.oid) {
    throw new GitError(
      "git_failed",
      `'${name}' moved while switching: HEAD is left detached at ${target.oid.slice(0, 12)}`,
    );
  }
  await git(["symbolic-ref", "-m", `checkout: moving to ${name}`, "HEAD", `refs/heads/${name}`], {
    cwd: top,
  });
}
