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
 * A push (or anything that talks to a remote) needs the network and the
 * user's credentials, and a commit may sign with the user's keys (GPG or
 * SSH, which the sandbox hides): both run as before, under the guard alone,
 * and only when the person asks (the status watcher never runs them). So
 * does every command where bubblewrap cannot run, and every command when
 * the sandbox's mode is `none` (the agent's `bash` is not held either then).
 *
 * @module
 */
import { dirname, join, resolve } from "node:path";
import { readUserConfig } from "../config.ts";
import { isWithin } from "../roots.ts";
import { missingPrograms } from "../sandbox/deps.ts";
import {
  applyModeOverride,
  GATE_ONLY_READS,
  resolveSandbox,
  validateSandboxConfig,
} from "../sandbox/policy.ts";
import type { SandboxConfig } from "../../shared/sandbox_api.ts";

/**
 * Subcommands that need what the sandbox takes away: a remote's network and
 * credentials, or the person's signing keys (`commit.gpgSign`).
 */
const NEEDS_THE_USER = new Set(["push", "fetch", "pull", "ls-remote", "clone", "commit"]);
/** Subcommands that change the work tree's files (the rest write only the git folder). */
const WRITES_WORK_TREE = new Set(["checkout", "clean", "switch", "restore", "stash", "merge"]);

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

const PLAIN: GitLaunch = { cmd: "git", args: [], sandboxed: false };

/** Options of {@linkcode gitLaunch}. */
export interface GitSandboxOptions {
  /** The daemon's environment (HOME, BATON_SANDBOX, BATON_NO_SANDBOX, BATON_SANDBOX_PROTECT). */
  env?: (name: string) => string | undefined;
}

/** Whether bubblewrap runs here: checked once per process (it is a fact about the machine). */
let bwrapRuns: Promise<boolean> | null = null;

function bubblewrapRuns(): Promise<boolean> {
  bwrapRuns ??= (async () => {
    if (Deno.build.os !== "linux" || missingPrograms(["bwrap"]).length > 0) return false;
    try {
      const probe = await new Deno.Command("bwrap", {
        args: [...BASE, "--", "true"],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).output();
      return probe.success;
    } catch {
      return false;
    }
  })();
  return bwrapRuns;
}

/**
 * How to start git subcommand `sub` in `cwd`: inside bubblewrap where it
 * runs and the sandbox is on, else as is (see the module's comment).
 */
export async function gitLaunch(
  cwd: string,
  sub: string | undefined,
  options: GitSandboxOptions = {},
): Promise<GitLaunch> {
  if (sub !== undefined && NEEDS_THE_USER.has(sub)) return PLAIN;
  if (!(await bubblewrapRuns())) return PLAIN;
  const env = options.env ?? ((k: string) => Deno.env.get(k));
  const policy = await policyFor(cwd, env);
  if (policy === null) return PLAIN;
  const real = await Deno.realPath(cwd);
  const { gitDirs, workTree } = await repositoryOf(real);
  const writable = [
    ...gitDirs,
    ...(sub !== undefined && WRITES_WORK_TREE.has(sub) && workTree ? [workTree] : []),
  ]
    // Never a place the sandbox keeps from writes (`~/.baton`), whatever a `.git` file says.
    .filter((w) => !policy.denyWrite.some((d) => isWithin(w, d, "linux")));
  const args = [...BASE];
  for (const hidden of policy.denyRead) {
    let path: string;
    let isDir: boolean;
    try {
      path = await Deno.realPath(hidden);
      isDir = (await Deno.stat(path)).isDirectory;
    } catch {
      continue; // Not there: nothing to hide.
    }
    // Inside the repository it would change what git sees (an empty `.env` to commit);
    // around it, it would hide the repository.
    const repo = [...gitDirs, ...(workTree ? [workTree] : [])];
    if (repo.some((r) => isWithin(path, r, "linux") || isWithin(r, path, "linux"))) continue;
    args.push(...(isDir ? ["--tmpfs", path] : ["--ro-bind", "/dev/null", path]));
  }
  for (const w of writable) args.push("--bind", w, w);
  args.push("--chdir", real, "--", "git");
  return { cmd: "bwrap", args, sandboxed: true };
}

/** The sandbox's lists for `cwd` under the global config, or null when its mode is none. */
async function policyFor(
  cwd: string,
  env: (name: string) => string | undefined,
): Promise<{ denyRead: string[]; denyWrite: string[] } | null> {
  const home = env("HOME") ?? env("USERPROFILE") ?? "/";
  const batonDir = join(home, ".baton");
  let config: SandboxConfig = {};
  try {
    config = validateSandboxConfig((await readUserConfig(batonDir)).sandbox);
    config = applyModeOverride(config, { env: env("BATON_SANDBOX") });
  } catch {
    // A config the sessions refuse too: git runs under the default policy meanwhile.
    config = {};
  }
  const protect = (env("BATON_SANDBOX_PROTECT") ?? "").split(":").filter((p) => p.trim() !== "");
  const r = resolveSandbox(config, {
    home,
    cwd,
    batonDir,
    protect,
    noSandbox: env("BATON_NO_SANDBOX") === "1",
  });
  if (r.mode === "none") return null;
  const literal = (l: string[]) => l.filter((p) => !/[*?[\]]/.test(p));
  return {
    // bubblewrap gives git a /proc of its own.
    denyRead: literal(r.paths.denyRead).filter((p) => !GATE_ONLY_READS.includes(p)),
    denyWrite: literal(r.paths.denyWrite),
  };
}

/**
 * The repository `dir` is in: its git folders (a linked work tree's own and
 * the common one) and its work tree, as real paths; none outside one.
 */
async function repositoryOf(dir: string): Promise<{ gitDirs: string[]; workTree: string | null }> {
  for (let at = dir;; at = dirname(at)) {
    const dotGit = join(at, ".git");
    const st = await Deno.lstat(dotGit).catch(() => null);
    if (st?.isDirectory) return { gitDirs: [dotGit], workTree: at };
    if (st?.isFile) {
      const text = (await Deno.readTextFile(dotGit).catch(() => "")).slice(0, 4096);
      const m = text.match(/^gitdir:\s*(.+?)\s*$/m);
      const gitDir = m ? await Deno.realPath(resolve(at, m[1]!)).catch(() => null) : null;
      if (!gitDir) return { gitDirs: [], workTree: at };
      const common = await Deno.readTextFile(join(gitDir, "commondir")).catch(() => null);
      const commonDir = common
        ? await Deno.realPath(resolve(gitDir, common.trim())).catch(() => null)
        : null;
      return { gitDirs: commonDir ? [gitDir, commonDir] : [gitDir], workTree: at };
    }
    if (dirname(at) === at) return { gitDirs: [], workTree: null };
  }
}
