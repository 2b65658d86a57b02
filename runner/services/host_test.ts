import assert from "node:assert/strict";
import { join } from "node:path";
import { ServiceHost } from "./host.ts";

Deno.test("safe mode starts no service, ~/.baton/services included; without it they are found", async () => {
  const home = await Deno.makeTempDir({ prefix: "baton-safe-" });
  try {
    const batonDir = join(home, ".baton");
    // A folder without a manifest: found (and listed as failed) without starting anything.
    await Deno.mkdir(join(batonDir, "services", "notes"), { recursive: true });
    const host = (skipServices: boolean, log: string[]) =>
      new ServiceHost({
        batonDir,
        home,
        runnerId: "r1",
        relayUrl: null,
        apiKey: null,
        skipPlugins: skipServices,
        skipServices,
        log: (l) => log.push(l),
      });
    const normal: string[] = [];
    const found = host(false, normal);
    await found.start();
    assert.deepEqual(found.list().map((s) => s.source), ["home"]);
    await found.stop();

    const logs: string[] = [];
    const safe = host(true, logs);
    await safe.start();
    assert.deepEqual(safe.list(), []);
    assert.deepEqual(logs, ["services: skipped (safe mode)"]);
    await safe.stop();
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
