import assert from "node:assert/strict";
import { join } from "node:path";
import { guardSettings, parseConfigList } from "./git_config_guard.ts";
import { commit, diff, discard, log, repoTop, stage, status } from "./git.ts";

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
  assert.deepEqual(got, [
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "protocol.ext.allow=never",
    "log.showSignature=false",
    "filter.lfs.process=git-lfs filter-process",
    "filter.Evil.clean=",
    "credential.helper=",
    "credential.helper=cache",
    "gpg.program=gpg",
    "remote.origin.receivepack=git-receive-pack",
  ]);
});

/** Runs git in `dir` for the test's own setup (not through the service). */
async function sh(dir: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("git", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

Deno.test("the git service runs nothing a repository's own config names: fsmonitor, filters, hooks, diff drivers", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-git-guard-" });
  const marks = await Deno.makeTempDir({ prefix: "baton-git-marks-" });
  try {
    await sh(dir, "init", "-q", "-b", "main");
    await sh(dir, "config", "user.email", "ada@example.com");
    await sh(dir, "config", "user.name", "Ada");
    await Deno.writeTextFile(join(dir, "a.txt"), "one\n");
    await sh(dir, "add", "a.txt");
    await sh(dir, "commit", "-q", "-m", "first");
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
