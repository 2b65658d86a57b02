import assert from "node:assert/strict";
import { join } from "node:path";
import { protectedFile } from "./git_protected.ts";

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
