/**
 * baton as one file (scripts/bundle.ts), copied alone into an empty folder
 * and run with nothing but the `deno` binary and an empty Deno cache: the
 * relay serves the web client and stores events, a runner connects and a
 * session runs through the scripted model with a real tool call. Anything
 * the program still read from the source tree (a Worker's module file, the
 * web client's files, pi's package.json, an npm package) would fail here.
 * This stands in for `deno compile`, whose runtime cannot be downloaded in CI.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { bundleBaton } from "../scripts/bundle.ts";
import type { RunnerListResponse } from "../shared/api.ts";
import { json, signUp, Viewer } from "./harness/client.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { RelayProcess, ROOT, startRunner, tempDir } from "./harness/procs.ts";

Deno.test("the single-file bundle runs relay, runner and a session from an empty folder", async () => {
  const work = await tempDir("baton-single-file-");
  const built = await bundleBaton({ out: join(work, "build", "baton.js") });
  // The one file, alone: no deno.json, no node_modules, no web/dist beside it.
  const app = join(work, "app");
  await Deno.mkdir(app);
  await Deno.copyFile(built, join(app, "baton.js"));
  assert.deepEqual([...Deno.readDirSync(app)].map((e) => e.name), ["baton.js"]);
  const program = ["run", "-A", "--quiet", "--no-config", join(app, "baton.js")];
  // An empty Deno cache: no npm package can come from outside the file.
  const env = { DENO_DIR: join(work, "deno-cache") };

  const llm = MockLlm.start();
  const relay = await RelayProcess.start({ program, cwd: app, env });
  const home = join(work, "home");
  let runner: Awaited<ReturnType<typeof startRunner>> | undefined;
  let ok = false;
  try {
    // The web client is inside: the page and its script are the built ones.
    const page = await fetch(`${relay.url}/`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<script[^>]+\/assets\/app\.js\?v=[0-9a-f]{12}/);
    const js = new Uint8Array(await (await fetch(`${relay.url}/assets/app.js`)).arrayBuffer());
    assert.deepEqual(js, await Deno.readFile(join(ROOT, "web", "dist", "app.js")));
    const icon = new Uint8Array(
      await (await fetch(`${relay.url}/icons/icon-192.png`)).arrayBuffer(),
    );
    assert.deepEqual(icon, await Deno.readFile(join(ROOT, "web", "dist", "icon-192.png")));
    // The metrics library, loaded on the first scrape, is in the bundle too.
    const metrics = await fetch(`${relay.url}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(await metrics.text(), /^baton_events_ingested_total 0$/m);

    const user = await signUp(relay.url);
    await Deno.mkdir(home);
    await llm.writeModelsJson(home);
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: user.apiKey,
      home,
      program,
      cwd: app,
      env,
    });
    const [r]: RunnerListResponse = await (await user.api("/api/runners")).json();
    assert.ok(r, "the runner is listed");

    llm.enqueue(
      {
        text: "Writing it.",
        toolCalls: [{ name: "bash", args: { command: "echo bundled > b.txt" } }],
      },
      { text: "Done from one file." },
    );
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    try {
      const res = await user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: r.id, cwd: home, model: MODEL, prompt: "Write b.txt" }),
      );
      assert.equal(res.status, 200, await res.clone().text());
      const { sessionId } = await res.json();
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "agent_end", 60_000);
      const types = viewer.eventsOf(sessionId).map((e) => e.e.type);
      assert.equal(types[0], "session_start");
      assert.ok(types.includes("tool_execution_end"), types.join(" "));
      assert.equal((await Deno.readTextFile(join(home, "b.txt"))).trim(), "bundled");
    } finally {
      await viewer.close();
    }

    // The Workers' modules are inside too: started from the file with their
    // entry's name (as the relay and the daemon start them), each answers.
    const driver = join(work, "threads.ts");
    await Deno.writeTextFile(driver, THREAD_DRIVER);
    const db = join(work, "thread.db");
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--quiet", "--no-config", driver, join(app, "baton.js"), db, home],
      env: { ...env, HOME: home, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
      clearEnv: true,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, said);
    assert.match(said, /store-thread: \{"closed":true\}/);
    assert.match(said, /git-watch: \{"t":"ready","id":1\}/);
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

/** Starts each of baton's Workers from the bundle by name and prints its first answer. */
const THREAD_DRIVER = `
import { DatabaseSync } from "node:sqlite";
import { pathToFileURL } from "node:url";
const [bundle, db, dir] = Deno.args;
new DatabaseSync(db).exec("PRAGMA journal_mode = WAL; CREATE TABLE t (x)");
function first(entry, messages) {
  const w = new Worker(pathToFileURL(bundle).href, { type: "module", name: "baton-thread:" + entry });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(entry + ": no answer")), 20000);
    w.onmessage = (e) => { clearTimeout(timer); w.terminate(); resolve(entry + ": " + JSON.stringify(e.data)); };
    w.onerror = (e) => { clearTimeout(timer); reject(new Error(entry + ": " + e.message)); };
    for (const m of messages) w.postMessage(m);
  });
}
console.log(await first("store-thread", [{ open: db }, { close: true }]));
console.log(await first("git-watch", [{ t: "watch", id: 1, top: dir }]));
`;
