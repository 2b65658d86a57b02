import assert from "node:assert/strict";
import { ConfigError, DEFAULT_SLEEP_AFTER_MS, loadRunnerConfig, parseDuration } from "./config.ts";

Deno.test("sleepAfter takes durations with a unit, bare seconds and off", () => {
  assert.equal(parseDuration("10m", "x"), 600_000);
  assert.equal(parseDuration(" 90s ", "x"), 90_000);
  assert.equal(parseDuration("500ms", "x"), 500);
  assert.equal(parseDuration("1.5h", "x"), 5_400_000);
  assert.equal(parseDuration("45", "x"), 45_000);
  assert.equal(parseDuration(30, "x"), 30_000);
  assert.equal(parseDuration("off", "x"), 0);
  assert.equal(parseDuration("0", "x"), 0);
  for (const bad of ["", "soon", "-5m", "10 minutes", "1e3", "31d", "99999h"]) {
    assert.throws(() => parseDuration(bad, "sleepAfter"), ConfigError, bad);
  }
});

Deno.test("BATON_SLEEP_AFTER wins over config.json, and the default is 10 minutes", async () => {
  const home = await Deno.makeTempDir();
  try {
    const env = (vars: Record<string, string>) => (k: string) => ({ HOME: home, ...vars })[k];
    assert.equal((await loadRunnerConfig(env({}))).sleepAfterMs, DEFAULT_SLEEP_AFTER_MS);
    await Deno.mkdir(`${home}/.baton`);
    await Deno.writeTextFile(`${home}/.baton/config.json`, JSON.stringify({ sleepAfter: "2m" }));
    assert.equal((await loadRunnerConfig(env({}))).sleepAfterMs, 120_000);
    assert.equal((await loadRunnerConfig(env({ BATON_SLEEP_AFTER: "off" }))).sleepAfterMs, 0);
    await Deno.writeTextFile(`${home}/.baton/config.json`, JSON.stringify({ sleepAfter: true }));
    assert.equal((await loadRunnerConfig(env({}))).sleepAfterMs, DEFAULT_SLEEP_AFTER_MS);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("--safe-mode and BATON_SAFE_MODE skip the runner's services too, --no-plugins does not", async () => {
  const home = await Deno.makeTempDir();
  try {
    const env = (vars: Record<string, string>) => (k: string) => ({ HOME: home, ...vars })[k];
    assert.equal((await loadRunnerConfig(env({}))).skip.services, false);
    assert.equal((await loadRunnerConfig(env({}), { noPlugins: true })).skip.services, false);
    assert.equal((await loadRunnerConfig(env({}), { safeMode: true })).skip.services, true);
    assert.equal((await loadRunnerConfig(env({ BATON_SAFE_MODE: "1" }))).skip.services, true);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
