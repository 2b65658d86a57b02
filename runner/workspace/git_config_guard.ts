/**
 * What baton's git service never lets a repository's own config make git
 * run. The service runs git outside the agent sandbox, as the runner's
 * user, while the agent can write the repository's `.git/config` from
 * inside it (the session's folder is writable). A `core.fsmonitor` there
 * would run at the status watcher's next `git status`, a filter's `clean`
 * at the next `git add`, a hook at the next commit from the Changes panel:
 * each one a way out of the sandbox.
 *
 * So every git command gets, on its command line (which outranks every
 * config file and reaches the git processes it starts):
 *
 * - always: no fsmonitor, no hooks (`core.hooksPath=/dev/null`: a commit
 *   from the Changes panel runs no pre-commit hook), no `ext::` transport,
 *   no signature check in `log`, no automatic gc, no recursing into
 *   submodules; a remote that is a path on this machine gets a
 *   `receive-pack` without hooks (a push there runs that repository's own
 *   hooks otherwise), and a repository that rewrites remote URLs in its own
 *   config (`url.*.insteadOf`) is refused, since a rewrite could make one;
 * - always, whatever the repository says: the signing, askpass and
 *   credential programs ({@linkcode PINNED}, credential helpers) set to the
 *   user's own or git's default, so a setting added after the guard's read
 *   does not count either (`core.gitProxy` is read by no git the service
 *   runs, git_run.ts);
 * - for each other setting of the repository's own scopes (`local`,
 *   `worktree`, and what they include) that names a program: the value the
 *   user's own config gives it (git-lfs's global filter stays), else a
 *   harmless one.
 *
 * Diff commands also get `--no-ext-diff --no-textconv`, and status and diff
 * `--ignore-submodules=dirty` (a submodule's own config is not read here).
 * A program-naming key git cannot override (with `=` in it) stops the
 * command. What this cannot close for those per-key settings: the config
 * is read by one git process and used by the next, so an agent that
 * rewrites it in between, many times, may still win a race. git_sandbox.ts
 * runs every command but a push, a switch and a commit's `commit-tree`
 * inside bubblewrap, where what git then runs is held like the agent's own
 * bash.
 *
 * @module
 */

/**
 * Settings that name a program git runs (git-config(1)), lowercased as git
 * lists them, that are restated when the repository sets them. The fixed
 * ones ({@linkcode PINNED}) are restated always; `core.gitProxy` (first
 * match wins, so no later setting overrides it) is switched off by
 * `GIT_PROXY_COMMAND` in git_run.ts.
 */
const RUNS_A_PROGRAM =
  /^(core\.alternaterefscommand|filter\..+\.(clean|smudge|process)|remote\..+\.(uploadpack|receivepack)|merge\..+\.driver|diff\.external|diff\..+\.(command|textconv)|core\.(editor|pager)|sequence\.editor|hook\..+\.command|gc\.recentobjectshook|lfs\.extension\..+\.(clean|smudge)|lfs\.customtransfer\..+\.path)$/;

/** Always on the command line, whatever any config says. */
const ALWAYS = [
  "core.fsmonitor=false",
  "core.hooksPath=/dev/null",
  "protocol.ext.allow=never",
  "log.showSignature=false",
  "gc.auto=0",
  "submodule.recurse=false",
  "push.recurseSubmodules=no",
];

/**
 * A repository setting the command line cannot neutralise: a key with `=`
 * (git splits `-c` at the first one), or a URL rewrite.
 */
export class UnsafeConfigError extends Error {
  constructor(readonly key: string, what: string) {
    super(
      `The repository's own config ${what} ('${key.slice(0, 200)}') in a way the git service ` +
        "cannot neutralise: it will not run git here",
    );
    this.name = "UnsafeConfigError";
  }
}

/**
 * The programs a push or a commit runs whose keys are known in advance:
 * always set on the command line to the user's own value or git's default,
 * whether or not the repository sets them when the guard reads it. A
 * setting the agent adds between that read and git's own (the race the
 * module's comment names) is then outranked too. Each: the keys that set it
 * (git keeps the last), and the value without any.
 */
const PINNED: { keys: RegExp; key: string; none: string }[] = [
  { keys: /^core\.askpass$/i, key: "core.askPass", none: "" },
  // gpg.program and gpg.openpgp.program set the same program.
  { keys: /^gpg\.(openpgp\.)?program$/i, key: "gpg.program", none: "gpg" },
  { keys: /^gpg\.x509\.program$/i, key: "gpg.x509.program", none: "gpgsm" },
  { keys: /^gpg\.ssh\.program$/i, key: "gpg.ssh.program", none: "ssh-keygen" },
  { keys: /^gpg\.ssh\.defaultkeycommand$/i, key: "gpg.ssh.defaultKeyCommand", none: "" },
];

/** Credential helpers: a list, which an empty entry clears (a URL's own included). */
const CREDENTIAL_HELPER = /^credential\.(.+\.)?helper$/i;

/** Whether a setting comes from the person's own config (system, global), not the repository's. */
function usersOwn(e: ConfigEntry): boolean {
  return e.scope !== "local" && e.scope !== "worktree" && e.scope !== "command";
}

/**
 * The {@linkcode PINNED} settings and the credential helpers: the user's
 * own, or what git would use without any (for `core.askPass`, the
 * machine's `SSH_ASKPASS`, which an empty setting would switch off).
 */
function pinnedSettings(entries: ConfigEntry[], sshAskPass: string | undefined): string[] {
  const out: string[] = [];
  for (const p of PINNED) {
    const own = entries.filter((e) => usersOwn(e) && p.keys.test(e.key));
    const none = p.key === "core.askPass" && sshAskPass ? sshAskPass : p.none;
    out.push(`${p.key}=${own.length ? own[own.length - 1]!.value : none}`);
  }
  out.push("credential.helper=");
  for (const e of entries) {
    // A key with "=" cannot be given with -c; such a helper of the person's is not used.
    if (usersOwn(e) && CREDENTIAL_HELPER.test(e.key) && !e.key.includes("=")) {
      out.push(`${e.key}=${e.value}`);
    }
  }
  return out;
}

/** What a repository-scope setting becomes when the user's own config does not set it. */
function harmless(key: string): string {
  if (key.endsWith(".uploadpack")) return "git-upload-pack";
  if (key.endsWith(".receivepack")) return "git-receive-pack";
  // An empty filter, askpass, proxy or helper is none at all.
  return "";
}

/** One setting as `git config --list` gives it. */
export interface ConfigEntry {
  scope: string;
  /** As git lists it: section and name lowercased, a subsection as written. */
  key: string;
  value: string;
}

/**
 * Parses `git config --list -z` (`key\nvalue\0` per setting), with
 * `--show-scope` (`scope\0key\nvalue\0`) when `scoped`.
 */
export function parseConfigList(text: string, scoped: boolean): ConfigEntry[] {
  const parts = text.split("\0");
  const out: ConfigEntry[] = [];
  for (let i = 0; i < parts.length; i++) {
    const scope = scoped ? parts[i++]! : "local";
    const rec = parts[i];
    if (!rec) continue;
    const nl = rec.indexOf("\n");
    out.push({
      scope,
      key: nl < 0 ? rec : rec.slice(0, nl),
      value: nl < 0 ? "" : rec.slice(nl + 1),
    });
  }
  return out;
}

/**
 * The `-c key=value` pairs for a repository whose config lists `entries`:
 * the fixed ones, then each program-naming setting of the repository's
 * scopes replaced by the user's own value or a harmless one.
 */
export function guardSettings(
  entries: ConfigEntry[],
  sub?: string,
  sshAskPass = Deno.env.get("SSH_ASKPASS"),
): string[] {
  const out = [...ALWAYS, ...pinnedSettings(entries, sshAskPass)];
  if (sub === "push") pushChecks(entries);
  const ownKeys = new Set<string>();
  for (const e of entries) {
    if (
      (e.scope === "local" || e.scope === "worktree") && RUNS_A_PROGRAM.test(e.key.toLowerCase())
    ) {
      ownKeys.add(e.key);
    }
  }
  for (const e of entries) {
    if (
      (e.scope === "local" || e.scope === "worktree") &&
      /^url\..+\.(push)?insteadof$/i.test(e.key)
    ) throw new UnsafeConfigError(e.key, "rewrites remote URLs");
  }
  for (const key of ownKeys) {
    if (key.includes("=")) throw new UnsafeConfigError(key, "names a program");
    const outer = entries.filter((e) => e.key === key && usersOwn(e)).map((e) => e.value);
    out.push(`${key}=${outer.length ? outer[outer.length - 1] : harmless(key.toLowerCase())}`);
  }
  // A push to a path runs git-receive-pack there, under that repository's own config.
  for (const e of entries) {
    const m = e.key.match(/^remote\.(.+)\.(url|pushurl)$/i);
    if (!m || !isLocalUrl(e.value)) continue;
    if (m[1]!.includes("=")) throw new UnsafeConfigError(e.key, "names a local remote");
    out.push(`remote.${m[1]}.receivepack=${LOCAL_RECEIVE_PACK}`);
  }
  return out;
}

/**
 * The receive-pack a push to a path on this machine runs, under that
 * repository's config: no hooks, no gc, no fsmonitor, no alternate-refs
 * command, and no update of its checked-out branch (`updateInstead` would
 * check files out there through its own filters).
 */
const LOCAL_RECEIVE_PACK = "git -c core.hooksPath=/dev/null -c receive.autogc=false " +
  "-c core.fsmonitor=false -c core.alternateRefsCommand= -c receive.denyCurrentBranch=refuse " +
  "receive-pack";

/** Whether a remote URL is a path on this machine (not `host:path`, ssh, http, git). */
export function isLocalUrl(url: string): boolean {
  if (/^file:/i.test(url)) return true;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) return false;
  // scp-like `host:path` has a colon before any slash.
  const colon = url.indexOf(":");
  const slash = url.indexOf("/");
  return colon < 0 || (slash >= 0 && slash < colon);
}

/**
 * What a push may not follow in the repository's own config: connection
 * settings (`http.proxy`, `http.curloptResolve`, `http.sslVerify`, …) that
 * would send the person's credentials elsewhere, and a push target chosen
 * by `remote.pushDefault` or `branch.*.pushRemote` that is not a remote with
 * a URL (a path there is pushed to with that repository's own hooks).
 */
function pushChecks(entries: ConfigEntry[]): void {
  httpChecks(entries, "a push");
  const own = entries.filter((e) => e.scope === "local" || e.scope === "worktree");
  const remotes = new Set(
    entries.flatMap((e) => e.key.match(/^remote\.(.+)\.(url|pushurl)$/i)?.[1] ?? []),
  );
  const target = own.find((e) =>
    /^(remote\.pushdefault|branch\..+\.pushremote)$/i.test(e.key) && !remotes.has(e.value)
  );
  if (target) throw new UnsafeConfigError(target.key, "pushes to a place that is not a remote");
}

/**
 * Refuses the repository's own `http.*` settings for a command run as the
 * person that may reach the network (`what`): a proxy, `curloptResolve` or
 * `sslVerify` there would send the person's credentials elsewhere.
 */
function httpChecks(entries: ConfigEntry[], what: string): void {
  const http = entries.find((e) => !usersOwn(e) && e.scope !== "command" && /^http\./i.test(e.key));
  if (http) throw new UnsafeConfigError(http.key, `sets how ${what} connects`);
}

/** Extra arguments for subcommand `sub` (placed right after it). */
export function guardFlags(sub: string | undefined): string[] {
  if (sub === "diff") return ["--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty"];
  if (sub === "status") return ["--ignore-submodules=dirty"];
  return [];
}

/**
 * The `-c` settings for git run in `cwd`, read with `git config --list`
 * (which runs nothing a config names). Without `--show-scope` (git before
 * 2.26) every program-naming setting counts as the repository's.
 */
export async function guardFor(
  cwd: string,
  env: Record<string, string>,
  sub?: string,
  asPerson = false,
): Promise<string[]> {
  // A command run as the person outside its usual way (a signing commit-tree) may fetch.
  const settle = (entries: ConfigEntry[]) => {
    if (asPerson) httpChecks(entries, `git ${sub ?? ""}`.trim());
    return settle(entries);
  };
  const list = async (args: string[]) => {
    try {
      const out = await new Deno.Command("git", {
        args: ["config", "--list", "-z", ...args],
        cwd,
        env,
        stdin: "null",
        stdout: "piped",
        stderr: "null",
        signal: AbortSignal.timeout(10_000),
      }).output();
      return out.success ? new TextDecoder().decode(out.stdout) : null;
    } catch (err) {
      // No git at all: the command itself then says so (`git_unavailable`).
      if (err instanceof Deno.errors.NotFound) return "missing";
      return null;
    }
  };
  const scoped = await list(["--show-scope"]);
  if (scoped === "missing") return [...ALWAYS];
  if (scoped !== null) {
    const entries = parseConfigList(scoped, true);
    // A FIFO include blocks the listing until its timeout and is refused as unlistable;
    // a /proc file or a device is refused here.
    if (entries.some((e) => /^include(if\..+)?\.path$/i.test(e.key))) {
      const all = await list(["--show-origin"]);
      if (all === null || all === "missing") {
        throw new UnsafeConfigError("include", "cannot be listed");
      }
      await includesAreFiles(all);
    }
    return guardSettings(entries, sub);
  }
  const plain = await list([]);
  if (plain === "missing") return [...ALWAYS];
  // A config that cannot be listed is not run with what could not be read of it: an include
  // of a file git cannot parse here may be one it parses where that file is hidden (the
  // sandboxed git sees it empty) and the rest then counts.
  if (plain === null) throw new UnsafeConfigError("include", "cannot be listed");
  return settle(parseConfigList(plain, false));
}

/**
 * Refuses an include that is not a regular file: a FIFO (or a /proc file)
 * can answer the guard's read with one config and git's next read with
 * another, which makes the race between them certain.
 */
async function includesAreFiles(text: string): Promise<void> {
  // `file:<origin>\0<key>\n<value>\0`, per entry.
  const parts = text.split("\0");
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const origin = parts[i]!;
    const nl = parts[i + 1]!.indexOf("\n");
    const key = nl < 0 ? parts[i + 1]! : parts[i + 1]!.slice(0, nl);
    if (!/^include(if\..+)?\.path$/i.test(key) || nl < 0 || !origin.startsWith("file:")) continue;
    let path = parts[i + 1]!.slice(nl + 1);
    const home = Deno.env.get("HOME") ?? "";
    if (path.startsWith("~/")) path = home + path.slice(1);
    const from = origin.slice("file:".length);
    const target = path.startsWith("/")
      ? path
      : `${from.slice(0, from.lastIndexOf("/") + 1)}${path}`;
    const st = await Deno.stat(target).catch(() => null);
    if (st && !st.isFile) throw new UnsafeConfigError(key, "includes something that is not a file");
  }
}
