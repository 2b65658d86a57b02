/**
 * A commit from the Changes panel, made so that only the step that needs
 * the person's signing key runs outside the sandbox. `git commit` run as
 * is (as the person, since it may sign) also refreshes the index, which
 * runs the clean filter of every file the agent touched, under whatever
 * config the agent wrote a moment before: the race git_config_guard.ts
 * names. So the commit is built from parts:
 *
 * - sandboxed (git_sandbox.ts): whether anything is staged, the message
 *   cleaned as `--cleanup=strip` does (`stripspace`), the index written as
 *   a tree (`write-tree`, which looks at no file of the work tree), and at
 *   the end the branch moved (`update-ref`, checked against the parent);
 * - `commit-tree`, which reads no work-tree file and runs no filter or
 *   hook: sandboxed too, unless `commit.gpgSign` asks for a signature (which
 *   `commit-tree` does not read: it gets `-S`), which needs the person's
 *   keys; then it runs as the person, its signing program pinned by the
 *   guard, no lazy fetch of a missing object, and no repository `http.*`.
 *
 * A merge, cherry-pick or revert in progress is left to the person's own
 * terminal: finishing one takes more than a tree and a parent.
 *
 * @module
 */
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { git, GitError, runGit } from "./git_run.ts";

/** What a commit in progress would have to finish, by the file git keeps for it. */
const IN_PROGRESS: [file: string, what: string][] = [
  ["MERGE_HEAD", "merge"],
  ["CHERRY_PICK_HEAD", "cherry-pick"],
  ["REVERT_HEAD", "revert"],
];

const dec = new TextDecoder();

/** Commits what is staged in the repository at `top` with `message` (not yet cleaned). */
export async function commitStaged(top: string, message: string): Promise<void> {
  const gitDir = dec.decode((await git(["rev-parse", "--absolute-git-dir"], { cwd: top })).stdout)
    .trim();
  for (const [file, what] of IN_PROGRESS) {
    if (await stat(join(gitDir, file)).then(() => true, () => false)) {
      throw new GitError(
        "operation_in_progress",
        `A ${what} is in progress here: finish it in your own terminal`,
      );
    }
  }
  const staged = await runGit(["diff", "--cached", "--quiet"], { cwd: top });
  if (staged.code === 0) throw new GitError("nothing_to_commit", "Nothing is staged to commit");
  if (staged.code !== 1) {
    throw new GitError("git_failed", staged.stderr.trim() || "git diff failed");
  }
  // With core.commentChar=auto, git commit picks a character no line of this message starts
  // with: no line is a comment then.
  const commentChar = await runGit(["config", "--get", "core.commentchar"], { cwd: top });
  const auto = dec.decode(commentChar.stdout).trim() === "auto";
  const text = dec.decode(
    (await git(["stripspace", ...(auto ? [] : ["--strip-comments"])], {
      cwd: top,
      stdin: message,
    })).stdout,
  );
  if (text.trim() === "") throw new GitError("bad_request", "A commit needs a message");
  const head = await runGit(["rev-parse", "-q", "--verify", "HEAD^{commit}"], { cwd: top });
  const parent = head.code === 0 ? dec.decode(head.stdout).trim() : null;
  const tree = dec.decode((await git(["write-tree"], { cwd: top })).stdout).trim();
  const sign = await runGit(["config", "--bool", "--get", "commit.gpgsign"], { cwd: top });
  const signing = dec.decode(sign.stdout).trim() === "true";
  const made = await git(
    ["commit-tree", tree, ...(parent ? ["-p", parent] : []), ...(signing ? ["-S"] : []), "-F", "-"],
    { cwd: top, stdin: text, asPerson: signing },
  );
  const commit = dec.decode(made.stdout).trim();
  const subject = text.split("\n", 1)[0]!;
  const reason = `commit${parent ? "" : " (initial)"}: ${subject}`;
  // Against the parent seen above: a commit made meanwhile is not lost.
  await git(["update-ref", "-m", reason, "HEAD", commit, parent ?? ""], { cwd: top });
}
