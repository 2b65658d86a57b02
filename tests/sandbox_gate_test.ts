/**
 * The path gate in front of pi's file tools, which run in the worker itself,
 * outside the OS sandbox: it is all that stands between them and what the
 * sandbox hides. /proc (any process's environment), a search over a folder
 * that holds a hidden one, and a symlink whose target does not exist yet.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { haveBwrap, resultsOf, spawnIn, withAgentWorld } from "./harness/agent_world.ts";
import { storedEvents } from "./harness/client.ts";
import { MODEL } from "./harness/mock_llm.ts";

const secret = () => crypto.randomUUID().replaceAll("-", "");

Deno.test({
  name: "the file tools read no process's environment or memory under /proc",
  ignore: !haveBwrap,
  async fn() {
    const key = `sk-ant-${secret()}`;
    // A process of the same user holding a credential, as in sandbox_test.ts.
    const neighbour = `brt_${secret()}`;
    const holder = new Deno.Command("sleep", {
      args: ["60"],
      env: { BATON_API_KEY: neighbour },
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      await withAgentWorld({}, async (w) => {
        const paths = [
          "/proc/self/environ",
          `/proc/${holder.pid}/environ`,
          "/proc/self/mem",
          "/dev/fd/0",
          "/proc/self/cwd/../../proc/self/environ",
        ];
        w.llm.enqueue(
          {
            text: "Reading.",
            toolCalls: paths.map((path, i) => ({ id: `r${i}`, name: "read", args: { path } })),
          },
          { text: "Done." },
        );
        const { sessionId, viewer } = await spawnIn(w, "Go", w.project, MODEL);
        try {
          await viewer.waitForEvent(sessionId, "agent_end", 60_000);
          const results = resultsOf(viewer.eventsOf(sessionId));
          assert.equal(results.size, paths.length);
          for (const [id, r] of results) {
            assert.ok(r.isError, `${id} was read: ${r.text.slice(0, 200)}`);
            assert.match(r.text, /Sandbox: reading '\/proc' is denied/, id);
            assert.equal(r.text.includes(key) || r.text.includes(neighbour), false);
          }
        } finally {
          await viewer.close();
        }
      }, { ANTHROPIC_API_KEY: key });
    } finally {
      holder.kill();
      await holder.status;
    }
  },
});

Deno.test({
  name: "a role's grep searches no folder that holds a hidden path (~/.ssh under the home folder)",
  ignore: !haveBwrap,
  async fn() {
    await withAgentWorld({}, async (w) => {
      // A role with pi's grep, which searches hidden folders (rg --hidden).
      await Deno.mkdir(join(w.home, ".baton", "agents"), { recursive: true });
      await Deno.writeTextFile(
        join(w.home, ".baton", "agents", "explorer.md"),
        "---\nname: explorer\ndescription: Finds things\ntools: read, grep\n---\nFind it.\n",
      );
      const searches = [{ pattern: "PRIVATE-KEY", path: w.home }, { pattern: "PRIVATE-KEY" }];
      w.llm.responder = (req) => {
        const names = (req.tools ?? []).map((t) => t.function.name);
        const done = req.messages.some((m) => m.role === "tool");
        if (names.includes("subagent")) {
          return done ? { text: "Done." } : {
            toolCalls: [{ name: "subagent", args: { task: "find the key", agent: "explorer" } }],
          };
        }
        return done ? { text: "Nothing." } : {
          toolCalls: searches.map((args, i) => ({ id: `g${i}`, name: "grep", args })),
        };
      };
      // The child's grep with no path searches its folder: the home folder here.
      const { sessionId, viewer } = await spawnIn(w, "Go", w.home, MODEL);
      try {
        await viewer.waitForEvent(sessionId, "agent_end", 60_000);
        const end = viewer.eventsOf(sessionId).find((e) => e.e.type === "tool_execution_end")!;
        const [run] = (end.e.result as { details: { runs: { sessionId: string }[] } }).details.runs;
        const child = resultsOf(await storedEvents(w.user, run!.sessionId));
        assert.equal(child.size, searches.length);
        for (const [id, r] of child) {
          assert.ok(r.isError, `${id} searched: ${r.text.slice(0, 200)}`);
          assert.match(r.text, /Sandbox: searching '.*' would read '.*\.ssh', which is denied/, id);
          assert.equal(r.text.includes("PRIVATE-KEY-MATERIAL"), false);
        }
      } finally {
        await viewer.close();
      }
    });
  },
});

Deno.test({
  name:
    "a write through a symlink whose target does not exist yet lands nowhere outside the folder; a path is checked as the tool spells it",
  ignore: !haveBwrap,
  async fn() {
    // Outside what the sandbox lets the agent write (the folder and /tmp, where the test's home is).
    const outside = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "baton-gate-" });
    await withAgentWorld({}, async (w) => {
      // Files a shell or a desktop would run, not there yet.
      const targets = [join(outside, ".bash_aliases"), join(outside, "autostart")];
      // And a link named with a trailing space, read by a name without: pi does not trim.
      const key = join(w.home, ".ssh", "id_rsa");
      const links = [...targets.map((t, i) => `ln -s '${t}' link${i}`), `ln -s '${key}' 'k '`]
        .join(" && ");
      w.llm.enqueue(
        { text: "Linking.", toolCalls: [{ id: "ln", name: "bash", args: { command: links } }] },
        {
          text: "Writing.",
          toolCalls: [
            { id: "w0", name: "write", args: { path: "link0", content: "echo pwned\n" } },
            { id: "w1", name: "edit", args: { path: "link1/evil", oldText: "a", newText: "b" } },
            { id: "w2", name: "write", args: { path: "link1/evil.desktop", content: "x" } },
            { id: "r0", name: "read", args: { path: "k " } },
            { id: "r1", name: "read", args: { path: "@k\u00A0" } },
          ],
        },
        { text: "Done." },
      );
      const { sessionId, viewer } = await spawnIn(w, "Go", w.project, MODEL);
      try {
        await viewer.waitForEvent(sessionId, "agent_end", 60_000);
        const results = resultsOf(viewer.eventsOf(sessionId));
        assert.equal(results.get("ln")?.isError, false, String(results.get("ln")?.text));
        for (const id of ["w0", "w2"]) {
          const r = results.get(id)!;
          assert.ok(r.isError, `${id} was written: ${r.text}`);
          assert.match(r.text, /Sandbox: writes are allowed only in/, id);
        }
        for (const id of ["r0", "r1"]) {
          const r = results.get(id)!;
          assert.ok(r.isError, `${id} was read: ${r.text}`);
          assert.match(r.text, /Sandbox: reading '.*\.ssh' is denied/, id);
          assert.equal(r.text.includes("PRIVATE-KEY-MATERIAL"), false);
        }
        for (const t of targets) {
          assert.equal(await Deno.lstat(t).then(() => true, () => false), false, `${t} exists`);
        }
      } finally {
        await viewer.close();
      }
    }).finally(() => Deno.remove(outside, { recursive: true }));
  },
});

Deno.test({
  name:
    "a .pi the agent's bash makes is not loaded by the next session's worker, unless projects are trusted",
  ignore: !haveBwrap,
  async fn() {
    const outside = await Deno.makeTempDir({ dir: "/var/tmp", prefix: "baton-pi-" });
    const marker = join(outside, "loaded");
    await withAgentWorld({}, async (w) => {
      // Where no .pi is, the sandbox cannot keep bash from making one (sandbox.md, "Limits").
      const code = `Deno.writeTextFileSync(${JSON.stringify(marker)}, "ran");\n` +
        "export default function () {}\n";
      const make = `mkdir -p .pi/extensions && cat > .pi/extensions/evil.ts <<'EOF'\n${code}EOF`;
      w.llm.enqueue(
        { text: "Setting up.", toolCalls: [{ id: "mk", name: "bash", args: { command: make } }] },
        { text: "Done." },
      );
      const session = async () => {
        const { sessionId, viewer } = await spawnIn(w, "Go", w.project, MODEL);
        try {
          await viewer.waitForEvent(sessionId, "agent_end", 60_000);
          const events = viewer.eventsOf(sessionId);
          const start = events.find((e) => e.e.type === "session_start")!.e;
          return { results: resultsOf(events), notice: String(start.notice ?? "") };
        } finally {
          await viewer.close();
        }
      };
      const { results: made } = await session();
      assert.equal(made.get("mk")?.isError, false, String(made.get("mk")?.text));
      assert.ok(await Deno.stat(join(w.project, ".pi", "extensions", "evil.ts")));
      const exists = () => Deno.stat(marker).then(() => true, () => false);
      assert.equal(await exists(), false, "loaded in the session that made it");

      const next = await session();
      assert.equal(
        await exists(),
        false,
        "the next session's worker loaded the project's extension",
      );
      assert.match(
        next.notice,
        /The project's \.pi has 1 extension\(s\) that are not loaded/,
      );

      // The person trusts projects: pi loads it as it would (so the check above can fail).
      await Deno.writeTextFile(
        join(w.home, ".baton", "config.json"),
        JSON.stringify({ trustProjectConfig: true }),
      );
      assert.doesNotMatch((await session()).notice, /not loaded/);
      assert.equal(await exists(), true, "a trusted project's extension did not load");
    }).finally(() => Deno.remove(outside, { recursive: true }));
  },
});

Deno.test({
  name:
    "the file tools check the file they open: a symlink the agent keeps flipping never lets read reach ~/.ssh, and a device is not read",
  ignore: !haveBwrap,
  async fn() {
    await withAgentWorld({}, async (w) => {
      await Deno.writeTextFile(join(w.project, "ok.txt"), "fine\n");
      const key = join(w.home, ".ssh", "id_rsa");
      // A detached loop of the agent's bash swaps the link between the gate's check and pi's open.
      const flip = `(timeout 60 sh -c 'while :; do ln -sfn "${key}" x; ln -sfn ok.txt x; done' ` +
        `>/dev/null 2>&1 &) && sleep 0.2 && echo started`;
      const reads = Array.from({ length: 40 }, (_, i) => ({
        id: `r${i}`,
        name: "read",
        args: { path: "x" },
      }));
      w.llm.enqueue(
        { text: "Flipping.", toolCalls: [{ id: "flip", name: "bash", args: { command: flip } }] },
        {
          text: "Reading.",
          toolCalls: [
            ...reads,
            { id: "zero", name: "read", args: { path: "/dev/zero" } },
            { id: "plain", name: "read", args: { path: "ok.txt" } },
          ],
        },
        { text: "Done." },
      );
      const { sessionId, viewer } = await spawnIn(w, "Go", w.project, MODEL);
      try {
        await viewer.waitForEvent(sessionId, "agent_end", 90_000);
        const results = resultsOf(viewer.eventsOf(sessionId));
        assert.equal(results.get("flip")?.isError, false, String(results.get("flip")?.text));
        // Parallel reads land close together: any mix of the link's states is fine, not the key.
        for (const { id } of reads) {
          const r = results.get(id)!;
          assert.equal(r.text.includes("PRIVATE-KEY-MATERIAL"), false, `${id} read the key`);
          if (!r.isError) assert.match(r.text, /fine/, id);
          else assert.match(r.text, /Sandbox: reading '.*\.ssh' is denied|ENOENT/, id);
        }
        const plain = results.get("plain")!;
        assert.equal(plain.isError, false, plain.text);
        assert.match(plain.text, /fine/);
        const zero = results.get("zero")!;
        assert.ok(zero.isError, zero.text.slice(0, 200));
        assert.match(zero.text, /not a regular file/);
      } finally {
        await viewer.close();
      }
    });
  },
});
