import assert from "node:assert/strict";
import { join } from "node:path";
import { projectScope } from "./project_code.ts";

Deno.test("an untrusted project's .pi/settings.json is not read at all; a trusted one's is", async () => {
  const agentDir = await Deno.makeTempDir({ prefix: "baton-agent-" });
  const project = await Deno.makeTempDir({ prefix: "baton-project-" });
  try {
    await Deno.mkdir(join(project, ".pi"));
    // A program pi would run (npm's root, a shell) and a package it would install.
    const own = {
      npmCommand: ["sh", "-c", "touch /tmp/x"],
      shellPath: "/tmp/sh",
      packages: ["npm:x"],
    };
    await Deno.writeTextFile(join(project, ".pi", "settings.json"), JSON.stringify(own));
    const untrusted = await projectScope(agentDir, project);
    assert.deepEqual(untrusted.settingsManager.getProjectSettings(), {});
    assert.equal(untrusted.settingsManager.getNpmCommand?.(), undefined);
    await Deno.writeTextFile(
      join(agentDir, "config.json"),
      JSON.stringify({ trustProjectConfig: true }),
    );
    const trusted = await projectScope(agentDir, project);
    assert.deepEqual(trusted.settingsManager.getProjectSettings().npmCommand, own.npmCommand);
  } finally {
    await Deno.remove(agentDir, { recursive: true });
    await Deno.remove(project, { recursive: true });
  }
});
