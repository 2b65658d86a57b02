import assert from "node:assert/strict";
import { join } from "node:path";
import {
  checkCwd,
  expandHome,
  isWithin,
  PathRejectedError,
  realPathOf,
  resolveRoots,
} from "./roots.ts";
import { rootsFromEnv } from "./config.ts";

async function withTree(fn: (dir: string) => Promise<void>) {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "baton-roots-" }));
  try {
    for (const d of ["srv/a", "srv/ab", "srv/a/inner", "outside"]) {
      await Deno.mkdir(join(dir, d), { recursive: true });
    }
    await Deno.symlink(join(dir, "outside"), join(dir, "srv/a/escape"));
    await Deno.symlink(join(dir, "srv/a"), join(dir, "link-to-a"));
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function rejected(p: Promise<unknown>, code: string) {
  await assert.rejects(p, (err) => err instanceof PathRejectedError && err.code === code);
}

Deno.test("workspace roots accept the root itself and folders inside it", async () => {
  await withTree(async (dir) => {
    const roots = await resolveRoots([join(dir, "srv/a") + "/"], dir);
    assert.equal(await checkCwd(join(dir, "srv/a"), roots, { home: dir }), join(dir, "srv/a"));
    assert.equal(
      await checkCwd(join(dir, "srv/a/inner/"), roots, { home: dir }),
      join(dir, "srv/a/inner"),
    );
  });
});

Deno.test("workspace roots reject outside folders, '..' traversal, symlink escapes and sibling prefixes", async (t) => {
  await withTree(async (dir) => {
    const roots = await resolveRoots([join(dir, "srv/a")], dir);
    await t.step(
      "outside",
      () => rejected(checkCwd(join(dir, "outside"), roots, { home: dir }), "cwd_outside_roots"),
    );
    await t.step(
      "dot-dot",
      () =>
        rejected(
          checkCwd(`${dir}/srv/a/inner/../../../outside`, roots, { home: dir }),
          "cwd_outside_roots",
        ),
    );
    await t.step(
      "symlink escape",
      () =>
        rejected(checkCwd(join(dir, "srv/a/escape"), roots, { home: dir }), "cwd_outside_roots"),
    );
    await t.step(
      "sibling prefix /srv/a vs /srv/ab",
      () => rejected(checkCwd(join(dir, "srv/ab"), roots, { home: dir }), "cwd_outside_roots"),
    );
    await t.step(
      "missing folder",
      () => rejected(checkCwd(join(dir, "srv/a/nope"), roots, { home: dir }), "cwd_not_found"),
    );
    await t.step(
      "relative path",
      () => rejected(checkCwd("srv/a", roots, { home: dir }), "bad_request"),
    );
  });
});

Deno.test("a root given through a symlink is resolved before comparing", async () => {
  await withTree(async (dir) => {
    const roots = await resolveRoots([join(dir, "link-to-a")], dir);
    assert.deepEqual(roots, [join(dir, "srv/a")]);
    assert.equal(
      await checkCwd(join(dir, "srv/a/inner"), roots, { home: dir }),
      join(dir, "srv/a/inner"),
    );
  });
});

Deno.test("root '/' allows everything and no roots allow any folder", async () => {
  await withTree(async (dir) => {
    assert.equal(await checkCwd(join(dir, "outside"), ["/"], { home: dir }), join(dir, "outside"));
    assert.equal(await checkCwd(join(dir, "outside"), null, { home: dir }), join(dir, "outside"));
  });
});

Deno.test("windows comparison ignores case", () => {
  assert.equal(isWithin("C:\\Users\\Me\\Src\\x", "c:\\users\\me\\src", "windows"), true);
  assert.equal(isWithin("C:\\Users\\Me\\Srcx", "c:\\users\\me\\src", "windows"), false);
  assert.equal(isWithin("/Home/me", "/home/me", "linux"), false);
});

Deno.test("root variables follow the spec's priority", () => {
  const env = (vars: Record<string, string>) => (k: string) => vars[k];
  assert.deepEqual(
    rootsFromEnv(
      env({
        BATON_WORKSPACE_ROOTS: "/a, /b,",
        BATON_WORKSPACE_ROOT: "/c",
        BATON_RUNNER_ROOTS: "/d",
      }),
    ),
    { roots: ["/a", "/b"], source: "BATON_WORKSPACE_ROOTS" },
  );
  assert.deepEqual(
    rootsFromEnv(env({ BATON_WORKSPACE_ROOT: "/c", BATON_RUNNER_ROOTS: "/d" })),
    { roots: ["/c"], source: "BATON_WORKSPACE_ROOT" },
  );
  assert.deepEqual(rootsFromEnv(env({ BATON_RUNNER_ROOTS: "/d,/e" })), {
    roots: ["/d", "/e"],
    source: "BATON_RUNNER_ROOTS",
  });
  assert.deepEqual(rootsFromEnv(env({})), { roots: null, source: null });
});

Deno.test("windows paths: drive letters, UNC shares, / or \\, the \\\\?\\ prefix, any case", async (t) => {
  await t.step("isWithin", () => {
    const inside = (p: string, r: string) => isWithin(p, r, "windows");
    assert.equal(inside("C:/Users/Me/src/x", "c:\\users\\me\\src"), true, "/ and \\ alike");
    assert.equal(
      inside("\\\\?\\C:\\Users\\Me\\src", "C:\\Users\\Me\\src\\"),
      true,
      "long-path prefix",
    );
    assert.equal(inside("D:\\Users\\Me\\src", "C:\\Users\\Me\\src"), false, "another drive");
    assert.equal(inside("d:\\anything", "D:\\"), true, "a drive's root");
    assert.equal(inside("\\\\srv\\Share\\proj", "\\\\SRV\\share\\"), true, "UNC share");
    assert.equal(inside("\\\\?\\UNC\\srv\\share\\proj", "\\\\srv\\share"), true, "UNC, long form");
    assert.equal(inside("\\\\srv\\sharex\\proj", "\\\\srv\\share"), false, "sibling share");
    assert.equal(inside("\\\\other\\share\\proj", "\\\\srv\\share"), false, "another server");
    // Case matters elsewhere.
    assert.equal(isWithin("/Users/me/src", "/users/me/src", "linux"), false);
  });
  await t.step("expandHome and resolveRoots", async () => {
    assert.equal(expandHome("~\\code", "C:\\Users\\Ada", "windows"), "C:\\Users\\Ada\\code");
    assert.equal(expandHome("~/code", "C:\\Users\\Ada", "windows"), "C:\\Users\\Ada\\code");
    assert.equal(expandHome("~\\code", "/home/ada", "linux"), "~\\code", "a file name on Linux");
    // Not on this disk: kept as written, made absolute, trailing separators gone.
    assert.deepEqual(
      await resolveRoots(
        ["C:\\Users\\Ada\\proj\\", "~\\code", "\\\\srv\\share\\", "D:\\"],
        "C:\\Users\\Ada",
        "windows",
      ),
      ["C:\\Users\\Ada\\proj", "C:\\Users\\Ada\\code", "\\\\srv\\share", "D:\\"],
    );
  });
  await t.step("checkCwd takes a drive or UNC path as absolute, not a relative one", async () => {
    const o = { home: "C:\\Users\\Ada", os: "windows" as const };
    const code = (p: Promise<unknown>) =>
      p.then(() => "ok", (e) => e instanceof PathRejectedError ? e.code : String(e));
    assert.equal(await code(checkCwd("proj\\src", null, o)), "bad_request");
    // Absolute by Windows' rules: what follows is the disk (which this Linux machine lacks).
    assert.equal(await code(checkCwd("C:\\Users\\Ada\\proj", null, o)), "cwd_not_found");
    assert.equal(await code(checkCwd("\\\\srv\\share\\proj", null, o)), "cwd_not_found");
    assert.equal(await code(checkCwd("~\\proj", null, o)), "cwd_not_found");
  });
});

Deno.test("realPathOf follows a symlink whose target does not exist yet, and refuses a loop", async () => {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "baton-realpath-" }));
  try {
    await Deno.symlink("/elsewhere/.bash_aliases", join(dir, "abs"));
    await Deno.symlink("../gone/dir", join(dir, "rel"));
    await Deno.mkdir(join(dir, "real"));
    await Deno.symlink(join(dir, "real"), join(dir, "toreal"));
    await Deno.symlink(join(dir, "loop-b"), join(dir, "loop-a"));
    await Deno.symlink(join(dir, "loop-a"), join(dir, "loop-b"));
    assert.equal(await realPathOf(join(dir, "abs")), "/elsewhere/.bash_aliases");
    assert.equal(
      await realPathOf(join(dir, "rel", "x.desktop")),
      join(dir, "..", "gone/dir/x.desktop"),
    );
    assert.equal(await realPathOf(join(dir, "toreal", "new.txt")), join(dir, "real", "new.txt"));
    assert.equal(await realPathOf(join(dir, "plain", "new.txt")), join(dir, "plain", "new.txt"));
    await assert.rejects(() => realPathOf(join(dir, "loop-a")));
    // Relative to the link's real folder, not the path it was reached by.
    await Deno.mkdir(join(dir, "a", "b"), { recursive: true });
    await Deno.mkdir(join(dir, "d"));
    await Deno.symlink(join(dir, "d"), join(dir, "a", "b", "A"));
    await Deno.symlink("../outside/.bash_aliases", join(dir, "d", "L"));
    assert.equal(
      await realPathOf(join(dir, "a", "b", "A", "L")),
      join(dir, "outside/.bash_aliases"),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "realPathOf refuses a /proc link to a file that is not on disk (another process's memfd)",
  ignore: Deno.build.os !== "linux" ||
    !new Deno.Command("sh", { args: ["-c", "command -v python3"] }).outputSync().success,
  async fn() {
    const holder = new Deno.Command("python3", {
      args: ["-c", "import os,time\nfd=os.memfd_create('k')\nprint(fd,flush=True)\ntime.sleep(60)"],
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const reader = holder.stdout.pipeThrough(new TextDecoderStream()).getReader();
    try {
      const fd = Number((await reader.read()).value!.trim());
      await assert.rejects(
        () => realPathOf(`/proc/${holder.pid}/fd/${fd}`),
        /leads through \/proc to '\/memfd:k \(deleted\)', which is not a file on disk/,
      );
      // A /proc link to a real folder still resolves to it.
      assert.equal(await realPathOf("/proc/self/cwd"), Deno.cwd());
    } finally {
      await reader.cancel().catch(() => {});
      holder.kill();
      await holder.status;
    }
  },
});
