import assert from "node:assert/strict";
import { join } from "node:path";
import { protectedFile } from "./git_protected.ts";
import { discard, repoTop } from "./git.ts";

async function sh(dir: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("git", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

Deno.test("a discard may not write what the agent's sandbox protects", async () => {
  const home = await Deno.makeTempDir({ prefix: "baton-protected-" });
  try {
    const env = (extra: Record<string, string> = {}) => (k: string) =>
      ({ HOME: home, ...extra } as Record<string, string | undefined>)[k];
    const top = join(home, "project");
    await Deno.mkdir(top);
    const refused = async (path: string, extra?: Record<string, string>) =>
      (await protectedFile(top, [path], env(extra)))?.why ?? null;
    assert.match((await refused(".vscode/tasks.json"))!, /inside '\.vscode'/);
    assert.match((await refused("sub/.IDEA/workspace.xml"))!, /inside '\.idea'/);
    assert.match((await refused(".bashrc"))!, /a file the sandbox protects/);
    assert.match((await refused("pkg/.mcp.json"))!, /a file the sandbox protects/);
    assert.match((await refused(".env"))!, /writing .*\.env' is denied/);
    assert.match((await refused(".pi/extensions/x.ts"))!, /\.pi' is denied/);
    assert.equal(await refused("src/app.ts"), null);
    assert.equal(await refused("docs/vscode.md"), null);
    // The person's own denyWrite counts too; mode none lifts all of it.
    await Deno.mkdir(join(home, ".baton"));
    await Deno.writeTextFile(
      join(home, ".baton", "config.json"),
      JSON.stringify({ sandbox: { filesystem: { denyWrite: ["./deploy"] } } }),
    );
    assert.match((await refused("deploy/prod.sh"))!, /deploy' is denied/);
    assert.equal(await refused(".vscode/tasks.json", { BATON_SANDBOX: "none" }), null);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a discard refuses to write a protected file the agent staged, and writes the rest", async () => {
  const dir = await Deno.makeTempDir({ prefix: "baton-protected-repo-" });
  try {
    await sh(dir, "init", "-q", "-b", "main");
    await sh(dir, "config", "user.email", "ada@example.com");
    await sh(dir, "config", "user.name", "Ada");
    await Deno.writeTextFile(join(dir, "a.txt"), "one\n");
    await sh(dir, "add", "a.txt");
    await sh(dir, "commit", "-q", "-m", "first");
    // Staged by the agent from inside its sandbox, which kept it from writing the file itself.
    await Deno.mkdir(join(dir, ".vscode"));
    await Deno.writeTextFile(join(dir, ".vscode", "tasks.json"), '{"runOn": "folderOpen"}\n');
    await sh(dir, "add", ".vscode/tasks.json");
    await Deno.remove(join(dir, ".vscode", "tasks.json"));
    await Deno.writeTextFile(join(dir, "a.txt"), "changed\n");
    const top = await repoTop(dir);
    await assert.rejects(
      discard(top, { paths: [".vscode/tasks.json"], confirm: true }),
      /protected_path|sandbox keeps it from being written/,
    );
    await assert.rejects(Deno.stat(join(dir, ".vscode", "tasks.json")), Deno.errors.NotFound);
    // A whole folder holding one is refused too; other files discard as before.
    await assert.rejects(discard(top, { paths: [".vscode"], confirm: true }));
    await discard(top, { paths: ["a.txt"], confirm: true });
    assert.equal(await Deno.readTextFile(join(dir, "a.txt")), "one\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
