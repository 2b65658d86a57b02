import assert from "node:assert/strict";
import { join } from "node:path";
import {
  guardFor,
  guardSettings,
  isLocalUrl,
  parseConfigList,
  UnsafeConfigError,
} from "./git_config_guard.ts";
import { checkout, commit, diff, discard, log, push, repoTop, stage, status } from "./git.ts";

Deno.test("parseConfigList reads git's -z listing, with and without scopes", () => {
  assert.deepEqual(
    parseConfigList("global\0user.name\nAda\0local\0filter.Evil.clean\ntouch x; cat\0", true),
    [
      { scope: "global", key: "user.name", value: "Ada" },
      { scope: "local", key: "filter.Evil.clean", value: "touch x; cat" },
    ],
  );
  assert.deepEqual(parseConfigList("core.bare\nfalse\0flag\0", false), [
    { scope: "local", key: "core.bare", value: "false" },
    { scope: "local", key: "flag", value: "" },
  ]);
});

Deno.test("guardSettings: the repository's program settings give way to the user's own or to none", () => {
  const e = (scope: string, key: string, value: string) => ({ scope, key, value });
  const got = guardSettings([
    e("global", "filter.lfs.process", "git-lfs filter-process"),
    e("local", "filter.lfs.process", "evil"),
    e("local", "filter.Evil.clean", "touch x; cat"),
    e("system", "credential.helper", "cache"),
    e("local", "credential.helper", "!evil"),
    e("local", "gpg.program", "./evil"),
    e("worktree", "remote.origin.receivepack", "evil"),
    e("local", "user.name", "kept"),
    e("global", "core.editor", "vim"),
  ]);
  // Always first: fsmonitor and hooks off, whatever the config.
  assert.deepEqual(got.slice(0, 2), ["core.fsmonitor=false", "core.hooksPath=/dev/null"]);
  assert.deepEqual(
    got.filter((g) => /^(filter|credential|gpg\.program|remote|user|core\.editor)/.test(g)),
    [
      "gpg.program=gpg",
      "credential.helper=",
      "credential.helper=cache",
      "filter.lfs.process=git-lfs filter-process",
      "filter.Evil.clean=",
      "remote.origin.receivepack=git-receive-pack",
    ],
  );
});

Deno.test("guardSettings: signing, askpass and credential programs are always the person's own or git's default", () => {
  // Set whether or not the repository names them when the guard reads its config: one the
  // agent adds a moment later, before git reads the config again, is outranked too.
  const e = (scope: string, key: string, value: string) => ({ scope, key, value });
  const none = guardSettings([], undefined, "");
  assert.deepEqual(none.filter((g) => /^(core\.askPass|gpg|credential)/.test(g)), [
    "core.askPass=",
    "gpg.program=gpg",
    "gpg.x509.program=gpgsm",
    "gpg.ssh.program=ssh-keygen",
    "gpg.ssh.defaultKeyCommand=",
    "credential.helper=",
  ]);
  // Without a core.askPass of the person's, the machine's SSH_ASKPASS stays what git asks.
  assert.ok(
    guardSettings([], undefined, "/usr/bin/ksshaskpass").includes(
      "core.askPass=/usr/bin/ksshaskpass",
    ),
  );
  const own = guardSettings([
    e("global", "gpg.program", "/opt/gpg2"),
    e("system", "gpg.ssh.program", "/usr/bin/ssh-keygen"),
    e("global", "core.askpass", "/usr/lib/ssh/ksshaskpass"),
    e("global", "credential.https://github.com.helper", "!gh auth git-credential"),
    e("global", "credential.helper", "cache"),
    e("global", "credential.https://a=b.helper", "odd"),
    // The repository's own, of each kind, and one for a URL with "=" (cleared all the same).
    e("local", "gpg.openpgp.program", "./evil"),
    e("local", "core.askpass", "./evil"),
    e("local", "credential.https://x?a=b.helper", "!evil"),
  ]);
  assert.deepEqual(own.filter((g) => /^(core\.askPass|gpg|credential)/.test(g)), [
    "core.askPass=/usr/lib/ssh/ksshaskpass",
    "gpg.program=/opt/gpg2",
    "gpg.x509.program=gpgsm",
    "gpg.ssh.program=/usr/bin/ssh-keygen",
    "gpg.ssh.defaultKeyCommand=",
    "credential.helper=",
    "credential.https://github.com.helper=!gh auth git-credential",
    "credential.helper=cache",
  ]);
  assert.ok(!own.some((g) => g.includes("evil")), own.join("\n"));
});

Deno.test("guardSettings: local remotes push without hooks; keys it cannot override are refused", () => {
  const e = (scope: string, key: string, value: string) => ({ scope, key, value });
  const got = guardSettings([
    e("local", "remote.origin.url", "/srv/repo.git"),
    e("local", "remote.gh.url", "git@github.com:ada/x.git"),
    e("local", "remote.web.pushurl", "https://example.com/x.git"),
  ]);
  assert.deepEqual(got.filter((g) => g.startsWith("remote.")), [
    "remote.origin.receivepack=git -c core.hooksPath=/dev/null -c receive.autogc=false " +
    "-c core.fsmonitor=false -c core.alternateRefsCommand= -c receive.denyCurrentBranch=refuse " +
    "receive-pack",
  ]);
  for (
    const [key, value] of [["filter.a=b.clean", "evil"], ["url./tmp/x.pushinsteadof", "git@h:r"]]
  ) {
    assert.throws(() => guardSettings([e("local", key!, value!)]), UnsafeConfigError, key);
  }
  // The person's own rewrites are theirs.
  assert.doesNotThrow(() => guardSettings([e("global", "url.git@h:.insteadof", "https://h/")]));
  for (const u of ["/srv/r.git", "../r", "r.git", "file:///srv/r.git"]) assert.ok(isLocalUrl(u), u);
  for (const u of ["git@github.com:a/b.git", "ssh://h/r", "https://h/r", "git://h/r"]) {
    assert.equal(isLocalUrl(u), false, u);
  }
});

/** Runs git in `dir` for the test's own setup (not through the service). */
async function sh(dir: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("git", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

/** A new temporary repository with `a.txt` ("one") committed on main. */
async function committedRepo(prefix: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix });
  await sh(dir, "init", "-q", "-b", "main");
  await sh(dir, "config", "user.email", "ada@example.com");
  await sh(dir, "config", "user.name", "Ada");
  await Deno.writeTextFile(join(dir, "a.txt"), "one\n");
  await sh(dir, "add", "a.txt");
  await sh(dir, "commit", "-q", "-m", "first");
  return dir;
}

Deno.test("the git service runs nothing a repository's own config names: fsmonitor, filters, hooks, diff drivers", async () => {
  const dir = await committedRepo("baton-git-guard-");
  const marks = await Deno.makeTempDir({ prefix: "baton-git-marks-" });
  try {
    // What an agent, sandboxed but free to write its folder, could leave behind.
    const mark = (name: string) => `touch '${join(marks, name)}'`;
    for (
      const [key, value] of [
        ["core.fsmonitor", mark("fsmonitor")],
        ["filter.evil.clean", `${mark("clean")}; cat`],
        ["filter.evil.smudge", `${mark("smudge")}; cat`],
        ["filter.proc.process", mark("process")],
        ["diff.external", mark("external-diff")],
        ["diff.evil.textconv", `${mark("textconv")}; cat`],
        ["core.hooksPath", ".git/hooks"],
      ]
    ) await sh(dir, "config", key!, value!);
    await Deno.writeTextFile(
      join(dir, ".gitattributes"),
      "*.txt filter=evil diff=evil\n*.bin filter=proc\n",
    );
    await Deno.writeTextFile(
      join(dir, ".git", "hooks", "pre-commit"),
      `#!/bin/sh\n${mark("hook")}\n`,
      {
        mode: 0o755,
      },
    );
    await Deno.writeTextFile(join(dir, "a.txt"), "one\ntwo\n");
    await Deno.writeTextFile(join(dir, "b.bin"), "x");

    const top = await repoTop(dir);
    const st = await status(top);
    assert.deepEqual(st.unstaged.map((f) => f.path), ["a.txt"]);
    assert.deepEqual(st.untracked.map((f) => f.path).sort(), [".gitattributes", "b.bin"]);
    const d = await diff(top, { path: "a.txt" });
    assert.match(JSON.stringify(d), /two/);
    await stage(top, { paths: ["a.txt", ".gitattributes", "b.bin"] });
    await commit(top, { message: "second" });
    // A remote on this machine, whose own hook a push would run.
    const bare = join(marks, "..", `${marks.split("/").pop()}-remote.git`);
    await sh(dir, "init", "-q", "--bare", bare);
    await Deno.writeTextFile(
      join(bare, "hooks", "post-receive"),
      `#!/bin/sh\n${mark("remote-hook")}\n`,
      {
        mode: 0o755,
      },
    );
    await sh(dir, "remote", "add", "origin", bare);
    await push(top, {}, () => {});
    await Deno.remove(bare, { recursive: true });
    assert.equal((await log(top, { limit: 1 }))[0]?.subject, "second");
    await Deno.writeTextFile(join(dir, "a.txt"), "changed\n");
    await discard(top, { paths: ["a.txt"], confirm: true });
    assert.equal(await Deno.readTextFile(join(dir, "a.txt")), "one\ntwo\n");

    const ran: string[] = [];
    for await (const e of Deno.readDir(marks)) ran.push(e.name);
    assert.deepEqual(ran, [], "programs from the repository's config ran");
  } finally {
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(marks, { recursive: true });
  }
});

Deno.test("a config that cannot be listed (an include git cannot parse) is not run with what could be read", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-guard-include-" });
  try {
    await sh(dir, "init", "-q");
    const junk = join(dir, "not-config");
    await Deno.writeTextFile(junk, "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    await sh(dir, "config", "filter.x.clean", "touch pwned");
    await Deno.writeTextFile(join(dir, ".git", "config"), `[include]\n\tpath = ${junk}\n`, {
      append: true,
    });
    await assert.rejects(guardFor(dir, {}), /cannot be listed/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "an include that is not a regular file (a FIFO that answers each read differently) is refused",
  ignore: Deno.build.os === "windows",
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "baton-guard-fifo-" });
    try {
      await sh(dir, "init", "-q");
      const fifo = join(dir, "cfg");
      await sh(dir, "config", "include.path", "../cfg");
      assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
      await assert.rejects(
        guardFor(dir, {}),
        /cannot be listed|includes something that is not a file/,
      );
      // A regular file is read as it is.
      await Deno.remove(fifo);
      await Deno.writeTextFile(fifo, "[user]\n\tname = x\n");
      assert.ok((await guardFor(dir, {})).includes("core.fsmonitor=false"));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("a push follows no connection setting and no push target of the repository's own config", () => {
  const e = (scope: string, key: string, value: string) => ({ scope, key, value });
  const remote = e("local", "remote.origin.url", "https://github.com/ada/x.git");
  for (
    const bad of [
      e("local", "http.curloptresolve", "github.com:443:127.0.0.1"),
      e("local", "http.https://github.com/.proxy", "http://evil:8080"),
      e("local", "remote.pushdefault", "/tmp/evil.git"),
      e("worktree", "branch.main.pushremote", "../evil"),
    ]
  ) {
    assert.throws(() => guardSettings([remote, bad], "push"), UnsafeConfigError, bad.key);
    assert.doesNotThrow(() => guardSettings([remote, bad], "status"), bad.key);
  }
  // The person's own settings, and a push target that is a remote with a URL, are fine.
  assert.doesNotThrow(() =>
    guardSettings([
      remote,
      e("global", "http.proxy", "http://corp:3128"),
      e("local", "remote.pushdefault", "origin"),
    ], "push")
  );
});

Deno.test("a push over git:// runs no proxy program the repository's config names", async () => {
  // git takes the first core.gitProxy that matches: a later -c could not override it.
  const dir = await committedRepo("baton-git-proxy-");
  const marks = await Deno.makeTempDir({ prefix: "baton-git-marks-" });
  try {
    const evil = join(marks, "proxy.sh");
    await Deno.writeTextFile(evil, `#!/bin/sh\ntouch '${join(marks, "proxy-ran")}'\nexit 1\n`, {
      mode: 0o755,
    });
    await sh(dir, "config", "core.gitProxy", evil);
    await sh(dir, "remote", "add", "origin", "git://127.0.0.1:9/x.git");
    const top = await repoTop(dir);
    await assert.rejects(push(top, { remote: "origin" }, () => {}));
    const ran = await Deno.stat(join(marks, "proxy-ran")).then(() => true, () => false);
    assert.equal(ran, false, "the repository's core.gitProxy ran");
  } finally {
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(marks, { recursive: true });
  }
});

Deno.test("a credential helper the repository adds after the guard read its config is not run", async () => {
  // The race the guard cannot close by reading: git reads the config again when it runs.
  const dir = await Deno.makeTempDir({ prefix: "baton-git-race-" });
  const marks = await Deno.makeTempDir({ prefix: "baton-git-marks-" });
  try {
    await sh(dir, "init", "-q", "-b", "main");
    const env = {
      GIT_TERMINAL_PROMPT: "0",
      HOME: marks,
      GIT_CONFIG_NOSYSTEM: "1",
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    };
    const guard = await guardFor(dir, env, "push");
    await sh(
      dir,
      "config",
      "credential.https://example.com.helper",
      `!touch '${marks}/helper-ran'; echo`,
    );
    // With no helper left, git asks the askpass program (terminal prompts or not).
    const askpass = join(marks, "askpass.sh");
    await Deno.writeTextFile(askpass, `#!/bin/sh\ntouch '${marks}/askpass-ran'\necho x\n`, {
      mode: 0o755,
    });
    await sh(dir, "config", "core.askPass", askpass);
    const out = new Deno.Command("git", {
      args: [...guard.flatMap((g) => ["-c", g]), "credential", "fill"],
      cwd: dir,
      env,
      clearEnv: true,
      stdin: "piped",
      stdout: "null",
      stderr: "null",
    }).spawn();
    const w = out.stdin.getWriter();
    await w.write(new TextEncoder().encode("protocol=https\nhost=example.com\n\n"));
    await w.close();
    await out.status;
    const ran = (name: string) => Deno.stat(join(marks, name)).then(() => true, () => false);
    assert.equal(await ran("helper-ran"), false, "the helper added after the guard's read ran");
    assert.equal(await ran("askpass-ran"), false, "the askpass added after the guard's read ran");
  } finally {
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(marks, { recursive: true });
  }
});

Deno.test("a discard refuses to write a protected file the agent staged, and writes the rest", async () => {
  const dir = await committedRepo("baton-protected-repo-");
  try {
    // Staged by the agent from inside its sandbox, which kept it from writing the file itself.
    await Deno.mkdir(join(dir, ".vscode"));
    await Deno.writeTextFile(join(dir, ".vscode", "tasks.json"), '{"runOn": "folderOpen"}\n');
    await sh(dir, "add", ".vscode/tasks.json");
    await Deno.remove(join(dir, ".vscode", "tasks.json"));
    await Deno.writeTextFile(join(dir, "a.txt"), "changed\n");
    const top = await repoTop(dir);
    await assert.rejects(
      discard(top, { paths: [".vscode/tasks.json"], confirm: true }),
      /sandbox keeps it from being written/,
    );
    await assert.rejects(Deno.stat(join(dir, ".vscode", "tasks.json")), Deno.errors.NotFound);
    // A whole folder holding one is refused too; other files discard as before.
    await assert.rejects(discard(top, { paths: [".vscode"], confirm: true }));
    await discard(top, { paths: ["a.txt"], confirm: true });
    assert.equal(await Deno.readTextFile(join(dir, "a.txt")), "one\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a commit from the panel: the first one, nothing staged, a merge in progress", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-git-commit-" });
  try {
    await sh(dir, "init", "-q", "-b", "main");
    await sh(dir, "config", "user.email", "ada@example.com");
    await sh(dir, "config", "user.name", "Ada");
    const top = await repoTop(dir);
    const code = (p: Promise<unknown>) =>
      p.then(() => "ok", (e) => (e as { code?: string }).code ?? String(e));
    assert.equal(await code(commit(top, { message: "empty" })), "nothing_to_commit");
    await Deno.writeTextFile(join(dir, "a.txt"), "one\n");
    await stage(top, { paths: ["a.txt"] });
    assert.equal(await code(commit(top, { message: "# only a comment\n" })), "bad_request");
    const first = await commit(top, { message: "first\n\n\nbody  \n# note\n" });
    assert.equal(first.commit.subject, "first");
    const reflog = new TextDecoder().decode(
      (await new Deno.Command("git", { args: ["reflog", "-1", "--format=%gs"], cwd: dir }).output())
        .stdout,
    );
    assert.equal(reflog.trim(), "commit (initial): first");
    const body = new TextDecoder().decode(
      (await new Deno.Command("git", { args: ["log", "-1", "--format=%B"], cwd: dir }).output())
        .stdout,
    );
    assert.equal(body, "first\n\nbody\n\n");
    // core.commentChar=auto: git commit would pick a character no line starts with.
    await sh(dir, "config", "core.commentChar", "auto");
    await Deno.writeTextFile(join(dir, "c.txt"), "c\n");
    await stage(top, { paths: ["c.txt"] });
    assert.equal((await commit(top, { message: "#42 is fixed\n" })).commit.subject, "#42 is fixed");
    await sh(dir, "config", "--unset", "core.commentChar");
    await Deno.writeTextFile(join(dir, "a.txt"), "two\n");
    await stage(top, { paths: ["a.txt"] });
    await Deno.writeTextFile(join(dir, ".git", "MERGE_HEAD"), `${first.commit.oid}\n`);
    assert.equal(await code(commit(top, { message: "second" })), "operation_in_progress");
    await Deno.remove(join(dir, ".git", "MERGE_HEAD"));
    const second = await commit(top, { message: "second" });
    assert.equal(second.commit.subject, "second");
    assert.equal(second.status.staged.length, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a switch to a branch that would write a protected file is refused; others switch", async () => {
  const dir = await committedRepo("baton-protected-switch-");
  try {
    // A branch the agent made inside its sandbox, committing a file it could not write itself.
    await sh(dir, "switch", "-q", "-c", "agent");
    await Deno.mkdir(join(dir, ".vscode"));
    await Deno.writeTextFile(join(dir, ".vscode", "tasks.json"), '{"runOn": "folderOpen"}\n');
    await sh(dir, "add", ".vscode/tasks.json");
    await sh(dir, "commit", "-q", "-m", "tasks");
    await sh(dir, "switch", "-q", "-c", "plain", "main");
    await Deno.writeTextFile(join(dir, "b.txt"), "b\n");
    await sh(dir, "add", "b.txt");
    await sh(dir, "commit", "-q", "-m", "b");
    await sh(dir, "switch", "-q", "main");
    const top = await repoTop(dir);
    await assert.rejects(checkout(top, { branch: "agent" }), /would write '\.vscode\/tasks\.json'/);
    assert.equal((await status(top)).branch, "main");
    await assert.rejects(Deno.stat(join(dir, ".vscode", "tasks.json")), Deno.errors.NotFound);
    const st = await checkout(top, { branch: "plain" });
    assert.equal(st.branch, "plain");
    // A new branch writes nothing.
    assert.equal((await checkout(top, { branch: "fresh", create: true })).branch, "fresh");
    // A branch only a remote has: switched to and tracked, as git switch's guess does.
    await sh(dir, "update-ref", "refs/remotes/origin/feature", "plain");
    await sh(dir, "config", "remote.origin.url", "https://example.invalid/x.git");
    await sh(dir, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*");
    const feature = await checkout(top, { branch: "feature" });
    assert.equal(feature.branch, "feature");
    assert.equal(feature.upstream, "origin/feature");
    // A ref the agent put where a remote's own refspec maps (git would guess it): not a branch
    // here; nor is one two remotes have (git would pick by checkout.defaultRemote).
    await sh(dir, "config", "remote.x.url", "https://example.invalid/y.git");
    await sh(dir, "config", "remote.x.fetch", "+refs/heads/*:refs/sneaky/*");
    await sh(dir, "update-ref", "refs/sneaky/evil", "agent");
    await assert.rejects(checkout(top, { branch: "evil" }), /No branch 'evil'/);
    await sh(dir, "update-ref", "refs/remotes/origin/twice", "agent");
    await sh(dir, "update-ref", "refs/remotes/x/twice", "plain");
    await assert.rejects(checkout(top, { branch: "twice" }), /several remotes/);
    assert.equal((await status(top)).branch, "feature");
    await assert.rejects(Deno.stat(join(dir, ".vscode", "tasks.json")), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a commit from the panel is signed when the person's commit.gpgSign asks for it", async () => {
  const dir = await committedRepo("baton-git-sign-");
  const home = await Deno.makeTempDir({ prefix: "baton-git-sign-home-" });
  const saved = Deno.env.get("HOME");
  try {
    // A stand-in for gpg: git reads its status line on stderr and the signature on stdout.
    const gpg = join(home, "fake-gpg");
    await Deno.writeTextFile(
      gpg,
      `#!/bin/sh\ncat > /dev/null\ntouch '${home}/signed'\n` +
        `echo '[GNUPG:] SIG_CREATED D 1 8 00 1700000000 ABCDEF' >&2\n` +
        `printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nZmFrZQ==\\n-----END PGP SIGNATURE-----\\n'\n`,
      { mode: 0o755 },
    );
    await Deno.writeTextFile(
      join(home, ".gitconfig"),
      `[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = ${gpg}\n[user]\n\tsigningKey = ABCDEF\n`,
    );
    Deno.env.set("HOME", home);
    await Deno.writeTextFile(join(dir, "a.txt"), "signed\n");
    const top = await repoTop(dir);
    await stage(top, { paths: ["a.txt"] });
    const made = await commit(top, { message: "signed" });
    assert.equal(made.commit.subject, "signed");
    assert.ok(await Deno.stat(join(home, "signed")).then(() => true, () => false));
    const raw = new TextDecoder().decode(
      (await new Deno.Command("git", { args: ["cat-file", "commit", "HEAD"], cwd: dir }).output())
        .stdout,
    );
    assert.match(raw, /^gpgsig -----BEGIN PGP SIGNATURE-----/m);
  } finally {
    if (saved === undefined) Deno.env.delete("HOME");
    else Deno.env.set("HOME", saved);
    await Deno.remove(dir, { recursive: true });
    await Deno.remove(home, { recursive: true });
  }
});
