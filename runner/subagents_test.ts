import assert from "node:assert/strict";
import { join } from "node:path";
import { findAgentDefinition, listAgentDefinitions, pickModel } from "./subagents.ts";

async function write(path: string, text: string) {
  await Deno.mkdir(join(path, ".."), { recursive: true });
  await Deno.writeTextFile(path, text);
}

Deno.test("agent definitions: the user's win over a project's, names are checked, fields parsed", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const agentDir = join(dir, "home", ".baton");
    const project = join(dir, "repo");
    const cwd = join(project, "src", "deep");
    await Deno.mkdir(cwd, { recursive: true });
    await write(
      join(agentDir, "agents", "reviewer.md"),
      "---\nname: reviewer\ndescription: The user's reviewer\ntools: read, grep\nmodel: mock/mock-1\n---\n\nUSER PROMPT\n",
    );
    await write(
      join(project, ".pi", "agents", "reviewer.md"),
      "---\ndescription: A repository's reviewer\n---\nPROJECT PROMPT\n",
    );
    await write(
      join(project, ".pi", "agents", "scout.md"),
      "---\ndescription: Finds things\n---\nSCOUT PROMPT\n",
    );
    const folders = { cwd, agentDir };

    const reviewer = await findAgentDefinition("reviewer", folders);
    assert.equal(reviewer?.systemPrompt, "USER PROMPT");
    assert.deepEqual(reviewer?.tools, ["read", "grep"]);
    assert.equal(reviewer?.model, "mock/mock-1");
    const scout = await findAgentDefinition("scout", folders);
    assert.equal(scout?.systemPrompt, "SCOUT PROMPT", "the nearest .pi/agents above the folder");
    assert.equal(scout?.tools, undefined);
    for (const bad of ["../reviewer", "..", "", ".hidden", "a/b", "nobody"]) {
      assert.equal(await findAgentDefinition(bad, folders), null, bad);
    }
    assert.deepEqual(await listAgentDefinitions(folders), [
      { name: "reviewer", description: "The user's reviewer" },
      { name: "scout", description: "Finds things" },
    ]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pickModel takes provider/id or a bare id among the runner's models", () => {
  const models = [{ provider: "a", id: "m1" }, { provider: "b", id: "m2" }];
  assert.equal(pickModel("b/m2", models), models[1]);
  assert.equal(pickModel("m1", models), models[0]);
  assert.equal(pickModel("c/m3", models), undefined);
  assert.equal(pickModel(undefined, models), undefined);
});
