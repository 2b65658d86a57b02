/**
 * The git service's operations, run in a session's folder with the real
 * `git` binary (see git_run.ts for how it is run).
 *
 * @module
 */
import type { GitBranch, GitCommitInfo, GitDiff, GitStatus } from "../../shared/git_api.ts";
import {
  git,
  GIT_PUSH_TIMEOUT_MS,
  GitError,
  refName,
  repoPath,
  repoPaths,
  runGit,
} from "./git_run.ts";
import { applyNumstat, parseStatus } from "./git_status.ts";
import { readBounded } from "../bounded_read.ts";
import { protectedFile } from "./git_protected.ts";
import { commitStaged } from "./git_commit.ts";
import { switchChecked } from "./git_switch.ts";

/** Default byte cap of one diff; a client may ask for up to MAX_DIFF_BYTES. */
export const DIFF_BYTES = 512 * 1024;
export const MAX_DIFF_BYTES = 4 * 1024 * 1024;
/** Longest commit message. */
export const MAX_COMMIT_MESSAGE = 64 * 1024;

const dec = new TextDecoder();

/** The repository's real top folder for `cwd`; `not_a_repository` when there is none. */
export async function repoTop(cwd: string): Promise<string> {
  let r;
  try {
    r = await runGit(["rev-parse", "--show-toplevel"], { cwd });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new GitError("not_found", "The session's folder no longer exists");
    }
    throw err;
  }
  if (r.code !== 0) {
    throw new GitError("not_a_repository", `Not a git repository: '${cwd}'`);
  }
  const top = dec.decode(r.stdout).trim();
  if (!top) throw new GitError("not_a_repository", `Not a git repository: '${cwd}' (bare)`);
  return await Deno.realPath(top);
}

/** Branch, upstream, ahead/behind and the changed files with their + and − counts. */
export async function status(top: string): Promise<GitStatus> {
  const r = await git(
    ["status", "--porcelain=v2", "-z", "--branch", "-M", "--untracked-files=all"],
    { cwd: top },
  );
  const st = parseStatus(dec.decode(r.stdout));
  if (r.truncated) st.omitted++;
  const [unstaged, staged] = await Promise.all([
    runGit(["diff", "--numstat", "-z", "-M"], { cwd: top, maxBytes: 2 * 1024 * 1024 }),
    runGit(["diff", "--cached", "--numstat", "-z", "-M"], {
      cwd: top,
      maxBytes: 2 * 1024 * 1024,
    }),
  ]);
  if (unstaged.code === 0) applyNumstat(st.unstaged, dec.decode(unstaged.stdout));
  if (staged.code === 0) applyNumstat(st.staged, dec.decode(staged.stdout));
  await countNewFiles(top, st);
  st.root = top;
  return st;
}

/** New files counted (all their lines are additions), and the largest one read for it. */
const COUNT_NEW_FILES = 200;
const COUNT_NEW_BYTES = 512 * 1024;

/** Puts + counts on the first untracked files (git has no numstat for them). */
async function countNewFiles(top: string, st: GitStatus): Promise<void> {
  for (const f of st.untracked.slice(0, COUNT_NEW_FILES)) {
    try {
      // Not a link, a pipe or a device, nor more than the cap: the agent may swap the file
      // for one since git listed it, and this runs in the daemon.
      const bytes = await readBounded(`${top}/${f.path}`, COUNT_NEW_BYTES, { noFollow: true });
      if (bytes.includes(0)) {
        f.binary = true;
        continue;
      }
      let n = 0;
      for (const b of bytes) if (b === 10) n++;
      if (bytes.length && bytes[bytes.length - 1] !== 10) n++;
      f.additions = n;
      f.deletions = 0;
    } catch {
      // Gone meanwhile, or unreadable: no counts.
    }
  }
}

/** One file's diff, staged or not; an untracked file's as all new lines. */
export async function diff(top: string, data: Record<string, unknown>): Promise<GitDiff> {
  const path = await repoPath(top, data.path);
  const orig = data.origPath !== undefined ? await repoPath(top, data.origPath) : null;
  const staged = data.staged === true;
  const want = data.maxBytes;
  const maxBytes = typeof want === "number" && Number.isSafeInteger(want) && want > 0
    ? Math.min(want, MAX_DIFF_BYTES)
    : DIFF_BYTES;
  const base = ["--no-color", "--no-ext-diff", "--no-textconv", "-M", "-U3"];
  let r;
  if (!staged && await untracked(top, path)) {
    r = await runGit(["diff", "--no-index", ...base, "--", "/dev/null", path], {
      cwd: top,
      maxBytes,
    });
    if (r.code > 1) throw new GitError("git_failed", r.stderr.trim() || "git diff failed");
  } else {
    const args = ["diff", ...(staged ? ["--cached"] : []), ...base, "--"];
    r = await git([...args, ...(orig ? [orig] : []), path], { cwd: top, maxBytes });
  }
  const text = dec.decode(r.stdout);
  return {
    path,
    staged,
    diff: text,
    truncated: r.truncated,
    binary: /^Binary files .* differ$/m.test(text) && !/^@@ /m.test(text),
  };
}

async function untracked(top: string, path: string): Promise<boolean> {
  const r = await runGit(["ls-files", "--others", "--exclude-standard", "-z", "--", path], {
    cwd: top,
  });
  return r.code === 0 && dec.decode(r.stdout).split("\0").includes(path);
}

/** Local and remote branches, and the current one. */
export async function branches(
  top: string,
): Promise<{ current: string | null; branches: GitBranch[] }> {
  const r = await git([
    "for-each-ref",
    "--format=%(refname)%00%(objectname:short)%00%(upstream:short)%00%(HEAD)",
    "refs/heads",
    "refs/remotes",
  ], { cwd: top });
  const list: GitBranch[] = [];
  let current: string | null = null;
  for (const line of dec.decode(r.stdout).split("\n")) {
    if (!line) continue;
    const [ref = "", oid = "", upstream = "", head = ""] = line.split("\0");
    if (ref.endsWith("/HEAD")) continue;
    const remote = ref.startsWith("refs/remotes/");
    const name = ref.replace(/^refs\/(heads|remotes)\//, "");
    if (head === "*") current = name;
    list.push({ name, remote, current: head === "*", upstream: upstream || null, oid });
  }
  return { current, branches: list.slice(0, 2000) };
}

/** Switches branch (git refuses when local changes would be lost); `create` makes it first. */
export async function checkout(top: string, data: Record<string, unknown>): Promise<GitStatus> {
  const name = await refName(top, data.branch);
  // No "--" here: `switch -c` takes the next argument as the name. refName refused a leading "-".
  if (data.create === true) await git(["switch", "-c", name], { cwd: top });
  else await switchChecked(top, name);
  return await status(top);
}

export async function stage(top: string, data: Record<string, unknown>): Promise<GitStatus> {
  const paths = await repoPaths(top, data.paths);
  await git(["add", "-A", "--", ...paths], { cwd: top });
  return await status(top);
}

export async function unstage(top: string, data: Record<string, unknown>): Promise<GitStatus> {
  const paths = await repoPaths(top, data.paths);
  // `reset` (unlike `restore --staged`) also works before the first commit.
  const r = await runGit(["reset", "-q", "--", ...paths], { cwd: top });
  if (r.code > 1) throw new GitError("git_failed", r.stderr.trim() || "git reset failed");
  return await status(top);
}

/** Commits what is staged; answers the new commit. */
export async function commit(
  top: string,
  data: Record<string, unknown>,
): Promise<{ commit: GitCommitInfo; status: GitStatus }> {
  const message = data.message;
  if (typeof message !== "string" || message.trim() === "") {
    throw new GitError("bad_request", "A commit needs a message");
  }
  if (message.length > MAX_COMMIT_MESSAGE) {
    throw new GitError(
      "bad_request",
      `A commit message has at most ${MAX_COMMIT_MESSAGE} characters`,
    );
  }
  await commitStaged(top, message);
  const [c] = await log(top, { limit: 1 });
  return { commit: c!, status: await status(top) };
}

/**
 * Pushes the current branch: to its upstream when it has one, else to
 * `remote` (default: the only remote, or `origin`) setting the upstream.
 * git's progress goes to `progress` as it comes.
 */
export async function push(
  top: string,
  data: Record<string, unknown>,
  progress: (text: string) => void,
): Promise<{ output: string; status: GitStatus }> {
  const st = await status(top);
  if (!st.branch) throw new GitError("detached_head", "Check out a branch before pushing");
  let args: string[];
  if (st.upstream && data.remote === undefined) args = ["push", "--progress"];
  else {
    let remote = data.remote;
    if (remote === undefined) {
      const r = await git(["remote"], { cwd: top });
      const remotes = dec.decode(r.stdout).split("\n").filter(Boolean);
      if (remotes.length === 0) throw new GitError("no_remote", "This repository has no remote");
      remote = remotes.length === 1 ? remotes[0] : "origin";
    }
    const name = await refName(top, remote, "remote");
    args = ["push", "--progress", "--set-upstream", name, `HEAD:refs/heads/${st.branch}`];
  }
  const r = await runGit(args, { cwd: top, timeoutMs: GIT_PUSH_TIMEOUT_MS, onStderr: progress });
  if (r.code !== 0) {
    throw new GitError("push_failed", r.stderr.trim().slice(-2000) || "git push failed");
  }
  return { output: r.stderr.slice(-8000), status: await status(top) };
}

/** The last `limit` commits (default 20, at most 200); empty before the first commit. */
export async function log(top: string, data: Record<string, unknown>): Promise<GitCommitInfo[]> {
  const n = typeof data.limit === "number" && Number.isSafeInteger(data.limit) && data.limit > 0
    ? Math.min(data.limit, 200)
    : 20;
  const r = await runGit(["log", `-n${n}`, "--format=%H%x00%an%x00%ae%x00%at%x00%s%x1e"], {
    cwd: top,
  });
  if (r.code !== 0) {
    if (/does not have any commits|bad default revision/.test(r.stderr)) return [];
    throw new GitError("git_failed", r.stderr.trim() || "git log failed");
  }
  return dec.decode(r.stdout).split("\x1e").map((s) => s.trim()).filter(Boolean).map((rec) => {
    const [oid = "", author = "", email = "", time = "0", subject = ""] = rec.split("\0");
    return { oid, author, email, time: Number(time), subject };
  });
}

/**
 * Throws away the unstaged changes of `paths` (an untracked file is
 * deleted). Refused without `confirm: true`: nothing brings them back.
 */
export async function discard(top: string, data: Record<string, unknown>): Promise<GitStatus> {
  if (data.confirm !== true) {
    throw new GitError(
      "confirm_required",
      "Discarding changes cannot be undone: send confirm: true to do it",
    );
  }
  const paths = await repoPaths(top, data.paths);
  const others = await runGit(
    ["ls-files", "--others", "--exclude-standard", "-z", "--", ...paths],
    {
      cwd: top,
    },
  );
  const untrackedSet = new Set(dec.decode(others.stdout).split("\0").filter(Boolean));
  const tracked = paths.filter((p) => !untrackedSet.has(p));
  if (tracked.length) {
    // What checkout writes: the index's files under those paths (the agent may have staged them).
    const listed = await git(["ls-files", "-z", "--", ...tracked], { cwd: top });
    const refused = await protectedFile(top, dec.decode(listed.stdout).split("\0").filter(Boolean));
    if (refused) {
      throw new GitError(
        "protected_path",
        `'${refused.path}' is ${refused.why}: the agent's sandbox keeps it from being written, ` +
          "and a discard would write what the index holds. Restore it in your own terminal",
      );
    }
    await git(["checkout", "--", ...tracked], { cwd: top });
  }
  if (untrackedSet.size) await git(["clean", "-f", "-q", "--", ...untrackedSet], { cwd: top });
  return await status(top);
}
