import assert from "node:assert/strict";
import { join } from "node:path";
import type { GitStatus } from "../../shared/git_api.ts";
import { GitWatchers } from "./git_watch.ts";
import { applyNumstat, parseStatus } from "./git_status.ts";

const EMPTY: GitStatus = parseStatus("");

Deno.test("git watchers are bounded: the one watched longest ago gives way", async () => {
  const dirs = await Promise.all([0, 1, 2].map(() => Deno.makeTempDir()));
  const w = new GitWatchers({
    max: 2,
    status: () => Promise.resolve(EMPTY),
    onStatus: () => {},
    log: () => {},
  });
  try {
    w.watch("a", dirs[0]!);
    w.watch("b", dirs[1]!);
    w.watch("a", dirs[0]!); // used again: b is now the oldest
    w.watch("c", dirs[2]!);
    assert.equal(w.size, 2);
    w.unwatch("a");
    w.unwatch("a");
    assert.equal(w.size, 1);
  } finally {
    w.close();
    for (const d of dirs) await Deno.remove(d, { recursive: true });
  }
});

Deno.test("a git watcher reports a changed status once per burst, and ignores .git/objects", async () => {
  const dir = await Deno.makeTempDir();
  await Deno.mkdir(join(dir, ".git", "objects"), { recursive: true });
  let reads = 0;
  const sent: number[] = [];
  const w = new GitWatchers({
    max: 4,
    debounceMs: 100,
    status: () => Promise.resolve({ ...EMPTY, ahead: ++reads }),
    onStatus: (_id, st) => sent.push(st.ahead),
    log: () => {},
  });
  try {
    w.watch("s", dir);
    const until = async (pred: () => boolean) => {
      const deadline = Date.now() + 5000;
      while (!pred() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    };
    // The watcher thread is up once a first change is seen.
    await until(() => {
      Deno.writeTextFileSync(join(dir, "first"), String(Date.now()));
      return reads > 0;
    });
    await new Promise((r) => setTimeout(r, 400));
    const base = reads;
    await Deno.writeTextFile(join(dir, ".git", "objects", "x"), "churn");
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(reads, base, "a write under .git/objects read the status");
    for (let i = 0; i < 10; i++) await Deno.writeTextFile(join(dir, `f${i}`), "x");
    await until(() => reads > base);
    await new Promise((r) => setTimeout(r, 500));
    // One read, or two when the machine is slow enough to split the burst.
    assert.ok(reads - base <= 2, `ten writes in a burst read the status ${reads - base} times`);
    assert.equal(sent.length, reads, "every changed status was sent");
    w.unwatch("s");
    const after = reads;
    await Deno.writeTextFile(join(dir, "after"), "x");
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(reads, after, "an unwatched repository was read");
  } finally {
    w.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("starting a watch on a big tree does not stall the daemon's thread", async () => {
  const dir = await Deno.makeTempDir();
  for (let i = 0; i < 60; i++) {
    await Promise.all(
      Array.from(
        { length: 100 },
        (_, j) => Deno.mkdir(join(dir, `d${i}`, `e${j}`), { recursive: true }),
      ),
    );
  }
  const w = new GitWatchers({
    max: 4,
    status: () => Promise.resolve(EMPTY),
    onStatus: () => {},
    log: () => {},
  });
  try {
    let last = performance.now();
    let worst = 0;
    const tick = setInterval(() => {
      const now = performance.now();
      worst = Math.max(worst, now - last);
      last = now;
    }, 5);
    w.watch("big", dir);
    await new Promise((r) => setTimeout(r, 1500));
    clearInterval(tick);
    // On this thread, the 6,000-folder walk took ~350 ms.
    assert.ok(worst < 150, `the event loop stalled for ${worst.toFixed(0)} ms`);
  } finally {
    w.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("porcelain v2 status: renames, both sides, conflicts, untracked, names with spaces", () => {
  const out = [
    "# branch.oid 0123456789abcdef",
    "# branch.head main",
    "# branch.upstream origin/main",
    "# branch.ab +2 -1",
    "1 MM N... 100644 100644 100644 aaa bbb a file.txt",
    "2 R. N... 100644 100644 100644 aaa bbb R100 new name.txt",
    "old name.txt",
    "u UU N... 100644 100644 100644 100644 aaa bbb ccc both.txt",
    "? new dir/x.ts",
    "",
  ].join("\0");
  const st = parseStatus(out);
  assert.deepEqual([st.branch, st.upstream, st.ahead, st.behind], ["main", "origin/main", 2, 1]);
  assert.deepEqual(st.staged, [
    { path: "a file.txt", status: "M" },
    { path: "new name.txt", status: "R", origPath: "old name.txt" },
  ]);
  assert.deepEqual(st.unstaged, [{ path: "a file.txt", status: "M" }]);
  assert.deepEqual(st.conflicted, [{ path: "both.txt", status: "U" }]);
  assert.deepEqual(st.untracked, [{ path: "new dir/x.ts", status: "?" }]);
  applyNumstat(
    st.staged,
    ["3\t1\ta file.txt", "0\t0\t", "old name.txt", "new name.txt", ""].join("\0"),
  );
  assert.deepEqual([st.staged[0]!.additions, st.staged[0]!.deletions], [3, 1]);
  assert.equal(st.staged[1]!.additions, 0);
  const detached = parseStatus("# branch.oid (initial)\0# branch.head (detached)\0");
  assert.deepEqual([detached.branch, detached.oid], [null, null]);
});
