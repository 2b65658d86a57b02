/**
 * `baton doctor` against a real relay with a connected runner (every relay
 * check passes), against broken settings (an unreachable relay, a refused
 * key, a missing root, a config file that is not JSON), and its clock check.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { clockCheck, formatCheck } from "../cli/doctor.ts";
import { signUp } from "./harness/client.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { MockLlm } from "./harness/mock_llm.ts";
import { baseEnv, baton, startRunner, tempDir } from "./harness/procs.ts";

function lineOf(stdout: string, name: string): string {
  const line = stdout.split("\n").find((l) => l.slice(5).startsWith(`${name}:`));
  assert.ok(line, `no '${name}' line in:\n${stdout}`);
  return line;
}

Deno.test("baton doctor finds the relay, the key, this runner and its models in order", async () => {
  await using relay = await startTestRelay();
  const llm = MockLlm.start();
  const home = await tempDir("baton-doctor-");
  const user = await signUp(relay.url);
  await llm.writeModelsJson(home);
  await Deno.writeTextFile(
    join(home, ".baton", "config.json"),
    JSON.stringify({ relayUrl: relay.url, apiKey: user.apiKey }),
  );
  const runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home });
  try {
    const r = await baton(["doctor"], baseEnv(home));
    const lines = r.stdout.trim().split("\n");
    for (const l of lines) assert.match(l, /^(ok {2}|warn|fail) [a-z]+: /, l);
    assert.match(
      lineOf(r.stdout, "version"),
      /^ok {3}version: baton \d+\.\d+\.\d+ \(Deno 2\.9\.\d+, .*, source\)$/,
    );
    assert.match(
      lineOf(r.stdout, "relay"),
      new RegExp(`^ok {3}relay: ${relay.url} answers \\(\\d+ ms\\)$`),
    );
    assert.match(lineOf(r.stdout, "clock"), /^ok {3}clock: within \d+ s of the relay's$/);
    assert.equal(lineOf(r.stdout, "key"), "ok   key: accepted");
    assert.match(lineOf(r.stdout, "runner"), /^ok {3}runner: registered as '.+' \(connected\)$/);
    assert.match(lineOf(r.stdout, "models"), /^ok {3}models: 1 from mock /);
    assert.match(lineOf(r.stdout, "disk"), /^(ok {2}|warn) disk: [\d.]+ GB free at /);
    const failed = lines.filter((l) => l.startsWith("fail"));
    assert.equal(r.code, failed.length ? 1 : 0, r.stdout);
  } finally {
    await runner.stop();
    await llm.close();
  }
});

Deno.test("baton doctor names what is broken, one line each with a fix, and exits 1", async (t) => {
  await using relay = await startTestRelay();
  await t.step("a refused key and a missing root", async () => {
    const home = await tempDir("baton-doctor-");
    await Deno.mkdir(join(home, ".baton"));
    await Deno.writeTextFile(
      join(home, ".baton", "config.json"),
      JSON.stringify({ relayUrl: relay.url, apiKey: "bk_not-a-real-key-000000000000" }),
    );
    const r = await baton(["doctor"], baseEnv(home, { BATON_WORKSPACE_ROOTS: join(home, "gone") }));
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(
      lineOf(r.stdout, "key"),
      /^fail key: the relay refuses the API key .*\(fix: create a key/,
    );
    assert.match(
      lineOf(r.stdout, "root"),
      /^fail root: .*gone is not a folder here \(fix: create it, or correct BATON_WORKSPACE_ROOTS\)$/,
    );
    assert.match(lineOf(r.stdout, "models"), /^fail models: none: .*\(fix: set a provider's key/);
  });
  await t.step("an unreachable relay", async () => {
    const home = await tempDir("baton-doctor-");
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = closed.addr.port;
    closed.close();
    const r = await baton(
      ["doctor"],
      baseEnv(home, { BATON_RELAY_URL: `http://127.0.0.1:${port}`, BATON_API_KEY: "x" }),
    );
    assert.equal(r.code, 1);
    assert.match(
      lineOf(r.stdout, "relay"),
      /^fail relay: cannot reach http:\/\/127\.0\.0\.1:\d+: .*\(fix: check the address/,
    );
    assert.doesNotMatch(r.stdout, /^\w+ +key:/m, "no key check without a relay");
  });
  await t.step(
    "several relay nodes: each is checked, the key on the first that answers",
    async () => {
      const home = await tempDir("baton-doctor-");
      const user = await signUp(relay.url);
      const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const down = `http://127.0.0.1:${closed.addr.port}`;
      closed.close();
      const r = await baton(
        ["doctor"],
        baseEnv(home, { BATON_RELAY_URL: `${down},${relay.url}`, BATON_API_KEY: user.apiKey }),
      );
      assert.equal(r.code, 1, r.stdout + r.stderr);
      const relays = r.stdout.split("\n").filter((l) => l.slice(5).startsWith("relay:"));
      assert.equal(relays.length, 2, r.stdout);
      assert.match(relays[0]!, /^fail relay: cannot reach http:\/\/127\.0\.0\.1:\d+: /);
      assert.match(relays[1]!, new RegExp(`^ok {3}relay: ${relay.url} answers`));
      assert.equal(lineOf(r.stdout, "key"), "ok   key: accepted");
      assert.equal(r.stdout.split("\n").filter((l) => l.slice(5).startsWith("key:")).length, 1);
    },
  );
  await t.step("a config file that is not JSON: one line, the other checks still run", async () => {
    const home = await tempDir("baton-doctor-");
    await Deno.mkdir(join(home, ".baton"));
    await Deno.writeTextFile(join(home, ".baton", "config.json"), '{"apiKey": "secret-ish",');
    const r = await baton(["doctor"], baseEnv(home));
    assert.equal(r.code, 1);
    assert.match(
      lineOf(r.stdout, "config"),
      /^fail config: Invalid config file: .* \(not valid JSON\) \(fix: /,
    );
    assert.doesNotMatch(r.stdout + r.stderr, /secret-ish/);
    lineOf(r.stdout, "git");
    assert.equal(r.stderr.trim(), "");
  });
});

Deno.test("the clock check compares with the relay's Date header, allowing its whole-second rounding", () => {
  const at = Date.parse("2026-01-01T12:00:00Z");
  const date = new Date(at).toUTCString();
  assert.equal(clockCheck(date, at + 400, at + 600).status, "ok");
  const ahead = clockCheck(date, at + 90_000, at + 90_100);
  assert.equal(ahead.status, "warn");
  assert.match(
    formatCheck(ahead),
    /^warn clock: 89 s ahead of the relay's \(fix: turn on time sync/,
  );
  const behind = clockCheck(date, at - 600_000, at - 599_900);
  assert.equal(behind.status, "fail");
  assert.match(
    behind.detail,
    /600 s behind the relay's: signed webhooks older than 5 minutes are refused/,
  );
  assert.equal(clockCheck(null, at, at).status, "warn");
});
