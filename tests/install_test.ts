/**
 * install.sh against a local HTTP server serving a fake release folder: the
 * file for this machine is downloaded, checked against SHA256SUMS and put in
 * the install folder; a file whose sum does not match, or that the sums do
 * not list, is refused and nothing is installed.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { ROOT, tempDir } from "./harness/procs.ts";

const ARCH = Deno.build.arch === "aarch64" ? "aarch64" : "x86_64";
const OS = Deno.build.os === "darwin" ? "apple-darwin" : "unknown-linux-gnu";
const RUNNER = `baton-runner-${ARCH}-${OS}`;
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** Serves `files` by name; counts the requests. */
function release(files: Record<string, string>) {
  const asked: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const name = new URL(req.url).pathname.slice(1);
    asked.push(name);
    const body = files[name];
    return body === undefined ? new Response("not found", { status: 404 }) : new Response(body);
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, asked, server };
}

async function install(url: string, dir: string, args: string[] = []) {
  const home = await tempDir("baton-install-home-");
  const out = await new Deno.Command("sh", {
    args: [join(ROOT, "install.sh"), "--dir", dir, ...args],
    env: { HOME: home, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", BATON_DOWNLOAD_URL: url },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

const FAKE = "#!/bin/sh\necho 'baton 9.9.9'\n";

Deno.test({
  name:
    "install.sh installs the runner for this machine after checking its sum, and refuses a bad one",
  ignore: Deno.build.os === "windows",
  fn: async (t) => {
    await t.step("a matching sum: installed, executable, on the named folder", async () => {
      const r = release({
        [RUNNER]: FAKE,
        "SHA256SUMS": `${sha("other")}  baton-relay-${ARCH}-${OS}\n${sha(FAKE)}  ${RUNNER}\n`,
      });
      try {
        const dir = join(await tempDir(), "bin");
        const res = await install(r.url, dir);
        assert.equal(res.code, 0, res.stderr);
        assert.match(
          res.stdout,
          new RegExp(`Installed ${dir}/baton-runner \\(sha256 ${sha(FAKE)}\\)`),
        );
        assert.match(res.stdout, /is not on your PATH/);
        const run = await new Deno.Command(join(dir, "baton-runner")).output();
        assert.equal(new TextDecoder().decode(run.stdout).trim(), "baton 9.9.9");
        assert.deepEqual(r.asked.sort(), ["SHA256SUMS", RUNNER].sort());
      } finally {
        await r.server.shutdown();
      }
    });

    await t.step("a file that does not match its sum is refused, nothing installed", async () => {
      const r = release({
        [RUNNER]: FAKE + "tampered\n",
        "SHA256SUMS": `${sha(FAKE)}  ${RUNNER}\n`,
      });
      try {
        const dir = join(await tempDir(), "bin");
        const res = await install(r.url, dir);
        assert.equal(res.code, 1);
        assert.match(
          res.stderr,
          /^install\.sh: checksum mismatch for baton-runner-.*: nothing installed$/m,
        );
        assert.equal(
          await Deno.stat(join(dir, "baton-runner")).then(() => true, () => false),
          false,
        );
      } finally {
        await r.server.shutdown();
      }
    });

    await t.step("a file the sums do not list is refused", async () => {
      const r = release({ [RUNNER]: FAKE, "SHA256SUMS": `${sha(FAKE)}  something-else\n` });
      try {
        const dir = join(await tempDir(), "bin");
        const res = await install(r.url, dir);
        assert.equal(res.code, 1);
        assert.match(res.stderr, /is not listed in SHA256SUMS: nothing installed/);
        assert.equal(await Deno.stat(dir).then(() => true, () => false), false);
      } finally {
        await r.server.shutdown();
      }
    });

    await t.step("--role relay fetches the relay; a missing file is one line", async () => {
      const relay = `baton-relay-${ARCH}-${OS}`;
      const r = release({ [relay]: FAKE, "SHA256SUMS": `${sha(FAKE)}  ${relay}\n` });
      try {
        const dir = join(await tempDir(), "bin");
        const ok = await install(r.url, dir, ["--role", "relay"]);
        assert.equal(ok.code, 0, ok.stderr);
        assert.ok((await Deno.stat(join(dir, "baton-relay"))).isFile);
        const missing = await install(r.url, dir, ["--role", "all"]);
        assert.equal(missing.code, 1);
        assert.match(
          missing.stderr.trim(),
          /^install\.sh: could not download http:\/\/127\.0\.0\.1:\d+\/baton-/,
        );
        const bad = await install(r.url, dir, ["--role", "nope"]);
        assert.equal(bad.code, 1);
        assert.equal(bad.stderr.trim(), "install.sh: unknown role: 'nope' (runner, relay or all)");
      } finally {
        await r.server.shutdown();
      }
    });

    await t.step("without a release location it says what to set", async () => {
      const res = await new Deno.Command("sh", {
        args: [join(ROOT, "install.sh")],
        env: { HOME: await tempDir(), PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
        clearEnv: true,
        stderr: "piped",
      }).output();
      assert.equal(res.code, 1);
      assert.match(
        new TextDecoder().decode(res.stderr),
        /set BATON_REPO=owner\/repo or BATON_DOWNLOAD_URL/,
      );
    });
  },
});
