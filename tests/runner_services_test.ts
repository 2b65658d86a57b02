/**
 * Runner services end to end (issue 19): a real relay and runner whose HOME
 * holds the example Notes service (examples/services/notes), a service with
 * split triggers/sigils files, one with a broken manifest, one whose init
 * throws, and a service inside a plugin. Each service runs in its own
 * process; the relay lists them, the broken ones with their reason.
 */
import assert from "node:assert/strict";
import { join, resolve } from "node:path";
import { json, signUp } from "./harness/client.ts";
import { ROOT } from "./harness/procs.ts";
import {
  answer,
  closeWorld,
  requestText,
  spawn,
  startWorld,
  userTexts,
  type World,
} from "./harness/trigger_world.ts";
import { Viewer } from "./harness/client.ts";
import type { RelayToViewer } from "../shared/protocol.ts";
import { eventually } from "./harness/wait.ts";

const EXAMPLE = resolve(ROOT, "examples", "services", "notes");

async function write(path: string, text: string): Promise<void> {
  await Deno.mkdir(join(path, ".."), { recursive: true });
  await Deno.writeTextFile(path, text);
}

/** The argument of the program the split service starts (to find it in /proc). */
const CHILD_MARK = "61.25";

const SERVICE_CLASS = (id: string, body = "") =>
  `export default class S { id = ${JSON.stringify(id)}; init() { ${body} } dispose() {} }\n`;

/** A runner HOME with five services: two working, two broken, one from a plugin. */
async function services(home: string): Promise<void> {
  const dir = join(home, ".baton", "services");
  await Deno.mkdir(dir, { recursive: true });
  await Deno.symlink(EXAMPLE, join(dir, "notes"));
  await write(join(dir, "broken", "manifest.json"), "{ not json");
  await write(join(dir, "throws", "manifest.json"), JSON.stringify({ id: "throws", label: "T" }));
  await write(join(dir, "throws", "index.ts"), SERVICE_CLASS("throws", "throw new Error('boom');"));
  await write(join(dir, "hangs", "manifest.json"), JSON.stringify({ id: "hangs", label: "H" }));
  await write(
    join(dir, "hangs", "index.ts"),
    "export default class { id = 'hangs'; init() { return new Promise(() => {}); } dispose() {} }",
  );
  // Split files override the inline arrays: a bare array, and the object form.
  await write(
    join(dir, "split", "manifest.json"),
    JSON.stringify({
      id: "split",
      label: "Split",
      entry: "./main.ts",
      triggers: [{ type: "split:inline", label: "Inline (overridden)" }],
      sigils: [{ type: "inline", label: "Inline (overridden)" }],
    }),
  );
  // It reads the key, and starts a program of its own (as a service may start a dev server).
  await write(
    join(dir, "split", "main.ts"),
    SERVICE_CLASS(
      "split",
      `Deno.writeTextFileSync("key-seen.txt", Deno.env.get("BATON_RUNNER_API_KEY") ? "yes" : "no");
      new Deno.Command("sleep", { args: [${JSON.stringify(CHILD_MARK)}] }).spawn();`,
    ),
  );
  await write(
    join(dir, "split", "triggers.json"),
    JSON.stringify([{ type: "split:done", label: "Done" }]),
  );
  await write(
    join(dir, "split", "sigils.json"),
    JSON.stringify({ sigils: [{ type: "ticket", label: "Ticket", aliases: ["t"] }] }),
  );
  // A plugin (a pi extension folder) that brings a service along.
  const plugin = join(home, ".baton", "extensions", "myplugin");
  await write(join(plugin, "index.ts"), "export default function (_pi: unknown) {}\n");
  await write(
    join(plugin, "services", "plugsvc", "manifest.json"),
    JSON.stringify({ id: "plugsvc", label: "From a plugin", icon: "puzzle" }),
  );
  await write(join(plugin, "services", "plugsvc", "index.ts"), SERVICE_CLASS("plugsvc"));
  // The runner's own trigger file is merged with the services' definitions.
  await write(
    join(home, ".baton", "triggers.json"),
    JSON.stringify({ triggers: [{ type: "ci:build_failed", label: "Build failed" }] }),
  );
}

/** Pids of the runner's `_service` processes (children of its daemon). */
function servicePids(): number[] {
  const out: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).split("\0");
      if (cmd.includes("_service")) out.push(Number(e.name));
    } catch { /* gone */ }
  }
  return out;
}

Deno.test("runner services: discovered, isolated when broken, listed, and firing triggers with the runner's key", async (t) => {
  let w: World | undefined;
  let ok = false;
  const before = new Set(servicePids());
  try {
    w = await startWorld({
      beforeRunner: services,
      relay: { allowSignup: true },
      runnerEnv: { BATON_SERVICE_INIT_TIMEOUT: "3s" },
    });
    const world = w;
    const list = async () => {
      const res = await answer(await world.user.web(`/api/runners/${world.runnerId}/services`));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    // The announcement comes after the services load.
    const view = await eventually("the runner's services", async () => {
      const v = await list();
      return v.services.length === 6 ? v : undefined;
    });

    await t.step("working services are listed with their panels and sigils", () => {
      assert.deepEqual([...view.serviceIds].sort(), ["notes", "plugsvc", "split"]);
      assert.equal(view.panels.length, 1);
      assert.equal(view.panels[0].id, "notes");
      assert.equal(view.panels[0].title, "Notes");
      assert.equal(view.panels[0].icon, "sticky-note");
      assert.ok(view.panels[0].port > 0);
      const types = view.sigils.map((s: { type: string }) => s.type).sort();
      assert.deepEqual(types, ["note", "ticket"]);
      const note = view.sigils.find((s: { type: string }) => s.type === "note");
      assert.equal(note.serviceId, "notes");
      assert.equal(note.resolve, "/api/notes/{id}");
      const plug = view.services.find((s: { id: string }) => s.id === "plugsvc");
      assert.equal(plug.source, "plugin");
      assert.equal(plug.icon, "puzzle");
    });

    await t.step(
      "a broken manifest, a throwing init and a hanging init are reported, with the reason",
      () => {
        const broken = view.services.find((s: { id: string }) => s.id.endsWith("broken"));
        assert.equal(broken.status, "failed");
        assert.match(broken.error, /Invalid JSON/);
        const throws = view.services.find((s: { id: string }) => s.id === "throws");
        assert.equal(throws.status, "failed");
        assert.match(throws.error, /init failed: boom/);
        const log = world.runner.proc.output();
        assert.match(log, /service throws failed: init failed: boom/);
        assert.match(log, /Invalid JSON in .*broken/);
        assert.match(log, /services: 3 of 6 running/);
        // An init that never ends fails after BATON_SERVICE_INIT_TIMEOUT, and its process is ended.
        const hangs = view.services.find((s: { id: string }) => s.id === "hangs");
        assert.equal(hangs.status, "failed");
        assert.match(hangs.error, /init\(\) did not finish within 3000 ms/);
      },
    );

    await t.step(
      "split files override the manifest; the runner's triggers.json is merged",
      async () => {
        const res = await answer(await world.user.api(`/api/runners/${world.runnerId}/triggers`));
        const types = res.body.triggerDefs.map((d: { type: string }) => d.type).sort();
        assert.deepEqual(types, ["ci:build_failed", "notes:note_added", "split:done"]);
      },
    );

    await t.step("another user's runner is 404, like a missing one", async () => {
      const other = await signUp(world.relay.url);
      const foreign = await other.web(`/api/runners/${world.runnerId}/services`);
      assert.equal(foreign.status, 404);
      assert.equal((await foreign.json()).error.code, "not_found");
      const missing = await world.user.web(`/api/runners/nope/services`);
      assert.equal(missing.status, 404);
      await missing.body?.cancel();
    });

    await t.step(
      "a service holds the runner's key in memory only, never in its environment",
      () => {
        const pids = servicePids().filter((p) => !before.has(p));
        assert.equal(pids.length, 3, `service processes: ${pids}`);
        for (const pid of pids) {
          const env = Deno.readTextFileSync(`/proc/${pid}/environ`);
          assert.ok(!env.includes(world.user.apiKey), `pid ${pid} has the key in its environment`);
        }
        // The service reads it, but a program it starts does not inherit it.
        const home = world.home;
        const seen = Deno.readTextFileSync(
          join(home, ".baton", "services", "split", "key-seen.txt"),
        );
        assert.equal(seen, "yes");
        const children = [...Deno.readDirSync("/proc")].filter((e) => /^\d+$/.test(e.name))
          .map((e) => Number(e.name)).filter((pid) => {
            try {
              const cmd = Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0");
              const ppid = Number(
                Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1]!.split(" ")[1],
              );
              return cmd[1] === CHILD_MARK && pids.includes(ppid);
            } catch {
              return false;
            }
          });
        assert.equal(children.length, 1, "the split service's own program");
        try {
          const env = Deno.readTextFileSync(`/proc/${children[0]}/environ`);
          assert.ok(!env.includes(world.user.apiKey), "the service's child has the key");
        } finally {
          Deno.kill(children[0]!, "SIGKILL");
        }
      },
    );

    await t.step(
      "the Notes panel fires its trigger with the runner's key into a subscribed session",
      async () => {
        const sessionId = await spawn(world, "Wait for notes.");
        const sub = await world.user.api(
          `/api/sessions/${sessionId}/trigger-subscriptions`,
          json("POST", { triggerType: "notes:note_added" }),
        );
        assert.equal(sub.status, 200, await sub.clone().text());
        await sub.body?.cancel();
        // As the panel does: a relative POST through the tunnel, with the browser's cookie.
        const port = view.panels[0].port;
        const base = `/api/tunnel/runner/${world.runnerId}/${port}`;
        const page = await world.user.web(`${base}/`);
        assert.equal(page.status, 200);
        assert.match(await page.text(), /Add a note/);
        const res = await answer(
          await world.user.web(
            `${base}/api/notes`,
            json("POST", { text: "Ship the release notes" }),
          ),
        );
        assert.equal(res.status, 201, JSON.stringify(res.body));
        assert.equal(res.body.trigger.ok, true, JSON.stringify(res.body.trigger));
        assert.equal(res.body.trigger.delivered, 1);
        await world.model.withText("Ship the release notes");
        // The sigil's resolve endpoint answers what a pill shows.
        const id = res.body.note.id;
        const resolved = await answer(await world.user.web(`${base}/api/notes/${id}`));
        assert.equal(resolved.body.title, "Ship the release notes");
      },
    );

    await t.step("the agent's list_available_triggers carries the runner's sigils", async () => {
      world.model.rules = [(req) => {
        if (!userTexts(req)[0]?.startsWith("SIGIL-PROBE")) return undefined;
        if (req.messages.at(-1)?.role === "tool") return { text: "Done." };
        return { toolCalls: [{ name: "list_available_triggers", args: {} }] };
      }];
      await spawn(world, "SIGIL-PROBE: which sigils can I write?");
      const req = await eventually(
        "the tool's answer",
        () =>
          world.model.requests.find((r) =>
            userTexts(r)[0]?.startsWith("SIGIL-PROBE") && r.messages.at(-1)?.role === "tool"
          ),
      );
      world.model.rules = [];
      const last = requestText({ ...req, messages: [req.messages.at(-1)!] });
      assert.match(last, /"sigils"/);
      assert.match(last, /"type": "note"/);
      assert.match(last, /"aliases": \[\s*"n"\s*\]/);
    });

    await t.step("a service that dies later is reported, and viewers hear of it", async () => {
      const viewer = await Viewer.connect(world.relay.url, { apiKey: world.user.apiKey });
      try {
        const plug = servicePids().filter((p) => !before.has(p)).find((p) =>
          Deno.readTextFileSync(`/proc/${p}/cwd/manifest.json`).includes("plugsvc")
        );
        assert.ok(plug, "the plugin service's process");
        Deno.kill(plug, "SIGKILL");
        type Services = Extract<RelayToViewer, { t: "services" }>;
        const msg = await viewer.waitFor<Services>((m) =>
          m.t === "services" &&
          m.services.services.some((s) => s.id === "plugsvc" && s.status === "failed")
        );
        assert.equal(msg.runnerId, world.runnerId);
        assert.match(msg.services.services.find((s) => s.id === "plugsvc")!.error!, /SIGKILL/);
        assert.deepEqual([...msg.services.serviceIds].sort(), ["notes", "split"]);
        // The others keep running.
        const v = await list();
        assert.equal(v.panels.length, 1);
      } finally {
        await viewer.close();
      }
    });

    await t.step("dispose() runs at shutdown: the panel's server is gone", async () => {
      const port = view.panels[0].port;
      await world.runner.stop();
      await assert.rejects(fetch(`http://127.0.0.1:${port}/`).then((r) => r.text()));
      assert.doesNotMatch(world.runner.proc.output(), /did not end it in time/);
      assert.deepEqual(servicePids().filter((p) => !before.has(p)), []);
    });
    ok = true;
  } finally {
    await closeWorld(w, ok);
  }
});
