import assert from "node:assert/strict";
import type { Platform } from "./platform.ts";
import { batonDir, homeDir } from "./config_dir.ts";
import { agentShell, findBash, terminalShell } from "./shell.ts";
import {
  descendants,
  environHas,
  killPlan,
  killTree,
  markedInPsE,
  markedProcesses,
} from "./process_tree.ts";

function platform(os: Platform["os"], env: Record<string, string>, files: string[] = []): Platform {
  const set = new Set(files);
  return { os, env: (k) => env[k], exists: (p) => set.has(p) };
}

Deno.test("config folder: ~/.baton, %USERPROFILE%\\.baton on Windows, HOME first where set", () => {
  assert.equal(batonDir(platform("linux", { HOME: "/home/ada" })), "/home/ada/.baton");
  assert.equal(batonDir(platform("darwin", { HOME: "/Users/ada" })), "/Users/ada/.baton");
  assert.equal(
    batonDir(platform("windows", { USERPROFILE: "C:\\Users\\ada" })),
    "C:\\Users\\ada\\.baton",
  );
  assert.equal(
    homeDir(platform("windows", { HOMEDRIVE: "D:", HOMEPATH: "\\Users\\ada" })),
    "D:\\Users\\ada",
  );
  assert.equal(
    homeDir(platform("windows", { HOME: "C:\\msys\\ada", USERPROFILE: "C:\\Users\\ada" })),
    "C:\\msys\\ada",
  );
  assert.equal(batonDir(platform("linux", { USERPROFILE: "C:\\Users\\ada" })), null);
});

Deno.test("terminal shell: $SHELL, else bash, else sh; Windows: pwsh, PowerShell, then cmd", async (t) => {
  await t.step("linux and macOS", () => {
    assert.equal(terminalShell(platform("linux", { SHELL: "/usr/bin/zsh" })).kind, "zsh");
    assert.equal(terminalShell(platform("linux", {}, ["/bin/bash"])).program, "/bin/bash");
    assert.equal(terminalShell(platform("darwin", {}, [])).program, "/bin/sh");
  });
  await t.step("windows", () => {
    const path = "C:\\Windows\\System32;C:\\Program Files\\PowerShell\\7";
    const pwsh = platform("windows", { PATH: path }, [
      "C:\\Program Files\\PowerShell\\7\\pwsh.exe",
    ]);
    assert.deepEqual(terminalShell(pwsh), {
      program: "C:\\Program Files\\PowerShell\\7\\pwsh.exe",
      kind: "powershell",
      commandArgs: ["-NoProfile", "-NonInteractive", "-Command"],
    });
    const ps = platform("windows", { PATH: "C:\\Windows\\System32\\WindowsPowerShell\\v1.0" }, [
      "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
    ]);
    assert.equal(terminalShell(ps).kind, "powershell");
    const bare = platform("windows", { ComSpec: "C:\\Windows\\system32\\cmd.exe" });
    assert.deepEqual(terminalShell(bare).commandArgs, ["/d", "/s", "/c"]);
    // $SHELL from an MSYS session does not decide a Windows terminal.
    assert.equal(terminalShell(platform("windows", { SHELL: "/usr/bin/bash" })).kind, "cmd");
  });
});

Deno.test("agent shell: bash where present (Git Bash on Windows, never WSL's), else PowerShell saying so", () => {
  assert.equal(
    agentShell(platform("linux", {}, ["/bin/bash"])).description,
    "Runs a command with bash",
  );
  const gitBash = platform("windows", { PATH: "C:\\Windows\\System32" }, [
    "C:\\Windows\\System32\\bash.exe",
    "C:\\Program Files\\Git\\bin\\bash.exe",
  ]);
  assert.equal(findBash(gitBash), "C:\\Program Files\\Git\\bin\\bash.exe");
  const none = platform("windows", { PATH: "C:\\Windows\\System32\\WindowsPowerShell\\v1.0" }, [
    "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
  ]);
  const s = agentShell(none);
  assert.equal(s.kind, "powershell");
  assert.match(s.description, /PowerShell .*write PowerShell, not bash/);
  assert.equal(agentShell(platform("linux", {})).kind, "sh");
});

Deno.test("process tree: the descendants from ps, deepest first, and the marked; taskkill /T on Windows", () => {
  const ps = "  1     0\n 10     1\n 11    10\n 12    11\n 13    10\n 99     1\n";
  assert.deepEqual(descendants(ps, 10), [12, 11, 13]);
  const pids = (steps: ReturnType<typeof killPlan>) =>
    steps.map((s) => s.t === "signal" ? s.pid : s.cmd.join(" "));
  assert.deepEqual(pids(killPlan({ os: "linux" }, 10, "SIGTERM", { ps })), [12, 11, 13, 10]);
  // A server that left the tree (setsid) is found by its marker; init and the daemon never.
  assert.deepEqual(
    pids(killPlan({ os: "darwin" }, 10, "SIGTERM", { ps, marked: [99, 12, 1, 7], spare: [7] })),
    [99, 12, 11, 13, 10],
  );
  assert.deepEqual(pids(killPlan({ os: "linux" }, null, "SIGTERM", { ps, marked: [99] })), [99]);
  assert.deepEqual(killPlan({ os: "windows" }, 10, "SIGTERM", { marked: [99] }), [
    { t: "command", cmd: ["taskkill", "/PID", "10", "/T", "/F"] },
  ]);
  assert.deepEqual(killPlan({ os: "windows" }, null, "SIGTERM"), []);
});

Deno.test("session marker: read from /proc's environ (Linux) and ps -E (macOS)", () => {
  const m = { name: "BATON_SESSION_ID", value: "abc" };
  assert.equal(environHas("PATH=/bin\0BATON_SESSION_ID=abc\0", m), true);
  assert.equal(environHas("BATON_SESSION_ID=abcd\0", m), false);
  assert.equal(environHas("X=BATON_SESSION_ID=abc\0", m), false);
  const psE =
    "  501 /usr/bin/python3 -m http.server TERM=xterm BATON_SESSION_ID=abc HOME=/Users/a\n" +
    "  502 sleep 1000 BATON_SESSION_ID=abcd\n  503 sleep 5 BATON_SESSION_ID=abc\n  zz\n";
  assert.deepEqual(markedInPsE(psE, m), [501, 503]);
});

Deno.test({
  name: "killTree ends a real process and the processes it started",
  ignore: Deno.build.os === "windows",
  fn: async () => {
    const child = new Deno.Command("sh", {
      args: ["-c", "sleep 300 & sleep 300 & echo started; wait"],
      stdout: "piped",
    }).spawn();
    const reader = child.stdout.getReader();
    await reader.read();
    const ps = async () =>
      new TextDecoder().decode(
        (await new Deno.Command("ps", { args: ["-A", "-o", "pid=", "-o", "ppid="] }).output())
          .stdout,
      );
    const kids = descendants(await ps(), child.pid);
    assert.equal(kids.length, 2, "two sleeps under the shell");
    await killTree(child.pid, { graceMs: 2000 });
    await child.status;
    reader.releaseLock();
    await child.stdout.cancel();
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline) {
      const alive = (await ps()).split("\n").map((l) => Number(l.trim().split(/\s+/)[0]));
      if (!kids.some((k) => alive.includes(k))) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`left running: ${kids.join(", ")}`);
  },
});

Deno.test({
  name: "killTree ends a detached process that left the tree, by its marker",
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    const value = crypto.randomUUID();
    const marker = { name: "BATON_TEST_MARKER", value };
    // setsid: a new session, and the shell exits at once, so init adopts the sleep.
    const sh = await new Deno.Command("sh", {
      args: ["-c", "setsid nohup sleep 300 >/dev/null 2>&1 &"],
      env: { BATON_TEST_MARKER: value },
    }).output();
    assert.ok(sh.success);
    let marked: number[] = [];
    const until = Date.now() + 5000;
    while (marked.length === 0 && Date.now() < until) marked = await markedProcesses(marker);
    assert.equal(marked.length, 1, "the detached sleep carries the marker");
    await killTree(null, { marker, graceMs: 2000 });
    assert.deepEqual(await markedProcesses(marker), []);
  },
});
