import assert from "node:assert/strict";
import type { Platform } from "../platform/platform.ts";
import { agentShell } from "../platform/shell.ts";
import { commandLine, commandLineOperations, shellToolDefinition } from "./shell_tool.ts";

function platform(os: Platform["os"], env: Record<string, string>, files: string[] = []): Platform {
  const set = new Set(files);
  return { os, env: (k) => env[k], exists: (p) => set.has(p) };
}

const WINDOWS_NO_BASH = platform(
  "windows",
  { PATH: "C:\\Windows\\System32;C:\\Program Files\\PowerShell\\7" },
  ["C:\\Windows\\System32\\bash.exe", "C:\\Program Files\\PowerShell\\7\\pwsh.exe"],
);

type Described = {
  name: string;
  description: string;
  promptSnippet?: string;
  parameters: { properties: { command: { description: string } } };
};

Deno.test("bash tool on Windows without bash: PowerShell runs the command, and the tool says so", () => {
  const shell = agentShell(WINDOWS_NO_BASH);
  // System32's bash.exe is WSL's: not taken.
  assert.equal(shell.program, "C:\\Program Files\\PowerShell\\7\\pwsh.exe");
  assert.deepEqual(commandLine(shell, "Get-ChildItem | Select-Object -First 3"), {
    program: "C:\\Program Files\\PowerShell\\7\\pwsh.exe",
    args: ["-NoProfile", "-NonInteractive", "-Command", "Get-ChildItem | Select-Object -First 3"],
  });
  const def = shellToolDefinition(
    "C:\\work",
    shell,
    commandLineOperations(shell),
  ) as unknown as Described;
  assert.equal(def.name, "bash", "the tool keeps its name");
  assert.match(def.description, /^Runs a command with PowerShell .*write PowerShell, not bash/);
  assert.match(def.description, /Execute a PowerShell command/);
  assert.doesNotMatch(def.description, /Execute a bash command/);
  assert.equal(def.parameters.properties.command.description, "PowerShell command to execute");
  assert.equal(def.promptSnippet, "Execute PowerShell commands");
  // The rest of the schema is pi's (the timeout stays, the command is still required).
  const schema = def.parameters as unknown as { required: string[]; properties: object };
  assert.deepEqual(schema.required, ["command"]);
  assert.deepEqual(Object.keys(schema.properties), ["command", "timeout"]);
});

Deno.test("bash tool with bash (Linux, macOS, Git Bash on Windows): bash, and the description says bash", () => {
  for (
    const p of [
      platform("linux", {}, ["/bin/bash"]),
      platform("darwin", {}, ["/bin/bash"]),
      platform("windows", { PATH: "C:\\Windows\\System32" }, [
        "C:\\Program Files\\Git\\bin\\bash.exe",
      ]),
    ]
  ) {
    const shell = agentShell(p);
    assert.equal(shell.kind, "bash", p.os);
    assert.deepEqual(commandLine(shell, "ls").args, ["-c", "ls"]);
    const def = shellToolDefinition(
      "/w",
      shell,
      commandLineOperations(shell),
    ) as unknown as Described;
    assert.match(def.description, /^Runs a command with bash\. Execute a bash command/);
    assert.equal(def.parameters.properties.command.description, "Bash command to execute");
  }
});

Deno.test("the command-line backend runs a real command, streams its output, and ends it on abort", async () => {
  const ops = commandLineOperations({ program: "/bin/sh", kind: "sh", commandArgs: ["-c"] });
  const out: string[] = [];
  const res = await ops.exec("echo one; echo two >&2; exit 3", Deno.cwd(), {
    onData: (d) => out.push(String(d)),
  });
  assert.equal(res.exitCode, 3);
  assert.deepEqual(out.join("").split("\n").filter(Boolean).sort(), ["one", "two"]);

  const ac = new AbortController();
  const started = Date.now();
  const running = ops.exec("sleep 30 & sleep 30; wait", Deno.cwd(), {
    onData: () => {},
    signal: ac.signal,
  });
  setTimeout(() => ac.abort(), 200);
  await assert.rejects(running, /aborted/);
  assert.ok(Date.now() - started < 10_000);
  await assert.rejects(
    ops.exec("sleep 30", Deno.cwd(), { onData: () => {}, timeout: 0.3 }),
    /timeout:0.3/,
  );
});
