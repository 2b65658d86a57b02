import assert from "node:assert/strict";
import { join } from "node:path";
import { folderPolicy, folderSandboxConfig, policySourceFrom, STRICT } from "./folder_policy.ts";

async function withHome(fn: (home: string, project: string) => Promise<void>): Promise<void> {
  const home = await Deno.makeTempDir({ prefix: "baton-policy-" });
  try {
    const project = join(home, "project");
    await Deno.mkdir(join(home, ".baton"), { recursive: true });
    await Deno.mkdir(join(project, ".baton"), { recursive: true });
    await fn(home, project);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

const write = (dir: string, sandbox: unknown) =>
  Deno.writeTextFile(join(dir, ".baton", "config.json"), JSON.stringify({ sandbox }));

Deno.test("a folder's policy: the project tightens the global config, the overrides win", async () => {
  await withHome(async (home, project) => {
    await write(home, { mode: "basic", filesystem: { denyRead: ["~/secret"] } });
    await write(project, { mode: "full", filesystem: { denyRead: ["./private"] } });
    const src = policySourceFrom((k) => ({ BATON_SANDBOX_PROTECT: "/srv/relay" })[k], home);
    const policy = await folderPolicy(src, project, STRICT);
    assert.equal(policy.mode, "full");
    for (const p of [join(home, "secret"), join(project, "private"), "/srv/relay"]) {
      assert.ok(policy.paths.denyRead.includes(p), p);
    }
    // A project cannot loosen: its "none" does not lower the global basic.
    await write(project, { mode: "none" });
    assert.equal((await folderSandboxConfig(src, project, STRICT)).mode, "basic");
    const none = policySourceFrom((k) => ({ BATON_NO_SANDBOX: "1" })[k], home);
    assert.equal((await folderSandboxConfig(none, project, STRICT)).mode, "none");
    const full = policySourceFrom((k) => ({ BATON_SANDBOX: "full" })[k], home);
    assert.equal((await folderSandboxConfig(full, undefined, STRICT)).mode, "full");
  });
});

Deno.test("an invalid config: a session refuses, status leaves the project's out, git keeps a policy", async () => {
  await withHome(async (home, project) => {
    const src = policySourceFrom(() => undefined, home);
    await write(home, { mode: "full" });
    await write(project, { mode: "sideways" });
    await assert.rejects(folderSandboxConfig(src, project, STRICT), /sideways|mode/);
    const status = await folderSandboxConfig(src, project, { global: "throw", project: "skip" });
    assert.equal(status.mode, "full");
    // A broken global file: the git service runs under the default policy, not none.
    await write(home, { mode: 42 });
    await assert.rejects(folderSandboxConfig(src, undefined, STRICT));
    const git = await folderSandboxConfig(src, project, { global: "default", project: "skip" });
    assert.equal(git.mode, "basic");
  });
});
