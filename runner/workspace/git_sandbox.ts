/**
 * The git service's commands inside bubblewrap (Linux), so that whatever a
 * repository's config makes git run can do no more than the agent's own
 * `bash`. git_config_guard.ts neutralises each program-naming setting it
 * reads, but it reads the config in one git process and git reads it again
 * in the next: an agent that keeps rewriting `.git/config` (a nested
 * repository it made, whose config the sandbox does not protect) may slip a
 * `filter.x.clean` in between, and the status watcher would run it as the
 * user. Inside bubblewrap that program sees the machine read-only, the
 * sandbox's read-denied places (`~/.ssh`, baton's keys, …) empty, no
 * network, and may write only the repository's git folders (and its work
 * tree, for the commands that change files).
 *
 * Where the repository's folders are is asked of git itself (`rev-parse`,
 * which runs nothing a config names) and checked the way git reads them:
 * the work tree's `.git` leads to the git folder (a `core.worktree` naming
 * another repository's files is refused), the git folder's `commondir` to
 * the common one, and no name holds a line break (which would shift
 * rev-parse's lines). The sandboxed git is given them (`--git-dir`,
 * `--work-tree`, `GIT_COMMON_DIR`) rather than reading them again, which
 * the agent could change in between. A folder is made writable only if it
 * is the work tree or a git folder, and does not lie in a place the sandbox
 * hides or keeps from writes; what it holds of those is masked or read-only
 * after it, and so are its `config` and `hooks` (which the person's own git
 * reads and runs later). Where a mask hides part of the work tree (a
 * session in a home folder that is a repository), the commands that record
 * or change the work tree are refused (`hidden_in_repo`): they would record
 * what the mask shows. The sandboxed git gets only the variables it needs
 * (no provider key, no `SSH_AUTH_SOCK`), and the places where sockets live
 * (`/run/user`, `/run/dbus`, X11's, the ssh agent's) are hidden: a socket answers through a read-only bind,
 * and the session bus starts programs outside any sandbox.
 *
 * A push (or anything that talks to a remote) needs the network and the
 * user's credentials, a signed commit's `commit-tree` needs the user's
 * keys (GPG or SSH, which the sandbox hides; git_commit.ts asks for it with
 * `asPerson`, the rest of a commit is sandboxed), and a switch where the person's git uses
 * git-lfs fetches large files (without it a switch is sandboxed):
 * these run as before, under the guard alone, and only when the person asks
 * (the status watcher never runs them). So does every command where
 * bubblewrap cannot run, and every command when the sandbox's mode is
 * `none` (the agent's `bash` is not held either then).
 *
 * @module
 */
import { basename, dirname, join, resolve } from "node:path";
import { readBoundedText } from "../bounded_read.ts";
import { isWithin } from "../roots.ts";
import { missingPrograms } from "../sandbox/deps.ts";
import { GATE_ONLY_READS } from "../sandbox/policy.ts";
import { folderPolicy, policySourceFrom } from "../sandbox/folder_policy.ts";
import { globToRegex } from "./gitignore.ts";
import { folderIdentity, pinnedCommand, pinsRun } from "./_git_folder_pins.ts";
import { lfsConfigured } from "./_git_lfs.ts";

/**
 * Subcommands that need what the sandbox takes away: a remote's network and
 * credentials, the person's signing keys (`commit.gpgSign`), or git-lfs's
 * downloads on a switch.
 */
const NEEDS_THE_USER = new Set([
  "push",
  "fetch",
  "pull",
  "ls-remote",
  "clone",
  "commit",
]);
/** Subcommands that change the work tree's files (the rest write only the git folders). */
const WRITES_WORK_TREE = new Set(["checkout", "switch", "clean", "restore", "stash", "merge"]);
/** Subcommands that record what they see of the work tree, or change it. */
const RECORDS_WORK_TREE = new Set([...WRITES_WORK_TREE, "add", "reset", "rm", "mv"]);

/**
 * What every sandboxed git gets: the machine read-only, its own /dev and
 * /proc, no network and no other namespace shared, no capabilities, and no
 * terminal (TIOCSTI); it dies with the daemon.
 */
const BASE = [
  "--ro-bind",
  "/",
  "/",
  "--dev",
  "/dev",
  "--proc",
  "/proc",
  "--unshare-all",
  "--die-with-parent",
  "--new-session",
  "--cap-drop",
  "ALL",
];

/** How to start git: the program and what comes before git's own arguments. */
export interface GitLaunch {
  cmd: string;
  args: string[];
  /** Whether it runs inside bubblewrap. */
  sandboxed: boolean;
}

/** A git command the sandbox will not run (the code is the one the viewer sees). */
export class GitSandboxError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = "GitSandboxError";
  }
}

const PLAIN: GitLaunch = { cmd: "git", args: [], sandboxed: false };

/** Options of {@linkcode gitLaunch}. */
export interface GitSandboxOptions {
  /** The daemon's environment (HOME, BATON_SANDBOX, BATON_NO_SANDBOX, BATON_SANDBOX_PROTECT). */
  env?: (name: string) => string | undefined;
  /**
   * The whole environment of the sandboxed git (nothing else of the daemon's
   * reaches it: the providers' keys, SSH_AUTH_SOCK). Default: HOME and PATH.
   */
  gitEnv?: Record<string, string>;
}

/** Variables of the daemon a sandboxed git keeps, beside what the caller gives it. */
export const GIT_ENV_KEPT = ["HOME", "PATH", "USER", "LOGNAME", "LANG", "XDG_CONFIG_HOME"];

/**
 * Where the desktop's, the system's and container engines' sockets live: a
 * filesystem socket can be connected to through a read-only bind, and the
 * session bus starts programs outside any sandbox (`systemd-run --user`).
 * Hidden from the sandboxed git. Not all of `/run`: NixOS keeps its programs
 * (git among them) under `/run/current-system`.
 */
const SOCKET_PLACES = [
  "/run/user",
  "/run/dbus",
  "/run/systemd",
  "/run/docker.sock",
  "/run/containerd",
  "/run/podman",
  "/run/snapd.socket",
  "/tmp/.X11-unix",
  "/tmp/.ICE-unix",
];

/** Whether bubblewrap runs here, and why not: checked once per process (a fact about the machine). */
let bwrapProbe: Promise<{ runs: boolean; why: string }> | null = null;

function probeBubblewrap(): Promise<{ runs: boolean; why: string }> {
  bwrapProbe ??= (async () => {
    if (Deno.build.os !== "linux") return { runs: false, why: "not Linux" };
    if (missingPrograms(["bwrap"]).length > 0) {
      return { runs: false, why: "bwrap is not installed" };
    }
    try {
      const probe = await new Deno.Command("bwrap", {
        args: [...BASE, "--", "true"],
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).output();
      const said = new TextDecoder().decode(probe.stderr).trim().split("\n")[0]!.slice(0, 200);
      return { runs: probe.success, why: said || `bwrap exited with ${probe.code}` };
    } catch (err) {
      return { runs: false, why: err instanceof Error ? err.message : String(err) };
    }
  })();
  return bwrapProbe;
}

async function bubblewrapRuns(): Promise<boolean> {
  return (await probeBubblewrap()).runs;
}

/**
 * A line for the daemon's log when the git service's commands cannot run
 * inside bubblewrap on Linux (they then run as the person's git, held by
 * the config guard alone), or null when they can or the platform has none.
 */
export async function gitSandboxProblem(): Promise<string | null> {
  if (Deno.build.os !== "linux") return null;
  const { runs, why } = await probeBubblewrap();
  if (!runs) {
    return `git service: bubblewrap does not run here (${why}); ` +
      'git runs outside it, held by its config guard only (docs/sandbox.md, "The git service")';
  }
  return (await pinsRun(BASE)) ? null : "git service: inside bubblewrap no shell with `stat` " +
    "checks the folders it binds before git starts; a folder swapped for a link meanwhile is bound";
}

const GLOB = /[*?[\]]/;

/**
 * How to start git subcommand `sub` in `cwd`: inside bubblewrap where it
 * runs and the sandbox is on, else as is (see the module's comment).
 * Throws {@linkcode GitSandboxError} for a command it will not run.
 */
export async function gitLaunch(
  cwd: string,
  sub: string | undefined,
  options: GitSandboxOptions = {},
): Promise<GitLaunch> {
  if (sub !== undefined && NEEDS_THE_USER.has(sub)) return PLAIN;
  if (!(await bubblewrapRuns())) return PLAIN;
  // A switch where git-lfs downloads files needs the network and the person's credentials.
  if (sub === "switch" && await lfsConfigured(cwd, options.env)) return PLAIN;
  const env = options.env ?? ((k: string) => Deno.env.get(k));
  const real = await Deno.realPath(cwd);
  const repo = await repositoryOf(real, env);
  const policy = await policyFor(repo?.workTree ?? real, env);
  if (policy === null) return PLAIN;
  const masks: string[] = [];
  const sshAgent = env("SSH_AUTH_SOCK");
  const sockets = [...SOCKET_PLACES, ...(sshAgent ? [sshAgent] : [])];
  for (const hidden of [...await expandLastGlob(policy.denyRead), ...sockets]) {
    const path = await Deno.realPath(hidden).catch(() => null);
    if (path !== null) masks.push(path);
  }
  if (repo && sub !== undefined && RECORDS_WORK_TREE.has(sub)) {
    const inside = masks.find((m) => isWithin(m, repo.workTree, "linux"));
    if (inside !== undefined) {
      throw new GitSandboxError(
        "hidden_in_repo",
        `The repository holds a place the sandbox hides ('${inside}'): the git service does ` +
          `not run '${sub}' here, since it would record that place as the sandbox shows it (empty)`,
      );
    }
  }
  const protectedWrites: string[] = [];
  for (const p of policy.denyWrite) {
    const path = await Deno.realPath(p).catch(() => null);
    if (path !== null) protectedWrites.push(path);
  }
  // A writable folder never lies in a hidden or write-protected place; what it holds of
  // them is covered after it (read-only, or masked).
  const denied = [...masks, ...protectedWrites];
  const writable = !repo ? [] : [
    ...repo.gitDirs,
    ...(sub !== undefined && WRITES_WORK_TREE.has(sub) ? [repo.workTree] : []),
  ].filter((w) => w !== "/" && !denied.some((d) => isWithin(w, d, "linux")));
  const args = [...BASE, "--clearenv"];
  const gitEnv = options.gitEnv ??
    { HOME: env("HOME") ?? "/", PATH: env("PATH") ?? "/usr/bin:/bin" };
  for (const [k, v] of Object.entries(gitEnv)) args.push("--setenv", k, v);
  // git reads no `commondir` the agent could have changed since (the binds follow it).
  if (repo) args.push("--setenv", "GIT_COMMON_DIR", repo.gitDirs.at(-1)!);
  for (const w of writable) args.push("--bind", w, w);
  for (const p of protectedWrites) {
    if (writable.some((w) => isWithin(p, w, "linux"))) args.push("--ro-bind", p, p);
  }
  // What the person's own git runs later (hooks) or reads first (config) stays as it is.
  // A missing hooks folder is made (empty, as `git init` makes it) to be held read-only.
  for (const g of writable.filter((w) => repo?.gitDirs.includes(w))) {
    const held = ["config", "config.worktree"];
    if (g === repo!.gitDirs.at(-1)) {
      await Deno.mkdir(join(g, "hooks")).catch(() => {});
      held.push("hooks");
    }
    for (const name of held) {
      const p = join(g, name);
      if (await Deno.lstat(p).then(() => true, () => false)) args.push("--ro-bind", p, p);
    }
  }
  // After the binds, so that they hide inside the repository too.
  for (const m of masks) {
    const isDir = (await Deno.stat(m).catch(() => null))?.isDirectory ?? false;
    args.push(...(isDir ? ["--tmpfs", m] : ["--ro-bind", "/dev/null", m]));
  }
  // The folders found above, not a `.git` read again (the agent may have swapped it since).
  const git = [
    "git",
    ...(repo ? [`--git-dir=${repo.gitDir}`, `--work-tree=${repo.workTree}`] : []),
  ];
  args.push("--chdir", real, "--", ...await checkedStart(writable, git));
  return { cmd: "bwrap", args, sandboxed: true };
}

/**
 * `git` started once each writable folder is checked inside the sandbox to
 * be where it was checked here (_git_folder_pins.ts), where that check runs.
 */
async function checkedStart(writable: string[], git: string[]): Promise<string[]> {
  if (writable.length === 0 || !(await pinsRun(BASE))) return git;
  const pins: [string, string][] = [];
  for (const w of writable) {
    const id = await folderIdentity(w);
    if (id === null) throw strange(`'${w}' changed while it was checked`);
    pins.push([w, id]);
  }
  return pinnedCommand(pins, git);
}

/**
 * The sandbox's lists for `dir` (global config, the project's over it), or
 * null in mode none. An invalid global file gives the default policy (the
 * sessions refuse it meanwhile), an invalid project file the global one.
 */
async function policyFor(
  dir: string,
  env: (name: string) => string | undefined,
): Promise<{ denyRead: string[]; denyWrite: string[] } | null> {
  const r = await folderPolicy(policySourceFrom(env), dir, {
    global: "default",
    project: "skip",
  });
  if (r.mode === "none") return null;
  return {
    // bubblewrap gives git a /proc of its own.
    denyRead: r.paths.denyRead.filter((p) => !GATE_ONLY_READS.includes(p)),
    denyWrite: r.paths.denyWrite.filter((p) => !GLOB.test(p)),
  };
}

/**
 * Entries whose last part is a glob (`~/.baton/runner/.handover-*`) as the
 * files they match now; a glob in a folder part (`**`) is dropped.
 */
async function expandLastGlob(entries: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const e of entries) {
    if (!GLOB.test(e)) {
      out.push(e);
      continue;
    }
    const dir = dirname(e);
    if (GLOB.test(dir)) continue;
    const re = new RegExp(`^${globToRegex(basename(e))}$`);
    try {
      for await (const entry of Deno.readDir(dir)) {
        if (re.test(entry.name)) out.push(join(dir, entry.name));
      }
    } catch {
      // No such folder: nothing to hide.
    }
  }
  return out;
}

/** The refusal of a repository whose folders git does not report as baton reads them. */
function strange(what: string): GitSandboxError {
  return new GitSandboxError(
    "unsafe_config",
    `The repository's layout (${what}) does not lead where git reports: the git service ` +
      "does not run git here",
  );
}

/** The largest `.git` file or `commondir` read (a path and a line break). */
const MAX_POINTER_BYTES = 64 * 1024;

/** The folder a `.git` file names, read as git reads it ("gitdir: " and the rest of the line). */
async function gitFileTarget(file: string, workTree: string): Promise<string | null> {
  const text = await readBoundedText(file, MAX_POINTER_BYTES).catch(() => "");
  if (!text.startsWith("gitdir: ")) return null;
  const path = text.slice("gitdir: ".length).replace(/[\r\n]+$/, "");
  return await Deno.realPath(resolve(workTree, path)).catch(() => null);
}

/** Where git finds the repository of a folder: its git folders and work tree, as real paths. */
interface Repository {
  /** The folder git uses as `--git-dir` (a linked work tree's own). */
  gitDir: string;
  /** It and the common one, where objects and refs are written. */
  gitDirs: string[];
  workTree: string;
}

/**
 * The repository `dir` is in, as git itself finds it (`rev-parse`, which
 * runs nothing a config names); null outside one, or when its common folder
 * does not look like a git folder (HEAD and objects).
 */
async function repositoryOf(
  dir: string,
  env: (name: string) => string | undefined,
): Promise<Repository | null> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command("git", {
      args: [
        "-c",
        "core.fsmonitor=false",
        "rev-parse",
        "--absolute-git-dir",
        "--git-common-dir",
        "--show-toplevel",
      ],
      cwd: dir,
      env: { LC_ALL: "C", GIT_OPTIONAL_LOCKS: "0", PATH: env("PATH") ?? "/usr/bin:/bin" },
      stdin: "null",
      stdout: "piped",
      stderr: "null",
      signal: AbortSignal.timeout(10_000),
    }).output();
  } catch {
    return null;
  }
  if (!out.success) return null;
  const text = new TextDecoder().decode(out.stdout);
  const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : [];
  // A folder name with a line break in it would shift the lines: nothing is read from them.
  if (lines.length !== 3 || lines.some((l) => l === "")) throw strange("its folders' names");
  const real = async (p: string) => await Deno.realPath(resolve(dir, p)).catch(() => null);
  const [g, c, t] = await Promise.all(lines.map(real));
  if (!g || !c || !t) return null;
  // As git reads them: the work tree's `.git` leads to the git folder (not a `core.worktree`
  // naming another repository's files), and the git folder's `commondir` to the common one.
  const dotGit = join(t, ".git");
  const st = await Deno.stat(dotGit).catch(() => null);
  const viaDotGit = st?.isDirectory
    ? await real(dotGit)
    : st?.isFile
    ? await gitFileTarget(dotGit, t)
    : null;
  if (viaDotGit !== g) throw strange("its work tree's .git");
  if (g !== c) {
    const named = await readBoundedText(join(g, "commondir"), MAX_POINTER_BYTES)
      .catch(() => null);
    const via = named === null ? null : await real(resolve(g, named.replace(/[\r\n]+$/, "")));
    if (via !== c) throw strange("its commondir");
  }
  const isGitDir = async (p: string) =>
    (await Deno.stat(join(p, "objects")).catch(() => null))?.isDirectory === true &&
    (await Deno.stat(join(p, "HEAD")).catch(() => null)) !== null;
  if (!(await isGitDir(c))) return null;
  return { gitDir: g, gitDirs: g === c ? [g] : [g, c], workTree: t };
}
