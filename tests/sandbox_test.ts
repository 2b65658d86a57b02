/**
 * The agent sandbox with a real runner, real bubblewrap and the mock model
 * calling tools: what `basic` blocks (and the violation the viewer sees),
 * baton's secrets and other processes' environments out of reach, `full`'s
 * network allowlist against a local HTTP server, the fail-open notice and
 * `failClosed`.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type AgentWorld,
  exists,
  haveBwrap,
  resultsOf,
  spawnIn,
  withAgentWorld,
} from "./harness/agent_world.ts";
import { Viewer } from "./harness/client.ts";
import type { ScriptedToolCall } from "./harness/mock_llm.ts";
import type { SessionEvent } from "../shared/protocol.ts";

/** A relay, a runner whose HOME has `~/.ssh/id_rsa` and the given `sandbox` config. */
function withWorld(
  sandbox: Record<string, unknown>,
  fn: (w: AgentWorld) => Promise<void>,
  env: Record<string, string> = {},
): Promise<void> {
  return withAgentWorld({ sandbox }, fn, env);
}

/** One session in `cwd` whose first turn makes `calls`; its events once the agent ends. */
async function runTools(w: AgentWorld, calls: ScriptedToolCall[], cwd = w.project) {
  w.llm.enqueue({ text: "Working.", toolCalls: calls }, { text: "Done." });
  const { sessionId, runnerId, viewer } = await spawnIn(w, "Go", cwd);
  try {
    await viewer.waitForEvent(sessionId, "agent_end", 60_000);
    const events = viewer.eventsOf(sessionId);
    return { sessionId, runnerId, events, results: resultsOf(events) };
  } finally {
    await viewer.close();
  }
}

function violations(events: SessionEvent[]) {
  return events.filter((e) => e.e.type === "sandbox:violation").map((e) => e.e);
}

Deno.test({
  name:
    "basic: secrets, ~/.ssh, stored git tokens and .env are out of reach, writes stay in cwd and /tmp",
  ignore: !haveBwrap,
  async fn() {
    // A process of the same user holding a key in its environment: the agent must not see it.
    const holder = new Deno.Command("sleep", {
      args: ["60"],
      env: { BATON_API_KEY: "brt_neighbour_secret_value" },
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      await withWorld({}, async (w) => {
        // Not under cwd nor /tmp (the test's HOME is under /tmp).
        const outside = `/var/tmp/baton-sbx-${crypto.randomUUID()}-outside.txt`;
        const calls: ScriptedToolCall[] = [
          { id: "r1", name: "read", args: { path: join(w.home, ".ssh", "id_rsa") } },
          { id: "w1", name: "write", args: { path: ".env", content: "X=1" } },
          { id: "w2", name: "write", args: { path: "~/.ssh/authorized_keys", content: "k" } },
          { id: "w3", name: "write", args: { path: outside, content: "x" } },
          { id: "w4", name: "write", args: { path: "notes.txt", content: "fine" } },
          { id: "b1", name: "bash", args: { command: `cat ~/.ssh/id_rsa; echo rc=$?` } },
          { id: "b2", name: "bash", args: { command: `echo x > ${outside}; echo rc=$?` } },
          { id: "b3", name: "bash", args: { command: "echo X=1 > .env; echo rc=$?" } },
          {
            id: "b4",
            name: "bash",
            args: { command: "cat /proc/*/environ 2>/dev/null | grep -a BATON_API_KEY; echo end" },
          },
          { id: "b5", name: "bash", args: { command: "cat ~/.baton/config.json; echo rc=$?" } },
          { id: "b6", name: "bash", args: { command: "echo ok > /tmp/baton-sbx-ok; echo rc=$?" } },
          // An extension there would run unsandboxed in the next session's worker.
          {
            id: "b7",
            name: "bash",
            args: {
              command: "mkdir -p ~/.baton/extensions/x; echo 1 > ~/.baton/extensions/x/index.ts",
            },
          },
          { id: "w5", name: "write", args: { path: ".pi/extensions/y.ts", content: "x" } },
          // git's store helper and the gh CLI keep tokens in plain files.
          { id: "r2", name: "read", args: { path: "~/.git-credentials" } },
          {
            id: "b8",
            name: "bash",
            args: { command: "cat ~/.git-credentials ~/.config/gh/hosts.yml 2>&1; echo end" },
          },
        ];
        await Deno.writeTextFile(join(w.project, ".env"), "ORIGINAL=1\n");
        await Deno.writeTextFile(
          join(w.home, ".git-credentials"),
          "https://u:ghp_STOREDTOKEN@github.com\n",
        );
        await Deno.mkdir(join(w.home, ".config", "gh"), { recursive: true });
        await Deno.writeTextFile(
          join(w.home, ".config", "gh", "hosts.yml"),
          "github.com:\n  oauth_token: gho_CLITOKEN\n",
        );
        const { events, results } = await runTools(w, calls);
        const r = (id: string) => {
          const got = results.get(id);
          assert.ok(got, `no result for ${id}`);
          return got;
        };
        assert.equal(r("r1").isError, true);
        assert.match(r("r1").text, /Sandbox: reading .*\.ssh' is denied/);
        assert.ok(!r("r1").text.includes("PRIVATE-KEY"));
        assert.match(r("w1").text, /Sandbox: writing .*\.env' is denied/);
        assert.match(r("w2").text, /Sandbox: writing .*\.ssh' is denied/);
        assert.match(r("w3").text, /writes are allowed only in/);
        assert.equal(r("w4").isError, false, r("w4").text);
        assert.ok(!r("b1").text.includes("PRIVATE-KEY"), r("b1").text);
        assert.match(r("b2").text, /Read-only file system|Permission denied/);
        assert.match(r("b3").text, /Read-only file system|Permission denied/);
        assert.ok(!r("b4").text.includes("neighbour_secret"), r("b4").text);
        assert.ok(!r("b4").text.includes("BATON_API_KEY"), r("b4").text);
        assert.match(r("b5").text, /rc=1/);
        assert.ok(!r("b5").text.includes("apiKey"), r("b5").text);
        assert.match(r("b6").text, /rc=0/);
        assert.equal(await exists(outside), false, "a write outside cwd and /tmp got through");
        assert.equal(await Deno.readTextFile(join(w.project, ".env")), "ORIGINAL=1\n");
        assert.equal(await exists(join(w.home, ".ssh", "authorized_keys")), false);
        assert.equal(await Deno.readTextFile(join(w.project, "notes.txt")), "fine");
        assert.equal(await exists(join(w.home, ".baton", "extensions", "x", "index.ts")), false);
        // Nothing left behind where a protected file was missing (pi looks for a .pi folder).
        assert.equal(await exists(join(w.project, ".env.local")), false);
        // No placeholder left behind where pi later looks for a folder.
        const pi = await Deno.lstat(join(w.project, ".pi")).catch(() => null);
        assert.ok(pi === null || pi.isDirectory, "an empty .pi file was left in the project");
        assert.match(r("w5").text, /Sandbox: writing .*\.pi' is denied/);
        assert.match(r("r2").text, /Sandbox: reading .*\.git-credentials' is denied/);
        assert.match(r("b8").text, /end/);
        assert.ok(!/STOREDTOKEN|CLITOKEN/.test(r("b8").text), r("b8").text);

        const seen = violations(events);
        const has = (op: string, re: RegExp) =>
          seen.some((v) => v.operation === op && re.test(String(v.target)));
        assert.ok(has("read", /\.ssh/), JSON.stringify(seen));
        assert.ok(has("write", /\.env$/), JSON.stringify(seen));
        assert.ok(has("write", /outside\.txt$/), JSON.stringify(seen));
        for (const v of seen) {
          assert.ok(!Number.isNaN(Date.parse(String(v.timestamp))));
          assert.equal(typeof v.reason, "string");
        }
        const start = events.find((e) => e.e.type === "session_start")!.e;
        assert.deepEqual(start.sandbox, { mode: "basic", active: true });
      });
    } finally {
      holder.kill();
      await holder.status;
      await Deno.remove("/tmp/baton-sbx-ok").catch(() => {});
    }
  },
});

/** A local HTTP server answering "reached". */
function httpServer() {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response("reached"),
  );
}

Deno.test({
  name: "full: outbound network is denied unless the domain is listed (a project only narrows)",
  ignore: !haveBwrap,
  async fn() {
    await using server = httpServer();
    const url = `http://127.0.0.1:${server.addr.port}/`;
    // The sandbox's NO_PROXY names 127.0.0.1 (its own loopback); `--noproxy ''` sends the
    // request the only way out of the network namespace: the runtime's filtering proxy.
    const curl = {
      name: "bash",
      args: { command: `curl -s -m 5 --noproxy '' ${url}; echo " rc=$?"` },
    };
    await withWorld({ mode: "full", network: { allowedDomains: ["127.0.0.1"] } }, async (w) => {
      const allowed = await runTools(w, [{ id: "c1", ...curl }]);
      assert.match(allowed.results.get("c1")!.text, /reached rc=0/);

      // The project asks for another domain only: the intersection is empty.
      const narrow = join(w.project, "narrow");
      await Deno.mkdir(join(narrow, ".baton"), { recursive: true });
      await Deno.writeTextFile(
        join(narrow, ".baton", "config.json"),
        JSON.stringify({
          sandbox: { mode: "basic", network: { allowedDomains: ["example.com"] } },
        }),
      );
      const denied = await runTools(w, [{ id: "c2", ...curl }], narrow);
      assert.ok(
        !denied.results.get("c2")!.text.includes("reached"),
        denied.results.get("c2")!.text,
      );
      const start = denied.events.find((e) => e.e.type === "session_start")!.e;
      assert.deepEqual(start.sandbox, { mode: "full", active: true }, "the project cannot weaken");
      const refused = denied.events.filter((e) => e.e.type === "sandbox:violation").map((e) => e.e);
      assert.ok(
        refused.some((v) => v.operation === "network" && String(v.target).includes("127.0.0.1")),
        JSON.stringify(refused),
      );
    });
    await withWorld({ mode: "full" }, async (w) => {
      const { results } = await runTools(w, [{ id: "c3", ...curl }]);
      assert.ok(!results.get("c3")!.text.includes("reached"), results.get("c3")!.text);
    });
  },
});

Deno.test({
  name: "a sandbox that cannot start: the session says so and runs on, or refuses tools",
  ignore: Deno.build.os !== "linux",
  async fn(t) {
    const bad = { bwrapPath: "/nonexistent/bwrap" };
    await t.step("fail open (the spec's message)", async () => {
      await withWorld(bad, async (w) => {
        const { events, results } = await runTools(w, [
          { id: "b1", name: "bash", args: { command: "echo still-runs" } },
        ]);
        const start = events.find((e) => e.e.type === "session_start")!.e;
        assert.match(String(start.notice), /^Sandbox init failed, continuing unsandboxed/);
        assert.deepEqual(start.sandbox, { mode: "basic", active: false });
        assert.match(results.get("b1")!.text, /still-runs/);
      });
    });
    await t.step("failClosed refuses every tool", async () => {
      await withWorld({ ...bad, failClosed: true }, async (w) => {
        const { events, results } = await runTools(w, [
          { id: "b2", name: "bash", args: { command: "echo should-not-run" } },
          { id: "r2", name: "read", args: { path: "/etc/hostname" } },
        ]);
        const start = events.find((e) => e.e.type === "session_start")!.e;
        assert.match(String(start.notice), /failClosed/);
        for (const id of ["b2", "r2"]) {
          assert.equal(results.get(id)!.isError, true);
          assert.match(results.get(id)!.text, /tools are refused/);
        }
        assert.ok(!results.get("b2")!.text.includes("should-not-run"));
      });
    });
  },
});

Deno.test({
  name: "BATON_NO_SANDBOX=1 turns the sandbox off",
  ignore: Deno.build.os !== "linux",
  async fn() {
    await withWorld({ mode: "full" }, async (w) => {
      const { events, results } = await runTools(w, [
        { id: "r1", name: "read", args: { path: join(w.home, ".ssh", "id_rsa") } },
      ]);
      const start = events.find((e) => e.e.type === "session_start")!.e;
      assert.deepEqual(start.sandbox, { mode: "none", active: false });
      assert.match(results.get("r1")!.text, /PRIVATE-KEY/);
    }, { BATON_NO_SANDBOX: "1" });
  },
});

Deno.test({
  name: "a sandboxed worker still stops on the daemon's SIGTERM (an idle session sleeps)",
  ignore: !haveBwrap,
  async fn() {
    await withWorld({ mode: "full" }, async (w) => {
      const { sessionId } = await runTools(w, [
        { id: "b1", name: "bash", args: { command: "echo hi" } },
      ]);
      const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
      try {
        viewer.subscribe(sessionId);
        // The runtime's own SIGTERM listener used to keep the worker alive: no sleep came.
        await viewer.waitForEvent(sessionId, "session_sleep", 15_000);
      } finally {
        await viewer.close();
      }
    }, { BATON_SLEEP_AFTER: "1s" });
  },
});
