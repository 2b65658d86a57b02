import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fuzzyScore, queryTerms } from "./fuzzy.ts";
import { isIgnored, parseGitignore } from "./gitignore.ts";
import { findOnPath, searchFiles } from "./search.ts";
import { pieces } from "./files.ts";

Deno.test("gitignore rules: negation, folders only, anchoring, globs and **", () => {
  const rules = parseGitignore(
    [
      "# a comment",
      "*.log",
      "!keep.log",
      "dist/",
      "/top.txt",
      "docs/**/draft-?.md",
      "**/cache",
      "[abc].tmp",
      "\\#hash",
      "",
    ].join("\n"),
    "",
  );
  const cases: [string, boolean, boolean][] = [
    ["x.log", false, true],
    ["a/b/x.log", false, true],
    ["keep.log", false, false],
    ["dist", true, true],
    ["dist", false, false],
    ["src/dist", true, true],
    ["top.txt", false, true],
    ["src/top.txt", false, false],
    ["docs/draft-1.md", false, true],
    ["docs/a/b/draft-2.md", false, true],
    ["docs/draft-10.md", false, false],
    ["x/cache", true, true],
    ["a.tmp", false, true],
    ["d.tmp", false, false],
    ["#hash", false, true],
  ];
  for (const [path, dir, want] of cases) assert.equal(isIgnored(path, dir, rules), want, path);
  // A nested file's rules apply below its folder only.
  const nested = parseGitignore("/only-here\n", "sub");
  assert.equal(isIgnored("sub/only-here", false, nested), true);
  assert.equal(isIgnored("only-here", false, nested), false);
  assert.equal(isIgnored("sub/deeper/only-here", false, nested), false);
});

Deno.test("fuzzy ranking: a whole name first, then whole in the path, then scattered", () => {
  const rank = (q: string, paths: string[]) =>
    paths
      .map((p) => ({ p, s: fuzzyScore(p, queryTerms(q)) }))
      .filter((x) => x.s !== null)
      .sort((a, b) => b.s! - a.s!)
      .map((x) => x.p);
  assert.deepEqual(
    rank("main", ["src/domain/x.ts", "lib/main.ts", "main/x.ts", "src/remain.ts", "m/a/i/n.ts"]),
    ["lib/main.ts", "src/remain.ts", "main/x.ts", "src/domain/x.ts", "m/a/i/n.ts"],
  );
  assert.equal(fuzzyScore("src/a.ts", queryTerms("zz")), null);
  assert.equal(fuzzyScore("src/app/button.tsx", queryTerms("app btn")) !== null, true);
  assert.equal(fuzzyScore("src/app/button.tsx", queryTerms("app zzz")), null);
});

Deno.test("text pieces never split a surrogate pair", () => {
  const text = "a😀".repeat(10);
  for (const size of [1, 2, 3, 5, 7]) {
    const out = [...pieces(text, Math.max(size, 2))];
    assert.equal(out.join(""), text);
    for (const p of out) assert.ok(!/[\ud800-\udbff]$/.test(p), `piece ends mid-pair: ${size}`);
  }
});

Deno.test("ripgrep and the walker list the same files under nested .gitignore files", async () => {
  const rg = await findOnPath("rg", Deno.env.get("PATH"));
  const dir = await Deno.makeTempDir({ prefix: "baton-search-" });
  try {
    const files = [
      ".gitignore",
      "a.ts",
      "x.log",
      "keep.log",
      ".hidden/h.ts",
      "sub/.gitignore",
      "sub/b.ts",
      "sub/gen/out.ts",
      "sub/local.ts",
      "target/big.bin",
      "deep/a/b/c/d.ts",
      ".git/config",
    ];
    for (const f of files) {
      await Deno.mkdir(join(dir, dirname(f)), { recursive: true });
      await Deno.writeTextFile(join(dir, f), "x");
    }
    await Deno.writeTextFile(join(dir, ".gitignore"), "*.log\n!keep.log\ntarget\n");
    await Deno.writeTextFile(join(dir, "sub/.gitignore"), "gen/\n/local.ts\n");
    const walker = await searchFiles(dir, "", { limit: 1000, path: "" });
    assert.equal(walker.engine, "walker");
    const want = [
      ".gitignore",
      ".hidden/h.ts",
      "a.ts",
      "deep/a/b/c/d.ts",
      "keep.log",
      "sub/.gitignore",
      "sub/b.ts",
    ];
    assert.deepEqual([...walker.files].sort(), want);
    if (rg) {
      const viaRg = await searchFiles(dir, "", { limit: 1000, path: Deno.env.get("PATH") });
      assert.equal(viaRg.engine, "ripgrep");
      assert.deepEqual([...viaRg.files].sort(), want);
    }
    // A cap on the files looked at says so.
    const capped = await searchFiles(dir, "ts", { limit: 10, path: "", maxFiles: 2 });
    assert.equal(capped.truncated, true);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "the walker answers when an ignore file is a link to /dev/zero or a named pipe",
  ignore: Deno.build.os === "windows",
  async fn() {
    // The agent writes the workspace; read naively, the first fills the daemon's memory
    // and the second never answers.
    const dir = await Deno.makeTempDir({ prefix: "baton-search-" });
    try {
      await Deno.mkdir(join(dir, "sub"));
      await Deno.mkdir(join(dir, ".git", "info"), { recursive: true });
      await Deno.writeTextFile(join(dir, "a.ts"), "x");
      await Deno.writeTextFile(join(dir, "sub", "b.ts"), "x");
      await Deno.symlink("/dev/zero", join(dir, ".gitignore"));
      const fifo = await new Deno.Command("mkfifo", {
        args: [join(dir, "sub", ".gitignore"), join(dir, ".git", "info", "exclude")],
      }).output();
      assert.ok(fifo.success);
      const walker = await searchFiles(dir, "", { limit: 1000, path: "" });
      // The pipe is listed as the entry it is; neither is read as rules.
      assert.deepEqual([...walker.files].sort(), ["a.ts", "sub/.gitignore", "sub/b.ts"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
