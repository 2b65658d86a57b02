/**
 * Skills, agent definitions and plugins of a runner, through the relay, on a
 * real runner whose HOME is a temporary folder: the files written are pi's
 * own (a new session's pi loads them), bad names change nothing, plugins
 * are listed and `--no-plugins` keeps them out of sessions, and another
 * user's runner answers as an unknown one.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type {
  AgentsListResponse,
  CreateKeyResponse,
  DocResponse,
  PluginsResponse,
  RunnerListResponse,
  SkillsChangeResponse,
  SkillsListResponse,
} from "../shared/api.ts";
import { errorCode, json, signIn, signUp, type User } from "./harness/client.ts";
import { type Stack, startTestRelay, withStack } from "./harness/in_process.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { baseEnv, BatonProcess, startRunner, tempDir } from "./harness/procs.ts";

const SKILL = (name: string, description: string, body = "Do the thing.") =>
  `---\nname: ${name}\ndescription: ${description}\n---\n\n# ${name}\n\n${body}\n`;

/** Every file under `dir` (relative paths), sorted; [] when it does not exist. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, rel: string) => {
    try {
      for await (const e of Deno.readDir(d)) {
        const r = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory) await walk(join(d, e.name), r);
        else out.push(r);
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  };
  await walk(dir, "");
  return out.sort();
}

async function ok<T>(res: Promise<Response>, what: string): Promise<T> {
  const r = await res;
  const text = await r.text();
  assert.equal(r.status, 200, `${what}: ${text}`);
  return JSON.parse(text) as T;
}

/** Starts a session and waits for the model's first request; its system prompt and tools. */
async function firstRequest(s: Stack, prompt: string) {
  const before = s.llm.requests.length;
  s.llm.enqueue({ text: "ok" });
  const res = await s.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: s.runnerId, prompt, model: MODEL }),
  );
  assert.equal(res.status, 200, await res.text());
  await s.llm.waitForRequests(before + 1);
  const req = s.llm.requests[before]!;
  const system = req.messages.filter((m) => m.role === "system" || m.role === "developer")
    .map((m) => typeof m.content === "string" ? m.content : JSON.stringify(m.content)).join("\n");
  return { system, tools: (req.tools ?? []).map((t) => t.function.name) };
}

Deno.test("skills and agent definitions round-trip through the API as pi's own files", async (t) => {
  const root = await tempDir("baton-skills-root-");
  await withStack({ runnerEnv: { BATON_WORKSPACE_ROOT: root } }, async (s) => {
    const base = `/api/runners/${s.runnerId}`;
    const skillsDir = join(s.home, ".baton", "skills");
    const agentsDir = join(s.home, ".baton", "agents");

    await t.step("a skill: create, list, read, update, delete", async () => {
      const empty = await ok<SkillsListResponse>(s.user.web(`${base}/skills`), "list");
      assert.deepEqual(empty.skills, []);
      assert.equal(empty.folder, skillsDir);

      const content = SKILL("release-notes", "Writes release notes from git log");
      const created = await ok<SkillsChangeResponse>(
        s.user.web(`${base}/skills`, json("POST", { name: "release-notes", content })),
        "create",
      );
      assert.deepEqual(created, { ok: true, skills: ["release-notes"] });
      const file = join(skillsDir, "release-notes", "SKILL.md");
      assert.equal(await Deno.readTextFile(file), content);
      assert.equal((await Deno.stat(file)).mode! & 0o077, 0, "owner-only like ~/.baton");

      const list = await ok<SkillsListResponse>(s.user.web(`${base}/skills`), "list");
      assert.deepEqual(list.skills, ["release-notes"]);
      assert.deepEqual(list.entries, [{
        name: "release-notes",
        scope: "user",
        path: file,
        editable: true,
        description: "Writes release notes from git log",
      }]);

      const doc = await ok<DocResponse>(s.user.web(`${base}/skills/release-notes`), "get");
      assert.deepEqual(doc, {
        name: "release-notes",
        content,
        scope: "user",
        path: file,
        editable: true,
      });

      const again = await s.user.web(
        `${base}/skills`,
        json("POST", { name: "release-notes", content }),
      );
      assert.equal(await errorCode(again, 409, "create twice"), "already_exists");

      const changed = SKILL("release-notes", "Writes release notes", "Use conventional commits.");
      await ok(
        s.user.web(`${base}/skills/release-notes`, json("PUT", { content: changed })),
        "put",
      );
      assert.equal(await Deno.readTextFile(file), changed);
      assert.deepEqual(
        await filesUnder(skillsDir),
        ["release-notes/SKILL.md"],
        "no temp file left",
      );

      const missing = await s.user.web(`${base}/skills/nope`, json("PUT", { content: "x" }));
      assert.equal(await errorCode(missing, 404, "put missing"), "not_found");
      assert.equal(
        await errorCode(await s.user.web(`${base}/skills/nope`), 404, "get"),
        "not_found",
      );

      // A change made on the runner's disk shows without a refresh.
      await Deno.mkdir(join(skillsDir, "by-hand"));
      await Deno.writeTextFile(join(skillsDir, "by-hand", "SKILL.md"), SKILL("by-hand", "Manual"));
      const seen = await ok<SkillsListResponse>(s.user.web(`${base}/skills`), "list");
      assert.deepEqual(seen.skills.sort(), ["by-hand", "release-notes"]);
      const refreshed = await ok<SkillsChangeResponse>(
        s.user.web(`${base}/skills/refresh`, { method: "POST" }),
        "refresh",
      );
      assert.deepEqual(refreshed.skills.sort(), ["by-hand", "release-notes"]);

      const deleted = await ok<SkillsChangeResponse>(
        s.user.web(`${base}/skills/release-notes`, { method: "DELETE" }),
        "delete",
      );
      assert.deepEqual(deleted, { ok: true, skills: ["by-hand"] });
      assert.deepEqual(await filesUnder(skillsDir), ["by-hand/SKILL.md"]);
      const gone = await s.user.web(`${base}/skills/release-notes`, { method: "DELETE" });
      assert.equal(await errorCode(gone, 404, "delete twice"), "not_found");
    });

    await t.step("an agent definition: create, list, read, update, delete", async () => {
      const content =
        "---\nname: scout\ndescription: Fast recon\ntools: read, grep\n---\n\nLook.\n";
      await ok(s.user.api(`${base}/agents`, json("POST", { name: "scout", content })), "create");
      const file = join(agentsDir, "scout.md");
      assert.equal(await Deno.readTextFile(file), content);
      const list = await ok<AgentsListResponse>(s.user.api(`${base}/agents`), "list");
      assert.deepEqual(list.agents, ["scout"]);
      assert.equal(list.entries[0]?.description, "Fast recon");
      const doc = await ok<DocResponse>(s.user.api(`${base}/agents/scout`), "get");
      assert.equal(doc.content, content);
      await ok(s.user.api(`${base}/agents/scout`, json("PUT", { content: "v2" })), "put");
      assert.equal(await Deno.readTextFile(file), "v2");
      const del = await ok<{ agents: string[] }>(
        s.user.api(`${base}/agents/scout`, { method: "DELETE" }),
        "delete",
      );
      assert.deepEqual(del.agents, []);
      assert.deepEqual(await filesUnder(agentsDir), []);
    });

    await t.step("a project folder adds its own skills and agents, marked read-only", async () => {
      const project = join(root, "proj");
      await Deno.mkdir(join(project, ".pi", "skills", "lint-rules"), { recursive: true });
      await Deno.writeTextFile(
        join(project, ".pi", "skills", "lint-rules", "SKILL.md"),
        SKILL("lint-rules", "The project's lint rules"),
      );
      await Deno.mkdir(join(project, ".pi", "agents"), { recursive: true });
      await Deno.writeTextFile(join(project, ".pi", "agents", "reviewer.md"), "Review.");
      const q = `?cwd=${encodeURIComponent(project)}`;
      const skills = await ok<SkillsListResponse>(s.user.api(`${base}/skills${q}`), "list");
      const proj = skills.entries.find((e) => e.name === "lint-rules");
      assert.equal(proj?.scope, "project");
      assert.equal(proj?.editable, false);
      const plain = await ok<SkillsListResponse>(s.user.api(`${base}/skills`), "list");
      assert.equal(plain.skills.includes("lint-rules"), false);
      const agents = await ok<AgentsListResponse>(s.user.api(`${base}/agents${q}`), "list");
      assert.deepEqual(agents.entries.map((e) => [e.name, e.scope]), [["reviewer", "project"]]);
      const doc = await ok<DocResponse>(s.user.api(`${base}/agents/reviewer${q}`), "get");
      assert.equal(doc.content, "Review.");
      const rel = await s.user.api(`${base}/skills?cwd=proj`);
      assert.equal(await errorCode(rel, 400, "relative cwd"), "bad_request");
      const outside = await s.user.api(`${base}/agents?cwd=${encodeURIComponent(s.home)}`);
      assert.equal(await errorCode(outside, 400, "cwd outside"), "cwd_outside_roots");
      const escape = await s.user.api(
        `${base}/plugins?cwd=${encodeURIComponent(join(root, "proj", "..", ".."))}`,
      );
      assert.equal(await errorCode(escape, 400, "cwd escaping"), "cwd_outside_roots");
    });
  });
  await Deno.remove(root, { recursive: true }).catch(() => {});
});

Deno.test("names with a path separator, '..', a backslash or NUL are refused and nothing is written", async () => {
  await withStack({}, async (s) => {
    const base = `/api/runners/${s.runnerId}`;
    const before = await filesUnder(s.home);
    const bad = [
      "../escape",
      "..",
      "a/b",
      "a\\b",
      "a\u0000b",
      ".hidden",
      "",
      "x".repeat(65),
      "/etc/passwd",
      "C:\\x",
    ];
    for (const kind of ["skills", "agents"]) {
      for (const name of bad) {
        const what = `${kind} ${JSON.stringify(name)}`;
        const res = await s.user.api(`${base}/${kind}`, json("POST", { name, content: "x" }));
        assert.equal(await errorCode(res, 400, `create ${what}`), "invalid_name");
        if (name === "" || name === "..") continue; // Not a path segment of their own.
        const seg = encodeURIComponent(name);
        for (const method of ["GET", "PUT", "DELETE"]) {
          const init = method === "PUT" ? json("PUT", { content: "x" }) : { method };
          const r = await s.user.api(`${base}/${kind}/${seg}`, init);
          assert.equal(await errorCode(r, 400, `${method} ${what}`), "invalid_name");
        }
      }
      // fetch() folds an encoded `..` segment away: whatever route that reaches, nothing is written.
      const encodedDots = await s.user.api(`${base}/${kind}/%2E%2E`, json("PUT", { content: "x" }));
      assert.ok(encodedDots.status >= 400, `%2E%2E: ${await encodedDots.text()}`);
      const big = "x".repeat(256 * 1024 + 1);
      const tooBig = await s.user.api(
        `${base}/${kind}`,
        json("POST", { name: "big", content: big }),
      );
      assert.equal(await errorCode(tooBig, 413, "over the cap"), "content_too_large");
    }
    assert.deepEqual(await filesUnder(s.home), before, "nothing was written");
  });
});

Deno.test("a skill created through the API is in the system prompt of a new session's model", async () => {
  await withStack({}, async (s) => {
    const content = SKILL("zebra-facts", "Answers questions about zebras with striped precision");
    await ok(
      s.user.api(
        `/api/runners/${s.runnerId}/skills`,
        json("POST", { name: "zebra-facts", content }),
      ),
      "create",
    );
    const { system } = await firstRequest(s, "Tell me about zebras");
    assert.match(system, /zebra-facts/);
    assert.match(system, /Answers questions about zebras with striped precision/);
    assert.match(system, new RegExp(join(s.home, ".baton", "skills", "zebra-facts", "SKILL.md")));
  });
});

/** An extension that registers the tool `baton_marker_tool`. */
const EXTENSION = `export default function (pi) {
  pi.registerTool({
    name: "baton_marker_tool",
    label: "Marker",
    description: "Proves the extension was loaded",
    parameters: { type: "object", properties: {} },
    async execute() {
      return { content: [{ type: "text", text: "marked" }], details: {} };
    },
  });
}
`;

async function writeExtension(home: string): Promise<string> {
  const dir = join(home, ".baton", "extensions", "marker");
  await Deno.mkdir(dir, { recursive: true });
  const path = join(dir, "index.js");
  await Deno.writeTextFile(path, EXTENSION);
  return path;
}

Deno.test("plugins are listed and loaded, and --no-plugins keeps them out of sessions", async (t) => {
  const home = await tempDir("baton-plugins-home-");
  const extension = await writeExtension(home);
  await withStack({}, async (s) => {
    const base = `/api/runners/${s.runnerId}`;
    await t.step("a runner lists the extension and its sessions get its tool", async () => {
      // The stack's runner started before the extension existed: a refresh rescans.
      const path = await writeExtension(s.home);
      const listed = await ok<PluginsResponse & { ok: true }>(
        s.user.web(`${base}/plugins/refresh`, { method: "POST" }),
        "refresh",
      );
      assert.deepEqual(listed, {
        ok: true,
        plugins: [{ name: "marker", path, scope: "user", source: "auto" }],
        skipped: false,
      });
      const { tools } = await firstRequest(s, "hello");
      assert.ok(tools.includes("baton_marker_tool"), `tools: ${tools}`);
    });

    for (const how of [{ args: ["--no-plugins"] }, { env: { BATON_NO_PLUGINS: "1" } }]) {
      await t.step(`with ${how.args?.[0] ?? "BATON_NO_PLUGINS=1"} the tool is absent`, async () => {
        await s.llm.writeModelsJson(home);
        const before = await runnerIds(s.user);
        const runner = await startRunner({
          relayUrl: s.relay.url,
          apiKey: s.user.apiKey,
          home,
          ...how,
        });
        try {
          const id = (await runnerIds(s.user)).find((r) => !before.includes(r)) ??
            before.find((r) => r !== s.runnerId)!;
          const list = await ok<PluginsResponse>(s.user.api(`/api/runners/${id}/plugins`), "list");
          assert.deepEqual(list.plugins.map((p) => p.path), [extension]);
          assert.equal(list.skipped, true);
          const { tools } = await firstRequest({ ...s, runnerId: id }, "hello again");
          assert.equal(tools.includes("baton_marker_tool"), false, `tools: ${tools}`);
          assert.ok(tools.length > 0, "the built-in tools are still there");
        } finally {
          await runner.stop();
        }
      });
    }
  });
  await Deno.remove(home, { recursive: true }).catch(() => {});
});

async function runnerIds(user: User): Promise<string[]> {
  const list: RunnerListResponse = await (await user.api("/api/runners")).json();
  return list.map((r) => r.id);
}

Deno.test("another user's runner answers as an unknown one, a read-only key cannot write, an offline runner 503", async () => {
  await using relay = await startTestRelay({ allowSignup: true });
  const alice = await signUp(relay.url, { name: "Alice" });
  const mallory = await signUp(relay.url, { name: "Mallory" });
  const runner = await startRunner({ relayUrl: relay.url, apiKey: alice.apiKey });
  let passed = false;
  try {
    const [runnerId] = await runnerIds(alice);
    const base = `/api/runners/${runnerId}`;
    const paths = [
      ["GET", `${base}/skills`],
      ["GET", `${base}/agents/x`],
      ["POST", `${base}/skills`],
      ["PUT", `${base}/skills/x`],
      ["DELETE", `${base}/agents/x`],
      ["POST", `${base}/agents/refresh`],
      ["GET", `${base}/plugins`],
      ["POST", `${base}/plugins/refresh`],
    ] as const;
    for (const [method, path] of paths) {
      const init = method === "GET" || method === "DELETE"
        ? { method }
        : json(method, { name: "x", content: "x" });
      const foreign = await mallory.web(path, init);
      const unknown = await mallory.web(path.replace(runnerId!, crypto.randomUUID()), init);
      assert.equal(await errorCode(foreign, 404, `${method} ${path}`), "not_found");
      assert.equal(await errorCode(unknown, 404, `${method} unknown`), "not_found");
    }
    // Even a bad name answers 404 on someone else's runner: nothing about it is looked at.
    const badName = await mallory.api(`${base}/skills/a%5Cb`);
    assert.equal(await errorCode(badName, 404, "bad name, foreign"), "not_found");

    const keyRes = await alice.api("/api/keys", json("POST", { name: "ro", scope: "read" }));
    const ro: CreateKeyResponse = await keyRes.json();
    const roApi = (path: string, init: RequestInit = {}) =>
      fetch(`${relay.url}${path}`, { ...init, headers: { ...init.headers, "x-api-key": ro.key } });
    assert.equal((await roApi(`${base}/skills`)).status, 200);
    const write = await roApi(`${base}/skills`, json("POST", { name: "x", content: "x" }));
    assert.equal(await errorCode(write, 403, "read-only create"), "forbidden_scope");
    const put = await roApi(`${base}/skills/x`, json("PUT", { content: "x" }));
    assert.equal(await errorCode(put, 403, "read-only update"), "forbidden_scope");
    const del = await roApi(`${base}/skills/x`, { method: "DELETE" });
    assert.equal(await errorCode(del, 403, "read-only delete"), "forbidden_scope");
    assert.deepEqual(await filesUnder(join(runner.home, ".baton", "skills")), []);

    await runner.stop();
    const offline = await alice.api(`${base}/skills`);
    assert.equal(await errorCode(offline, 503, "offline"), "runner_offline");
    passed = true;
  } finally {
    if (!passed) console.error(runner.proc.output());
    await runner.stop();
    await Deno.remove(runner.home, { recursive: true }).catch(() => {});
  }
});

Deno.test("baton up --no-plugins keeps the local runner's sessions free of plugins", async () => {
  const home = await tempDir("baton-up-plugins-");
  const llm = MockLlm.start();
  await llm.writeModelsJson(home);
  const extension = await writeExtension(home);
  const password = "owner password 1";
  const proc = BatonProcess.start("up", {
    args: ["up", "--port", "0", "--no-plugins"],
    env: baseEnv(home, { BATON_OWNER_PASSWORD: password }),
  });
  let passed = false;
  try {
    const [, url] = await proc.waitFor(/listening on (http:\/\/\S+)/);
    await proc.waitFor(/connected to relay as runner/);
    const cookie = await signIn(url!, "owner@baton.local", password);
    const web = (path: string, init: RequestInit = {}) =>
      fetch(`${url}${path}`, { ...init, headers: { ...init.headers, cookie } });
    const [runner]: RunnerListResponse = await (await web("/api/runners")).json();
    const list = await ok<PluginsResponse>(web(`/api/runners/${runner!.id}/plugins`), "plugins");
    assert.deepEqual(list.plugins.map((p) => p.path), [extension]);
    assert.equal(list.skipped, true);
    llm.enqueue({ text: "ok" });
    const spawn = await web(
      "/api/runners/spawn",
      json("POST", { runnerId: runner!.id, prompt: "hello", model: MODEL }),
    );
    assert.equal(spawn.status, 200, await spawn.text());
    await llm.waitForRequests(1);
    const tools = (llm.requests[0]!.tools ?? []).map((t) => t.function.name);
    assert.equal(tools.includes("baton_marker_tool"), false, `tools: ${tools}`);
    assert.ok(tools.length > 0);
    passed = true;
  } finally {
    if (!passed) console.error(proc.output());
    await proc.stop();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
});
