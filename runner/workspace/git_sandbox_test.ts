import assert from "node:assert/strict";
import { dirname, join, relative } from "node:path";
import { gitLaunch } from "./git_sandbox.ts";
import { commit, repoTop } from "./git.ts";

const haveBwrap = Deno.build.os === "linux" &&
  new Deno.Command("sh", { args: ["-c", "command -v bwrap && command -v python3"] }).outputSync()
    .success;

async function sh(cwd: string, script: string, env: Record<string, string> = {}) {
  const out = await new Deno.Command("sh", { args: ["-c", script], cwd, env }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

/**
 * A home with a key, a folder outside everything writable, and a repository
 * whose config names a clean filter that tries to leave: the filter the
 * guard would neutralise, had it read the config a moment later.
 */
async function withRepo(
  fn: (w: { home: string; repo: string; outside: string; env: Record<string, string> }) => Promise<
    void
  >,
): Promise<void> {
  const home = await Deno.realPath(await Deno.makeTempDir({ prefix: "baton-gitsb-home-" }));
  const outside = await Deno.realPath(
    await Deno.makeTempDir({ dir: "/var/tmp", prefix: "baton-gitsb-out-" }),
  );
  const repo = join(home, "project");
  const env = { HOME: home, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", LC_ALL: "C" };
  try {
    await Deno.mkdir(join(home, ".ssh"));
    await Deno.writeTextFile(join(home, ".ssh", "id_rsa"), "PRIVATE-KEY-MATERIAL\n");
    await Deno.mkdir(repo);
    // The key copied into git's own folder, which the sandboxed git may write.
    const escape = `cat "${home}/.ssh/id_rsa" > "${repo}/.git/leak" 2>/dev/null; ` +
      `echo ran > "${outside}/pwned" 2>/dev/null; cat`;
    await sh(
      repo,
      `git init -q && git config user.email a@b && git config user.name a && ` +
        `git config filter.x.clean '${escape.replaceAll("'", "'\\''")}' && ` +
        `echo '* filter=x' > .gitattributes && echo hello > a.txt`,
      env,
    );
    await fn({ home, repo, outside, env });
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(outside, { recursive: true });
  }
}

async function run(cmd: string, args: string[], cwd: string, env: Record<string, string>) {
  const out = await new Deno.Command(cmd, { args, cwd, env, stderr: "piped" }).output();
  return { ok: out.success, stderr: new TextDecoder().decode(out.stderr) };
}

const exists = (p: string) => Deno.stat(p).then(() => true, () => false);

Deno.test({
  name:
    "a program the repository's config names, run by the service's git, reads no hidden file and writes nothing outside git's folder",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ repo, outside, env }) => {
      const launch = await gitLaunch(repo, "add", { env: (k) => env[k as keyof typeof env] });
      assert.equal(launch.sandboxed, true);
      const r = await run(launch.cmd, [...launch.args, "add", "-A"], repo, env);
      assert.ok(r.ok, r.stderr);
      const leak = await Deno.readTextFile(join(repo, ".git", "leak")).catch(() => "");
      assert.doesNotMatch(leak, /PRIVATE-KEY/, "the filter read ~/.ssh");
      assert.equal(await exists(join(outside, "pwned")), false, "the filter wrote outside");
      // git did its own work: the files are staged.
      const st = await run("git", ["diff", "--cached", "--quiet"], repo, env);
      assert.equal(st.ok, false, "nothing was staged");

      // The same filter under plain git gets out (what the guard alone leaves to a race).
      await Deno.writeTextFile(join(repo, "a.txt"), "changed\n");
      assert.ok((await run("git", ["add", "-A"], repo, env)).ok);
      assert.equal(await Deno.readTextFile(join(outside, "pwned")), "ran\n");
      assert.match(await Deno.readTextFile(join(repo, ".git", "leak")), /PRIVATE-KEY-MATERIAL/);
    });
  },
});

Deno.test({
  name:
    "the service's git stages in a linked work tree, and only the commands that change files write the work tree",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ home, repo, env }) => {
      await sh(repo, "git config --unset filter.x.clean && git add -A && git commit -qm one", env);
      const tree = join(home, "tree");
      await sh(repo, `git worktree add -q "${tree}"`, env);
      const get = (k: string) => env[k as keyof typeof env];
      await Deno.writeTextFile(join(tree, "b.txt"), "two\n");
      // Staging writes the common folder's objects and the linked tree's own index.
      const add = await gitLaunch(tree, "add", { env: get });
      assert.equal(add.sandboxed, true);
      const staged = await run(add.cmd, [...add.args, "add", "-A"], tree, env);
      assert.ok(staged.ok, staged.stderr);
      const commit = await gitLaunch(tree, "commit", { env: get });
      const r0 = await run(commit.cmd, [...commit.args, "commit", "-qm", "two"], tree, env);
      assert.ok(r0.ok, r0.stderr);
      const log = await new Deno.Command("git", { args: ["log", "--format=%s"], cwd: repo, env })
        .output();
      assert.match(new TextDecoder().decode(log.stdout), /one/);
      const branchLog = await new Deno.Command("git", {
        args: ["log", "--format=%s", "tree"],
        cwd: repo,
        env,
      }).output();
      assert.match(new TextDecoder().decode(branchLog.stdout), /^two\n/);

      // `status` may not write the work tree; `checkout` (Discard) may.
      await Deno.writeTextFile(join(tree, "b.txt"), "edited\n");
      const status = await gitLaunch(tree, "status", { env: get });
      const probe = await run(status.cmd, [...status.args, "status"], tree, env);
      assert.ok(probe.ok, probe.stderr);
      const touch = await run(
        "bwrap",
        [...status.args.slice(0, -1), "sh", "-c", "echo x > b.txt"],
        tree,
        env,
      );
      assert.equal(touch.ok, false, "status's sandbox let the work tree be written");
      const discard = await gitLaunch(tree, "checkout", { env: get });
      const r = await run(discard.cmd, [...discard.args, "checkout", "--", "b.txt"], tree, env);
      assert.ok(r.ok, r.stderr);
      assert.equal(await Deno.readTextFile(join(tree, "b.txt")), "two\n");
    });
  },
});

Deno.test({
  name:
    "a push and a commit (the person's keys), and every command with the sandbox's mode none, run git as is",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ repo, env }) => {
      const get = (k: string) => env[k as keyof typeof env];
      assert.equal((await gitLaunch(repo, "push", { env: get })).sandboxed, false);
      assert.equal((await gitLaunch(repo, "commit", { env: get })).sandboxed, false);
      assert.equal((await gitLaunch(repo, "status", { env: get })).sandboxed, true);
      const none = (k: string) => k === "BATON_NO_SANDBOX" ? "1" : get(k);
      assert.equal((await gitLaunch(repo, "status", { env: none })).sandboxed, false);
      const off = (k: string) => k === "BATON_SANDBOX" ? "none" : get(k);
      assert.equal((await gitLaunch(repo, "status", { env: off })).sandboxed, false);
    });
  },
});

Deno.test({
  name:
    "a home folder that is a repository: its hidden places stay hidden to git's programs, and staging is refused",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ home, env }) => {
      const get = (k: string) => env[k as keyof typeof env];
      // The agent, in a session started in the home folder, makes it a repository.
      await sh(home, "git init -q", env);
      const status = await gitLaunch(home, "status", { env: get });
      assert.equal(status.sandboxed, true);
      const probe = await run(
        "bwrap",
        [...status.args.slice(0, status.args.indexOf("--")), "--", "sh", "-c", "cat .ssh/id_rsa"],
        home,
        env,
      );
      assert.equal(probe.ok, false, "a program git runs read ~/.ssh inside the repository");
      const st = await run(status.cmd, [...status.args, "status", "--porcelain"], home, env);
      assert.ok(st.ok, st.stderr);
      await assert.rejects(
        gitLaunch(home, "add", { env: get }),
        /holds a place the sandbox hides .*\.ssh.*does not run 'add' here/,
      );
    });
  },
});

Deno.test({
  name: "a .git file is read as git reads it: a gitdir with a leading space binds no other folder",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ home, env }) => {
      const get = (k: string) => env[k as keyof typeof env];
      const proj = join(home, "proj2");
      await Deno.mkdir(proj);
      // git takes what follows "gitdir: " as it is: ` <home>`, relative to proj2.
      await sh(
        proj,
        `git init -q --bare " ${home}" && git --git-dir=" ${home}" config core.bare false`,
        env,
      );
      await Deno.writeTextFile(join(proj, ".git"), `gitdir:  ${home}\n`);
      const launch = await gitLaunch(proj, "add", { env: get });
      const binds = launch.args.flatMap((a, i) => a === "--bind" ? [launch.args[i + 1]] : []);
      assert.ok(binds.length > 0, "the agent's own git folder is writable");
      for (const b of binds) assert.ok(b!.startsWith(proj + "/"), `bound ${b}`);
    });
  },
});

Deno.test({
  name:
    "git's programs get no daemon variable, no socket, and no write to the config or hooks the person's own git reads",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ repo, outside, env }) => {
      // An ssh agent's socket in a folder of its own beside others' files.
      const sock = join(outside, "agent.sock");
      const made = await new Deno.Command("python3", {
        args: ["-c", `import socket;socket.socket(socket.AF_UNIX).bind(${JSON.stringify(sock)})`],
      }).output();
      assert.ok(made.success);
      await Deno.writeTextFile(join(outside, "other.txt"), "x");
      const get = (k: string) => k === "SSH_AUTH_SOCK" ? sock : env[k as keyof typeof env];
      const launch = await gitLaunch(repo, "add", {
        env: get,
        gitEnv: { HOME: env.HOME!, PATH: env.PATH! },
      });
      const inside = (script: string) =>
        run(
          "bwrap",
          [...launch.args.slice(0, launch.args.lastIndexOf("--")), "--", "sh", "-c", script],
          repo,
          { ...env, ANTHROPIC_API_KEY: "sk-ant-secret", SSH_AUTH_SOCK: "/run/agent.sock" },
        );
      assert.equal(
        (await inside('test -z "$ANTHROPIC_API_KEY" && test -z "$SSH_AUTH_SOCK"')).ok,
        true,
      );
      for (const place of ["/run/user", "/run/dbus", "/tmp/.X11-unix"]) {
        if (!(await exists(place))) continue;
        assert.equal((await inside(`test -z "$(ls -A ${place})"`)).ok, true, `${place} is visible`);
      }
      assert.equal(
        (await inside(`test ! -S '${sock}' && test -f '${outside}/other.txt'`)).ok,
        true,
      );
      for (
        const write of [
          "touch .git/hooks/pre-commit",
          "echo x >> .git/config",
          "touch .git/objects/ok",
        ]
      ) {
        const r = await inside(write);
        assert.equal(r.ok, write.endsWith("ok"), `${write}: ${r.stderr}`);
      }
    });
  },
});

Deno.test({
  name:
    "a repository whose folders do not lead where git reports (a line break in a name, core.worktree elsewhere) is refused",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ home, repo, env }) => {
      const get = (k: string) => env[k as keyof typeof env];
      // A gitdir whose name holds a line break, then a victim's git folder on the next line.
      const sess = join(home, "sess");
      await Deno.mkdir(sess);
      const odd = `x\n${repo}/.git`;
      await sh(
        sess,
        `git init -q --bare '${odd}' && git --git-dir='${odd}' config core.bare false`,
        env,
      );
      await Deno.writeTextFile(join(sess, ".git"), `gitdir: ${odd}\n`);
      await assert.rejects(
        gitLaunch(sess, "status", { env: get }),
        /does not lead where git reports/,
      );
      // core.worktree naming another repository's files.
      const other = join(home, "other");
      await Deno.mkdir(other);
      await sh(other, "git init -q", env);
      await sh(repo, `git config core.worktree '${other}'`, env);
      await assert.rejects(
        gitLaunch(repo, "checkout", { env: get }),
        /does not lead where git reports/,
      );
    });
  },
});

Deno.test({
  name: "a project config made a link to /dev/zero or a pipe is not read, and git still answers",
  ignore: !haveBwrap,
  async fn() {
    // This runs in the daemon for every git command: read naively, /dev/zero filled its
    // memory (every session of the runner gone) and a pipe never answered.
    await withRepo(async ({ repo, env }) => {
      const get = (k: string) => env[k as keyof typeof env];
      await Deno.mkdir(join(repo, ".baton"));
      await Deno.symlink("/dev/zero", join(repo, ".baton", "config.json"));
      const launch = await gitLaunch(repo, "status", { env: get });
      assert.equal(launch.sandboxed, true);
      assert.ok((await run(launch.cmd, [...launch.args, "status"], repo, env)).ok);
      await Deno.remove(join(repo, ".baton", "config.json"));
      await sh(repo, "mkfifo .baton/config.json");
      assert.equal((await gitLaunch(repo, "status", { env: get })).sandboxed, true);
    });
  },
});

Deno.test({
  name: "when bubblewrap cannot start, the daemon's log says why and git runs as the person's",
  ignore: Deno.build.os !== "linux",
  async fn() {
    // A machine without unprivileged user namespaces: bwrap is there and refuses.
    const bin = await Deno.makeTempDir({ prefix: "baton-nobwrap-" });
    try {
      await Deno.writeTextFile(
        join(bin, "bwrap"),
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
      );
      await Deno.chmod(join(bin, "bwrap"), 0o755);
      const module = new URL("./git_sandbox.ts", import.meta.url).href;
      const script = `import { gitLaunch, gitSandboxProblem } from ${JSON.stringify(module)};
        console.log(JSON.stringify({
          problem: await gitSandboxProblem(),
          sandboxed: (await gitLaunch(Deno.cwd(), "status")).sandboxed,
        }));`;
      const ask = async (path: string) => {
        const out = await new Deno.Command(Deno.execPath(), {
          args: ["eval", "--no-check", script],
          env: { PATH: path },
          cwd: bin,
          stderr: "inherit",
        }).output();
        assert.ok(out.success);
        return JSON.parse(new TextDecoder().decode(out.stdout));
      };
      const refused = await ask(`${bin}:/usr/bin:/bin`);
      assert.match(refused.problem, /bubblewrap does not run here \(bwrap: setting up uid map/);
      assert.equal(refused.sandboxed, false);
      const missing = await ask(join(bin, "none"));
      assert.match(missing.problem, /bwrap is not installed/);
      if (haveBwrap) assert.equal((await ask(Deno.env.get("PATH")!)).problem, null);
    } finally {
      await Deno.remove(bin, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "a folder swapped for a symlink between its check and bubblewrap's bind stops git before it runs",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ repo, outside, env }) => {
      const launch = await gitLaunch(repo, "add", { env: (k) => env[k as keyof typeof env] });
      assert.equal(launch.sandboxed, true);
      // After the check the agent renames the repository's folder and links its name to a
      // folder of its choosing, shaped like a repository (bubblewrap binds config and hooks
      // by name too): bubblewrap follows the link and binds that folder's .git writable.
      const fake = join(outside, "fake");
      await Deno.mkdir(join(fake, ".git", "hooks"), { recursive: true });
      await Deno.writeTextFile(join(fake, ".git", "config"), "");
      await Deno.rename(repo, `${repo}-real`);
      // A relative link: bubblewrap resolves it the same outside and inside its new root.
      await Deno.symlink(relative(dirname(repo), fake), repo);
      const r = await run(launch.cmd, [...launch.args, "add", "-A"], `${repo}-real`, env);
      assert.equal(r.ok, false);
      assert.match(r.stderr, /baton-git-sandbox: folder changed:/);
      assert.deepEqual(
        [...Deno.readDirSync(join(fake, ".git"))].map((e) => e.name).sort(),
        ["config", "hooks"],
        "git wrote into the link's target",
      );
      // Put back, the same launch runs.
      await Deno.remove(repo);
      await Deno.rename(`${repo}-real`, repo);
      const again = await run(launch.cmd, [...launch.args, "add", "-A"], repo, env);
      assert.ok(again.ok, again.stderr);
    });
  },
});

Deno.test({
  name:
    "the git service follows the mode in the daemon's environment: BATON_SANDBOX=none or BATON_NO_SANDBOX runs git as is",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ repo, env }) => {
      const envWith = (extra: Record<string, string>) => (k: string) =>
        ({ ...env, ...extra } as Record<string, string>)[k];
      assert.equal((await gitLaunch(repo, "add", { env: envWith({}) })).sandboxed, true);
      const none = await gitLaunch(repo, "add", { env: envWith({ BATON_SANDBOX: "none" }) });
      assert.equal(none.sandboxed, false);
      const off = await gitLaunch(repo, "add", { env: envWith({ BATON_NO_SANDBOX: "1" }) });
      assert.equal(off.sandboxed, false);
    });
  },
});

Deno.test({
  name:
    "a folder swapped for a link while bubblewrap binds it and put back before git starts is still refused",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ repo, outside, env }) => {
      const launch = await gitLaunch(repo, "add", { env: (k) => env[k as keyof typeof env] });
      const fake = join(outside, "fake");
      await Deno.mkdir(join(fake, ".git", "hooks"), { recursive: true });
      await Deno.writeTextFile(join(fake, ".git", "config"), "");
      // The check waits a moment here (only in this test), so the folder is back by then:
      // its name leads to itself again while the bind holds the other repository's .git.
      const args = [...launch.args];
      const at = args.indexOf("-c", args.indexOf("--"));
      args[at + 1] = `sleep 1; ${args[at + 1]}`;
      await Deno.rename(repo, `${repo}-real`);
      await Deno.symlink(relative(dirname(repo), fake), repo);
      const child = new Deno.Command(launch.cmd, {
        args: [...args, "add", "-A"],
        cwd: outside,
        env,
        stderr: "piped",
      }).spawn();
      await new Promise((r) => setTimeout(r, 400));
      await Deno.remove(repo);
      await Deno.rename(`${repo}-real`, repo);
      const out = await child.output();
      assert.equal(out.success, false);
      assert.match(new TextDecoder().decode(out.stderr), /baton-git-sandbox: folder changed:/);
      assert.deepEqual(
        [...Deno.readDirSync(join(fake, ".git"))].map((e) => e.name).sort(),
        ["config", "hooks"],
      );
    });
  },
});

Deno.test({
  name: "the folder check reads mount points as the kernel writes them: a space in a folder's name",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ home, env }) => {
      const proj = join(home, "my project\\x");
      await Deno.mkdir(proj);
      await sh(proj, "git init -q && echo hi > a.txt", env);
      const launch = await gitLaunch(proj, "add", { env: (k) => env[k as keyof typeof env] });
      assert.equal(launch.sandboxed, true);
      const r = await run(launch.cmd, [...launch.args, "add", "-A"], proj, env);
      assert.ok(r.ok, r.stderr);
    });
  },
});

Deno.test({
  name:
    "an unsigned commit from the Changes panel runs no git as the person but the guard's listing",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ repo, outside, env }) => {
      // A git on PATH that logs each run it can: inside the sandbox the log is read-only, so
      // what it holds is what ran as the person.
      const realGit = new TextDecoder().decode(
        (await new Deno.Command("sh", { args: ["-c", "command -v git"] }).output()).stdout,
      ).trim();
      const bin = join(outside, "bin");
      await Deno.mkdir(bin);
      const log = join(outside, "plain-git.log");
      await Deno.writeTextFile(
        join(bin, "git"),
        `#!/bin/sh\necho "$*" >> '${log}' 2>/dev/null\nexec '${realGit}' "$@"\n`,
        { mode: 0o755 },
      );
      await sh(repo, "git add -A && git commit -qm first", env);
      await Deno.writeTextFile(join(repo, "b.txt"), "two\n");
      await sh(repo, "git add b.txt", env);
      const path = Deno.env.get("PATH")!;
      const home = Deno.env.get("HOME");
      Deno.env.set("PATH", `${bin}:${path}`);
      Deno.env.set("HOME", env.HOME!);
      try {
        const made = await commit(await repoTop(repo), { message: "second\n\n# a comment\n" });
        assert.equal(made.commit.subject, "second");
      } finally {
        Deno.env.set("PATH", path);
        if (home === undefined) Deno.env.delete("HOME");
        else Deno.env.set("HOME", home);
      }
      // Unsigned, even commit-tree stays inside (a signed one is in git_config_guard_test).
      const plain = (await Deno.readTextFile(log)).trim().split("\n");
      assert.ok(plain.some((l) => /config --list/.test(l)), plain.join("\n"));
      for (const l of plain) {
        assert.doesNotMatch(
          l,
          /(^| )(commit|commit-tree|write-tree|update-ref|stripspace|diff|add)( |$)/,
          l,
        );
      }
      // The branch moved to the new commit, its message cleaned as git commit does.
      const head = await new Deno.Command("git", {
        args: ["log", "-1", "--format=%B%x00%P"],
        cwd: repo,
        env,
      }).output();
      const [body, parent] = new TextDecoder().decode(head.stdout).split("\0");
      assert.equal(body!.trim(), "second");
      assert.ok(parent!.trim().length >= 40);
    });
  },
});

Deno.test({
  name:
    "a switch runs sandboxed, unless the person's own config has git-lfs's filter (it downloads)",
  ignore: !haveBwrap,
  async fn() {
    await withRepo(async ({ home, repo, outside, env }) => {
      const get = (k: string) => env[k as keyof typeof env];
      await sh(
        repo,
        "git add -A && git commit -qm first && git branch -M main && git branch other",
        env,
      );
      // A smudge filter the agent adds: a switch checks files out through it.
      await sh(
        repo,
        `git config filter.y.smudge "touch '${outside}/smudged'; cat" && ` +
          `echo '*.md filter=y' > .gitattributes && echo hi > r.md && ` +
          "git -c filter.y.smudge=cat add -A && git -c filter.y.smudge=cat commit -qm md && " +
          "git -c filter.y.smudge=cat switch -q other",
        env,
      );
      const launch = await gitLaunch(repo, "switch", { env: get });
      assert.equal(launch.sandboxed, true);
      const r = await run(launch.cmd, [...launch.args, "switch", "main"], repo, env);
      assert.ok(r.ok, r.stderr);
      assert.equal(await Deno.readTextFile(join(repo, "r.md")), "hi\n");
      assert.equal(await exists(join(outside, "smudged")), false, "the filter wrote outside");
      // The repository's own filter.lfs does not count: the agent writes it.
      await sh(repo, "git config filter.lfs.process 'git-lfs filter-process'", env);
      assert.equal((await gitLaunch(repo, "switch", { env: get })).sandboxed, true);
      // The person's, also through an includeIf for this repository, does.
      await Deno.writeTextFile(
        join(home, "lfs.gitconfig"),
        '[filter "lfs"]\n\tprocess = git-lfs filter-process\n\trequired = true\n',
      );
      await Deno.writeTextFile(
        join(home, ".gitconfig"),
        `[includeIf "gitdir:${repo}/"]\n\tpath = ${join(home, "lfs.gitconfig")}\n`,
      );
      assert.equal((await gitLaunch(repo, "switch", { env: get })).sandboxed, false);
    });
  },
});
