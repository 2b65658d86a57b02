import assert from "node:assert/strict";
import {
  ConfigError,
  DEFAULT_SLEEP_AFTER_MS,
  DEFAULT_START_TIMEOUT_MS,
  loadRunnerConfig,
  MAX_CONFIG_BYTES,
  parseDuration,
  readUserConfig,
} from "./config.ts";
import { join } from "node:path";

/** Makes the environment a config is read from: HOME and `vars`. */
type Env = (vars: Record<string, string>) => (k: string) => string | undefined;

/** Runs `fn` with a fresh HOME (removed after) and an {@linkcode Env} of it. */
async function withHome(fn: (home: string, env: Env) => Promise<void>): Promise<void> {
  const home = await Deno.makeTempDir();
  try {
    await fn(home, (vars) => (k) => ({ HOME: home, ...vars })[k]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

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
  await withHome(async (home, env) => {
    assert.equal((await loadRunnerConfig(env({}))).sleepAfterMs, DEFAULT_SLEEP_AFTER_MS);
    await Deno.mkdir(`${home}/.baton`);
    await Deno.writeTextFile(`${home}/.baton/config.json`, JSON.stringify({ sleepAfter: "2m" }));
    assert.equal((await loadRunnerConfig(env({}))).sleepAfterMs, 120_000);
    assert.equal((await loadRunnerConfig(env({ BATON_SLEEP_AFTER: "off" }))).sleepAfterMs, 0);
    await Deno.writeTextFile(`${home}/.baton/config.json`, JSON.stringify({ sleepAfter: true }));
    assert.equal((await loadRunnerConfig(env({}))).sleepAfterMs, DEFAULT_SLEEP_AFTER_MS);
  });
});

Deno.test("startTimeout: BATON_START_TIMEOUT over config.json over 2 minutes; a bad one is a config error", async () => {
  await withHome(async (home, env) => {
    assert.equal((await loadRunnerConfig(env({}))).startTimeoutMs, DEFAULT_START_TIMEOUT_MS);
    assert.equal(DEFAULT_START_TIMEOUT_MS, 120_000);
    await Deno.mkdir(`${home}/.baton`);
    await Deno.writeTextFile(`${home}/.baton/config.json`, JSON.stringify({ startTimeout: "5m" }));
    assert.equal((await loadRunnerConfig(env({}))).startTimeoutMs, 300_000);
    assert.equal((await loadRunnerConfig(env({ BATON_START_TIMEOUT: "off" }))).startTimeoutMs, 0);
    await Deno.writeTextFile(
      `${home}/.baton/config.json`,
      JSON.stringify({ startTimeout: "soon" }),
    );
    await assert.rejects(loadRunnerConfig(env({})), ConfigError, "startTimeout in config.json");
  });
});

Deno.test("--safe-mode and BATON_SAFE_MODE skip the runner's services too, --no-plugins does not", async () => {
  await withHome(async (_home, env) => {
    assert.equal((await loadRunnerConfig(env({}))).skip.services, false);
    assert.equal((await loadRunnerConfig(env({}), { noPlugins: true })).skip.services, false);
    assert.equal((await loadRunnerConfig(env({}), { safeMode: true })).skip.services, true);
    assert.equal((await loadRunnerConfig(env({ BATON_SAFE_MODE: "1" }))).skip.services, true);
  });
});

Deno.test("relay nodes come from --relay, BATON_RELAY_URL (commas) or config relayUrls/relayUrl, in that order", async () => {
  await withHome(async (home, env) => {
    const urls = async (vars: Record<string, string>, relay?: string) =>
      (await loadRunnerConfig(env(vars), relay === undefined ? {} : { relay })).relayUrls;
    assert.deepEqual(await urls({}), []);
    await Deno.mkdir(`${home}/.baton`);
    const config = (v: unknown) =>
      Deno.writeTextFile(`${home}/.baton/config.json`, JSON.stringify(v));
    await config({ relayUrl: "https://a.example/" });
    assert.deepEqual(await urls({}), ["https://a.example"]);
    await config({
      relayUrl: "https://a.example",
      relayUrls: ["wss://b.example/_runner", "http://c:7420"],
    });
    assert.deepEqual(await urls({}), ["https://b.example", "http://c:7420"]);
    assert.deepEqual(
      await urls({ BATON_RELAY_URL: " http://x:1 , ws://y:2/ ,,http://x:1" }),
      ["http://x:1", "http://y:2"],
      "trimmed, normalized, empty entries and duplicates dropped",
    );
    assert.deepEqual(await urls({ BATON_RELAY_URL: "http://x:1" }, "http://p:1,http://q:2"), [
      "http://p:1",
      "http://q:2",
    ]);
    const cfg = await loadRunnerConfig(env({}), { relay: "http://p:1,http://q:2" });
    assert.equal(cfg.relayUrl, "http://p:1", "relayUrl is the first node");
    assert.equal((await loadRunnerConfig(env({ BATON_RELAY_URL: "off" }))).skip.relay, true);
  });
});

Deno.test("a bad relay URL anywhere in the list is a one-line configuration error", async () => {
  await withHome(async (home, env) => {
    const bad = async (vars: Record<string, string>, relay: string | undefined, re: RegExp) =>
      await assert.rejects(
        loadRunnerConfig(env(vars), relay === undefined ? {} : { relay }),
        (err: Error) =>
          err instanceof ConfigError && re.test(err.message) && !err.message.includes("\n"),
      );
    await bad({}, "http://ok:1,ftp://no", /Invalid relay URL: 'ftp:\/\/no'.* in --relay/);
    await bad({}, " , ", /Invalid --relay: no relay URL/);
    await bad({ BATON_RELAY_URL: "http://ok:1,not a url" }, undefined, /in BATON_RELAY_URL/);
    await Deno.mkdir(`${home}/.baton`);
    await Deno.writeTextFile(
      `${home}/.baton/config.json`,
      JSON.stringify({ relayUrls: "http://a" }),
    );
    await bad({}, undefined, /relayUrls in config.json: expected an array/);
    await Deno.writeTextFile(
      `${home}/.baton/config.json`,
      JSON.stringify({ relayUrls: ["http://a", 7] }),
    );
    await bad({}, undefined, /relayUrls in config.json: expected relay URLs as strings/);
  });
});

Deno.test("an empty BATON_RELAY_URL still hides the config file's relay", async () => {
  await withHome(async (home, env) => {
    await Deno.mkdir(`${home}/.baton`);
    await Deno.writeTextFile(
      `${home}/.baton/config.json`,
      JSON.stringify({ relayUrls: ["http://a:1"] }),
    );
    const cfg = await loadRunnerConfig(env({ BATON_RELAY_URL: "" }));
    assert.deepEqual(cfg.relayUrls, []);
    assert.equal(cfg.relayUrl, null);
  });
});

Deno.test({
  name:
    "a config.json that is a link to a device, a pipe or too big is a config error, read no further",
  ignore: Deno.build.os === "windows",
  async fn() {
    // A project's .baton/config.json is the agent's to write; the daemon reads it.
    await withHome(async (home) => {
      const dir = join(home, ".baton");
      await Deno.mkdir(dir);
      const file = join(dir, "config.json");
      await Deno.symlink("/dev/zero", file);
      await assert.rejects(readUserConfig(dir), {
        name: "ConfigError",
        message: /not a regular file/,
      });
      await Deno.remove(file);
      assert.ok((await new Deno.Command("mkfifo", { args: [file] }).output()).success);
      await assert.rejects(readUserConfig(dir), {
        name: "ConfigError",
        message: /not a regular file/,
      });
      await Deno.remove(file);
      await Deno.writeTextFile(file, JSON.stringify({ pad: "x".repeat(MAX_CONFIG_BYTES) }));
      await assert.rejects(readUserConfig(dir), { name: "ConfigError", message: /over 1024 KiB/ });
      await Deno.writeTextFile(file, JSON.stringify({ sleepAfter: "5m" }));
      assert.deepEqual(await readUserConfig(dir), { sleepAfter: "5m" });
    });
  },
});
