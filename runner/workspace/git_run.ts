/**
 * Runs the real `git` binary for the git service: argument arrays only (no
 * shell), never a prompt, a deadline, capped output, nothing the
 * repository's own config names run (git_config_guard.ts), and, where it
 * can, inside bubblewrap (git_sandbox.ts).
 *
 * @module
 */
import { isAbsolute, normalize, resolve, sep } from "node:path";
import { isWithin } from "../roots.ts";
import { guardFlags, guardFor, UnsafeConfigError } from "./git_config_guard.ts";
import { GIT_ENV_KEPT, gitLaunch, GitSandboxError } from "./git_sandbox.ts";
import { FOLDER_MOVED_EXIT, FOLDER_MOVED_MARK } from "./_git_folder_pins.ts";

/** A git request that failed, with the code the viewer sees. */
export class GitError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = "GitError";
  }
}

/** How long one git command may run before it is killed (push has its own). */
export const GIT_TIMEOUT_MS = 30_000;
/** Push talks to a remote over the network: it gets longer. */
export const GIT_PUSH_TIMEOUT_MS = 120_000;
/** Most stdout kept of one command (status of a huge tree, a diff); beyond it `truncated`. */
export const GIT_MAX_OUTPUT = 8 * 1024 * 1024;

/** Options of {@linkcode runGit}. */
export interface RunGitOptions {
  cwd: string;
  timeoutMs?: number;
  /** Bytes of stdout kept; the rest is read and dropped (default GIT_MAX_OUTPUT). */
  maxBytes?: number;
  /** Written to git's stdin (a commit message). */
  stdin?: string;
  /** Receives stderr as it arrives (push progress). */
  onStderr?: (text: string) => void;
  /**
   * Run as the person, outside the git sandbox, whatever the subcommand (a
   * commit's signing step, which needs the person's keys).
   */
  asPerson?: boolean;
}

/** What one git command did. */
export interface GitResult {
  code: number;
  stdout: Uint8Array;
  stderr: string;
  /** Stdout went past `maxBytes`. */
  truncated: boolean;
}

/**
 * The environment git runs with: no terminal prompt (https credentials come
 * from the machine's helpers or fail), ssh in batch mode unless the machine
 * set its own ssh command, no `git://` proxy program unless the machine
 * names one (`core.gitProxy` is not read), no pager, pathspecs taken literally (a client's
 * `:(top)` or `*` is a file name, not magic), C messages.
 */
function gitEnv(sub: string | undefined): Record<string, string> {
  const env: Record<string, string> = {
    GIT_TERMINAL_PROMPT: "0",
    GIT_PAGER: "cat",
    GIT_LITERAL_PATHSPECS: "1",
    GIT_OPTIONAL_LOCKS: "0",
    LC_ALL: "C",
  };
  if (!Deno.env.get("GIT_SSH_COMMAND")) env.GIT_SSH_COMMAND = "ssh -o BatchMode=yes";
  // git takes the first core.gitProxy that matches, so no later setting overrides a
  // repository's own; set (even empty), this variable makes git read none of them.
  if (Deno.env.get("GIT_PROXY_COMMAND") === undefined) env.GIT_PROXY_COMMAND = "";
  // A partial clone fetches a missing object on demand, as the person, from a remote the
  // repository's config names (git 2.44 and later honour this).
  if (sub !== "push") env.GIT_NO_LAZY_FETCH = "1";
  return env;
}

/** Runs `git args…` in `cwd`; resolves whatever its exit code (callers decide). */
export async function runGit(args: string[], options: RunGitOptions): Promise<GitResult> {
  const timeoutMs = options.timeoutMs ?? GIT_TIMEOUT_MS;
  const maxBytes = options.maxBytes ?? GIT_MAX_OUTPUT;
  const env = gitEnv(args[0]);
  // What the repository's own config may not make git run (git_config_guard.ts).
  let guard: string[];
  try {
    guard = (await guardFor(options.cwd, env, args[0], options.asPerson === true))
      .flatMap((s) => ["-c", s]);
  } catch (err) {
    if (err instanceof UnsafeConfigError) throw new GitError("unsafe_config", err.message);
    throw err;
  }
  const [sub, ...rest] = args;
  // Inside bubblewrap where it runs (git_sandbox.ts): what the config still makes git run
  // can do no more than the agent's bash.
  let launch;
  try {
    const kept = GIT_ENV_KEPT.flatMap((k) => {
      const v = Deno.env.get(k);
      return v === undefined ? [] : [[k, v] as const];
    });
    launch = options.asPerson
      ? { cmd: "git", args: [], sandboxed: false }
      : await gitLaunch(options.cwd, sub, { gitEnv: { ...Object.fromEntries(kept), ...env } });
  } catch (err) {
    if (err instanceof GitSandboxError) throw new GitError(err.code, err.message);
    throw err;
  }
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(launch.cmd, {
      args: [
        ...launch.args,
        "-c",
        "core.quotepath=false",
        "-c",
        "color.ui=false",
        ...guard,
        ...(sub === undefined ? [] : [sub, ...guardFlags(sub)]),
        ...rest,
      ],
      cwd: options.cwd,
      env,
      stdin: options.stdin !== undefined ? "piped" : "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new GitError("git_unavailable", "The git binary is not installed on this runner");
    }
    throw err;
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }, timeoutMs);
  try {
    if (options.stdin !== undefined) {
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(options.stdin)).catch(() => {});
      await w.close().catch(() => {});
    }
    const [out, err, status] = await Promise.all([
      readCapped(child.stdout, maxBytes),
      readText(child.stderr, 64 * 1024, options.onStderr),
      child.status,
    ]);
    if (timedOut) {
      throw new GitError("git_timeout", `git ${args[0]} did not finish in ${timeoutMs / 1000} s`);
    }
    if (launch.sandboxed && status.code === FOLDER_MOVED_EXIT && err.includes(FOLDER_MOVED_MARK)) {
      throw new GitError(
        "unsafe_config",
        "A folder of the repository was replaced while git was starting: the git service did " +
          "not run git there",
      );
    }
    return { code: status.code, stdout: out.bytes, stderr: err, truncated: out.truncated };
  } finally {
    clearTimeout(timer);
  }
}

/** Runs git and throws `git_failed` with its message when it exits non-zero. */
export async function git(args: string[], options: RunGitOptions): Promise<GitResult> {
  const r = await runGit(args, options);
  if (r.code !== 0) throw new GitError("git_failed", gitMessage(r.stderr, args[0] ?? "git"));
  return r;
}

/** The part of git's stderr worth showing (its `fatal:`/`error:` lines, else the last lines). */
export function gitMessage(stderr: string, what: string): string {
  const lines = stderr.split(/\r?\n|\r/).map((l) => l.trim()).filter(Boolean);
  const errs = lines.filter((l) => /^(fatal|error):/.test(l));
  const text = (errs.length ? errs : lines.slice(-3)).join("\n").slice(0, 2000);
  return text || `git ${what} failed`;
}

async function readCapped(
  stream: ReadableStream<Uint8Array>,
  max: number,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  let truncated = false;
  for await (const chunk of stream) {
    if (size >= max) {
      truncated = true;
      continue;
    }
    const room = max - size;
    if (chunk.length > room) truncated = true;
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    chunks.push(part);
    size += part.length;
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.length;
  }
  return { bytes, truncated };
}

async function readText(
  stream: ReadableStream<Uint8Array>,
  max: number,
  onText?: (text: string) => void,
): Promise<string> {
  const dec = new TextDecoder();
  let text = "";
  for await (const chunk of stream) {
    const part = dec.decode(chunk, { stream: true });
    onText?.(part);
    if (text.length < max) text += part;
  }
  return text.slice(-max);
}

/** The longest path a client may name. */
const MAX_PATH = 4096;

/**
 * Checks a path a client named, relative to the repository's top folder:
 * not absolute, no NUL, not `..` out of the repository, not inside `.git`,
 * and (what exists of it) not a symlink out. Answers the normalised path.
 */
export async function repoPath(top: string, p: unknown): Promise<string> {
  if (typeof p !== "string" || p === "" || p.length > MAX_PATH || p.includes("\0")) {
    throw new GitError("bad_request", "A path must be a non-empty string");
  }
  if (isAbsolute(p) || /^[A-Za-z]:/.test(p)) {
    throw new GitError("bad_request", `Path must be relative to the repository: '${p}'`);
  }
  const rel = normalize(p).replace(/[\\/]+$/, "");
  if (rel === "." || rel === ".." || rel.startsWith(".." + sep) || rel.startsWith("../")) {
    throw new GitError("path_outside_repo", `Path is outside the repository: '${p}'`);
  }
  const first = rel.split(/[\\/]/)[0]!;
  if (first.toLowerCase() === ".git") {
    throw new GitError("path_outside_repo", `Path is inside .git: '${p}'`);
  }
  // The deepest part that exists must really be inside (a symlinked folder could lead out).
  let probe = resolve(top, rel);
  for (;;) {
    try {
      // A symlink named by the client is a file git tracks (what it points to does not
      // matter to git): its folder must be inside. Any other symlink on the way is followed.
      const leafLink = probe === resolve(top, rel) && (await Deno.lstat(probe)).isSymlink;
      const real = await Deno.realPath(leafLink ? resolve(probe, "..") : probe);
      if (!isWithin(real, top, Deno.build.os)) {
        throw new GitError("path_outside_repo", `Path is outside the repository: '${p}'`);
      }
      break;
    } catch (err) {
      if (err instanceof GitError) throw err;
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      const up = resolve(probe, "..");
      if (up === probe) break;
      probe = up;
    }
  }
  return rel;
}

/** Checks several paths (at most 1000). */
export async function repoPaths(top: string, ps: unknown): Promise<string[]> {
  if (!Array.isArray(ps) || ps.length === 0 || ps.length > 1000) {
    throw new GitError("bad_request", "paths must be a list of 1 to 1000 paths");
  }
  const out: string[] = [];
  for (const p of ps) out.push(await repoPath(top, p));
  return out;
}

/** Checks a branch or remote name: git's own rules, and never an option. */
export async function refName(
  top: string,
  name: unknown,
  what = "branch",
): Promise<string> {
  if (typeof name !== "string" || name === "" || name.length > 255) {
    throw new GitError("bad_request", `A ${what} name must be a non-empty string`);
  }
  if (name.startsWith("-") || /[\0\s]/.test(name)) {
    throw new GitError("bad_ref", `Invalid ${what} name: '${name}'`);
  }
  if (what === "branch") {
    const r = await runGit(["check-ref-format", "--branch", name], { cwd: top });
    if (r.code !== 0) throw new GitError("bad_ref", `Invalid branch name: '${name}'`);
  } else if (!/^[A-Za-z0-9._\/-]+$/.test(name)) {
    throw new GitError("bad_ref", `Invalid ${what} name: '${name}'`);
  }
  return name;
}
