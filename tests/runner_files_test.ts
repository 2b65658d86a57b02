/**
 * The runner machine: the agent cannot read the runner's key from any
 * process environment, and everything under `~/.baton` (and the relay's data
 * folder) is owner-only, also what an older version left open.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { CreateKeyResponse } from "../shared/api.ts";
import { json, signUp, type User, Viewer } from "./harness/client.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import {
  baseEnv,
  BatonProcess,
  type RunnerProcess,
  startRunner,
  tempDir,
} from "./harness/procs.ts";
import { within } from "./harness/wait.ts";

/** Pids of `root` and every process below it, from /proc's parent links. */
async function processTree(root: number): Promise<number[]> {
  const parent = new Map<number, number>();
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const stat = await Deno.readTextFile(`/proc/${e.name}/stat`);
      // pid (comm) state ppid ...; comm may hold spaces and parentheses.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      parent.set(Number(e.name), ppid);
    } catch {
      // Gone meanwhile.
    }
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    for (const [pid, ppid] of parent) if (ppid === tree[i]) tree.push(pid);
  }
  return tree;
}

/** The environment of each process (that still exists) as one string. */
async function environments(pids: number[]): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  for (const pid of pids) {
    try {
      out.set(pid, await Deno.readTextFile(`/proc/${pid}/environ`));
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

/** Every folder and file under `root` with its permission bits. */
async function modes(root: string): Promise<{ path: string; dir: boolean; mode: number }[]> {
  const out: { path: string; dir: boolean; mode: number }[] = [];
  const walk = async (dir: string) => {
    out.push({ path: dir, dir: true, mode: (await Deno.lstat(dir)).mode! & 0o777 });
    for await (const e of Deno.readDir(dir)) {
      const path = join(dir, e.name);
      if (e.isDirectory) await walk(path);
      else if (e.isFile) {
        out.push({ path, dir: false, mode: (await Deno.lstat(path)).mode! & 0o777 });
      }
    }
  };
  await walk(root);
  return out;
}

/** Asserts folders are 0700 and files have no group or other bits. */
function assertPrivate(list: { path: string; dir: boolean; mode: number }[], root: string) {
  const open = list.filter((m) => m.dir ? m.mode !== 0o700 : (m.mode & 0o077) !== 0);
  assert.deepEqual(
    open.map((m) => `${m.path.slice(root.length)} ${m.mode.toString(8)}`),
    [],
    "files or folders readable by others",
  );
}

/** A session whose one turn runs `command` in bash; resolves with the tool's output. */
async function runBash(
  relay: TestRelay,
  user: User,
  llm: MockLlm,
  command: string,
): Promise<string> {
  llm.enqueue({ text: "Looking.", toolCalls: [{ name: "bash", args: { command } }] }, {
    text: "Done.",
  });
  const [runner] = await (await user.api("/api/runners")).json();
  const res = await user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: runner.id, prompt: "Look around" }),
  );
  const { sessionId } = await res.json();
  assert.ok(sessionId, "spawn failed");
  const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
  try {
    viewer.subscribe(sessionId);
    await viewer.waitForEvent(sessionId, "agent_end");
    const end = viewer.eventsOf(sessionId).find((e) => e.e.type === "tool_execution_end")!.e;
    return JSON.stringify(end.result);
  } finally {
    await viewer.close();
  }
}

/**
 * The command the agent runs: how many process environments hold `secret`.
 * A fixed string after `-e`: a base64url secret may start with `-`, which
 * grep would otherwise take for an option (1 run in 64 printed no count).
 */
function scanCommand(secret: string): string {
  return `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -cF -e '${secret}'; echo scanned`;
}

async function runnerToken(user: User): Promise<string> {
  const res = await user.api("/api/keys", json("POST", { name: "runner-machine" }));
  const body: CreateKeyResponse = await res.json();
  return body.key;
}

for (const how of ["BATON_API_KEY", "config.json"] as const) {
  Deno.test(`the agent finds no runner token in any process environment (key in ${how})`, async () => {
    await using relay = await startTestRelay();
    const llm = MockLlm.start();
    const home = await tempDir("baton-home-");
    const user = await signUp(relay.url);
    const token = await runnerToken(user);
    // Grep for the random part: the command line holding it is not an environment.
    const secret = token.slice("brt_".length);
    await llm.writeModelsJson(home);
    let runner: RunnerProcess | BatonProcess | undefined;
    let ok = false;
    try {
      if (how === "BATON_API_KEY") {
        runner = await startRunner({ relayUrl: relay.url, apiKey: token, home });
      } else {
        await Deno.writeTextFile(
          join(home, ".baton", "config.json"),
          JSON.stringify({ relayUrl: relay.url, apiKey: token }),
          { mode: 0o600 },
        );
        const proc = BatonProcess.start("runner", { args: ["runner"], env: baseEnv(home) });
        runner = proc;
        await proc.waitFor(/connected to relay as runner/);
      }
      const proc = "proc" in runner ? runner.proc : runner;

      const output = await runBash(relay, user, llm, scanCommand(secret));
      assert.match(output, /scanned/);
      assert.match(output, /(^|\\n|")0\\n/, `the agent found the token: ${output}`);
      assert.equal(output.includes(token), false);

      // And from outside: no process of the runner (entry, supervisor,
      // daemon, workers, their tools) started with the token.
      const tree = await processTree(proc.pid);
      assert.ok(tree.length >= 3, `only ${tree.length} runner processes found`);
      for (const [pid, env] of await environments(tree)) {
        assert.equal(
          env.includes(secret),
          false,
          `process ${pid} has the token in its environment`,
        );
      }
      // The re-executed runner still stops on a signal, at once and cleanly.
      const started = Date.now();
      const st = await proc.stop();
      assert.equal(st.code, 0, proc.output());
      assert.ok(Date.now() - started < 8_000, "the runner ignored SIGTERM");
      ok = true;
    } finally {
      const proc = runner && ("proc" in runner ? runner.proc : runner);
      if (proc && !ok) console.error(proc.output());
      await proc?.stop();
      await llm.close();
      await Deno.remove(home, { recursive: true }).catch(() => {});
    }
  });
}

Deno.test("everything under ~/.baton is owner-only after a session, also what was open before", async () => {
  await using relay = await startTestRelay();
  const llm = MockLlm.start();
  const home = await tempDir("baton-home-");
  const user = await signUp(relay.url);
  const baton = join(home, ".baton");
  await llm.writeModelsJson(home);
  // What an older version left: an open folder, a world-writable transcript.
  await Deno.mkdir(join(baton, "sessions", "--old--"), { recursive: true });
  await Deno.chmod(join(baton, "sessions", "--old--"), 0o755);
  await Deno.writeTextFile(join(baton, "sessions", "--old--", "old.jsonl"), "{}\n");
  await Deno.chmod(join(baton, "sessions", "--old--", "old.jsonl"), 0o666);
  await Deno.chmod(baton, 0o755);
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
    const output = await runBash(relay, user, llm, "echo ran");
    assert.match(output, /ran/);
    // pi wrote the conversation once its first answer ended.
    const list = await modes(baton);
    const transcripts = list.filter((m) => m.path.endsWith(".jsonl") && !m.path.includes("old"));
    assert.ok(transcripts.length >= 1, "no session file was written");
    await within(
      (async () => {
        // The worker fixes the file right after the turn: poll briefly.
        while (true) {
          const now = await modes(baton);
          if (now.every((m) => m.dir ? m.mode === 0o700 : (m.mode & 0o077) === 0)) return;
          await new Promise((r) => setTimeout(r, 50));
        }
      })(),
      10_000,
      "every mode under ~/.baton to be owner-only",
    ).catch(() => {});
    const after = await modes(baton);
    assertPrivate(after, baton);
    for (const t of after.filter((m) => m.path.endsWith(".jsonl"))) {
      assert.equal(t.mode, 0o600, t.path);
    }
    ok = true;
  } finally {
    if (runner && !ok) console.error(runner.proc.output());
    await runner?.stop();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
});

Deno.test("the relay makes its data folder owner-only at start", async () => {
  const dataDir = await tempDir("baton-relay-data-");
  await Deno.chmod(dataDir, 0o755);
  await Deno.mkdir(join(dataDir, "attachments"), { mode: 0o755 });
  await Deno.chmod(join(dataDir, "attachments"), 0o755);
  await Deno.writeTextFile(join(dataDir, "attachments", "a.bin"), "x");
  await Deno.chmod(join(dataDir, "attachments", "a.bin"), 0o644);
  {
    await using _relay = await startTestRelay({ dataDir });
    assertPrivate(await modes(dataDir), dataDir);
  }
  await Deno.remove(dataDir, { recursive: true }).catch(() => {});
});
