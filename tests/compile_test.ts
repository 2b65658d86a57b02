/**
 * `deno task compile` (scripts/compile.ts): the one clear line when Deno's
 * runtime cannot be had (this machine and CI cannot download it), DENORT_BIN
 * for the host target only, the sums, the role executables' command lines,
 * and the permissions each role is compiled with, proven by running relay
 * and runner from source under exactly those flags.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { roleArgs } from "../cli/_binary.ts";
import {
  binaryName,
  compileArgs,
  hostTarget,
  RELAY_PERMISSIONS,
  RUNNER_PERMISSIONS,
  TARGETS,
  writeSums,
} from "../scripts/compile.ts";
import type { RunnerListResponse } from "../shared/api.ts";
import { json, signUp, Viewer } from "./harness/client.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { RelayProcess, ROOT, startRunner, tempDir } from "./harness/procs.ts";

const COMPILE = join(ROOT, "scripts", "compile.ts");

async function compileTask(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", COMPILE, ...args],
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", NO_COLOR: "1", ...env },
    clearEnv: true,
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("deno task compile builds a runnable binary, or says in one line why it cannot (exit 2)", async () => {
  const out = await tempDir("baton-compile-");
  const host = hostTarget();
  const r = await compileTask(["--target", host, "--role", "baton-relay", "--out", out]);
  if (r.code === 0) {
    // A machine that can download the runtime: the binary runs and is summed.
    const bin = join(out, binaryName("baton-relay", host));
    const v = await new Deno.Command(bin, { args: ["--version"] }).output();
    assert.match(new TextDecoder().decode(v.stdout), /^baton \d/);
    assert.match(await Deno.readTextFile(join(out, "SHA256SUMS")), /^[0-9a-f]{64} {2}baton-relay-/);
    return;
  }
  assert.equal(r.code, 2, r.stderr);
  const lines = r.stderr.trim().split("\n");
  assert.equal(lines.length, 1, `one line, not a stack trace:\n${r.stderr}`);
  assert.match(lines[0]!, /^compile: Cannot download Deno's runtime \(denort\) for /);
  assert.match(lines[0]!, /DENORT_BIN/);
});

Deno.test("DENORT_BIN builds this machine's target only, and must be a file", async (t) => {
  await t.step("another target is refused before anything is built", async () => {
    const other = TARGETS.find((x) => x !== hostTarget())!;
    const r = await compileTask(["--target", other], { DENORT_BIN: Deno.execPath() });
    assert.equal(r.code, 2);
    assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
    assert.match(r.stderr, /DENORT_BIN is a runtime for this machine's target .* only, not /);
  });
  await t.step("a missing file is named", async () => {
    const r = await compileTask([], { DENORT_BIN: "/nonexistent/denort" });
    assert.equal(r.code, 2);
    assert.equal(
      r.stderr.trim(),
      "compile: DENORT_BIN is not a file: '/nonexistent/denort' (see docs/install.md)",
    );
  });
  await t.step("an unknown target or role is one line too", async () => {
    const r = await compileTask(["--target", "sparc-sun-solaris"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr.trim(), /^compile: Unknown target: 'sparc-sun-solaris' \(one of /);
    const r2 = await compileTask(["--role", "baton-nope", "--target", hostTarget()]);
    assert.equal(r2.code, 2);
    assert.match(r2.stderr.trim(), /^compile: Unknown role: 'baton-nope'/);
  });
});

Deno.test("each executable is named for its role and target, and compiled with its role's permissions", () => {
  assert.equal(
    binaryName("baton-runner", "x86_64-pc-windows-msvc"),
    "baton-runner-x86_64-pc-windows-msvc.exe",
  );
  assert.equal(binaryName("baton", "aarch64-apple-darwin"), "baton-aarch64-apple-darwin");
  const relay = compileArgs("baton-relay", "aarch64-unknown-linux-gnu", "/d");
  assert.ok(!relay.includes("-A") && !relay.includes("--allow-all"));
  assert.ok(
    !relay.includes("--allow-run") && !relay.includes("--allow-ffi"),
    "the relay starts no process",
  );
  assert.deepEqual(relay.slice(relay.indexOf("--output"), relay.indexOf("--output") + 2), [
    "--output",
    "/d/baton-relay-aarch64-unknown-linux-gnu",
  ]);
  const runner = compileArgs("baton-runner", "x86_64-apple-darwin", "/d");
  for (const p of RUNNER_PERMISSIONS) assert.ok(runner.includes(p), p);
});

Deno.test("SHA256SUMS lists every executable in dist with its sha256, in sha256sum's format", async () => {
  const dir = await tempDir("baton-sums-");
  await Deno.writeTextFile(join(dir, "baton-relay-x86_64-unknown-linux-gnu"), "relay bytes");
  await Deno.writeTextFile(join(dir, "baton-x86_64-pc-windows-msvc.exe"), "all bytes");
  await Deno.writeTextFile(join(dir, "notes.txt"), "not released");
  await writeSums(dir);
  const sha = (s: string) => createHash("sha256").update(s).digest("hex");
  assert.equal(
    await Deno.readTextFile(join(dir, "SHA256SUMS")),
    `${sha("relay bytes")}  baton-relay-x86_64-unknown-linux-gnu\n` +
      `${sha("all bytes")}  baton-x86_64-pc-windows-msvc.exe\n`,
  );
  const check = await new Deno.Command("sha256sum", { args: ["-c", "SHA256SUMS"], cwd: dir })
    .output().catch(() => null);
  if (check) assert.equal(check.code, 0, new TextDecoder().decode(check.stdout));
});

Deno.test("a role executable runs its role; what the runner starts of itself keeps its command", () => {
  assert.deepEqual(roleArgs("/usr/local/bin/baton-relay", ["--port", "8080"]), [
    "relay",
    "--port",
    "8080",
  ]);
  assert.deepEqual(roleArgs("C:\\baton\\baton-runner.exe", []), ["runner"]);
  assert.deepEqual(roleArgs("/dl/baton-runner-aarch64-apple-darwin", ["install"]), [
    "runner",
    "install",
  ]);
  assert.deepEqual(roleArgs("/usr/local/bin/baton-runner", ["_worker"]), ["_worker"]);
  assert.deepEqual(roleArgs("/usr/local/bin/baton-runner", ["runner", "--name", "x"]), [
    "runner",
    "--name",
    "x",
  ]);
  assert.deepEqual(roleArgs("/usr/local/bin/baton-runner", ["setup", "--relay", "u"]), [
    "setup",
    "--relay",
    "u",
  ]);
  assert.deepEqual(roleArgs("/usr/local/bin/baton", ["up"]), ["up"]);
  assert.deepEqual(roleArgs("/usr/bin/deno", ["relay"]), ["relay"]);
});

Deno.test("relay and runner run a session under the permissions they are compiled with, not -A", async () => {
  const source = (perms: string[]) => [
    "run",
    ...perms,
    "--quiet",
    "--config",
    join(ROOT, "deno.json"),
    join(ROOT, "main.ts"),
  ];
  const llm = MockLlm.start();
  const relay = await RelayProcess.start({ program: source(RELAY_PERMISSIONS) });
  const home = await tempDir("baton-perm-home-");
  let runner: Awaited<ReturnType<typeof startRunner>> | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    await llm.writeModelsJson(home);
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: user.apiKey,
      home,
      program: source(RUNNER_PERMISSIONS),
    });
    const [r]: RunnerListResponse = await (await user.api("/api/runners")).json();
    llm.enqueue(
      { text: "On it.", toolCalls: [{ name: "bash", args: { command: "echo narrow > p.txt" } }] },
      { text: "Done." },
    );
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      const res = await user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: r!.id, cwd: home, model: MODEL, prompt: "Write p.txt" }),
      );
      assert.equal(res.status, 200, await res.clone().text());
      const { sessionId } = await res.json();
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      assert.equal((await Deno.readTextFile(join(home, "p.txt"))).trim(), "narrow");
    } finally {
      await viewer.close();
    }
    assert.equal(
      relay.proc.count(/NotCapable|PermissionDenied|Requires .* access/),
      0,
      relay.proc.output(),
    );
    assert.equal(
      runner.proc.count(/NotCapable|PermissionDenied|Requires .* access/),
      0,
      runner.proc.output(),
    );
    ok = true;
  } finally {
    if (!ok) {
      console.error(relay.proc.output());
      if (runner) console.error(runner.proc.output());
    }
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});
