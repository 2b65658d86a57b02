/**
 * The bus over TLS (docs/scaling.md, "The bus between nodes"): relay nodes
 * on different machines reach nats-server across a network, so
 * `--bus tls://…` speaks only TLS, checks the server's certificate against
 * `BATON_BUS_CA` (or the system's CAs), and presents `BATON_BUS_CERT` /
 * `BATON_BUS_KEY` to a server that verifies its clients. A node that cannot
 * trust the server, or is not trusted by it, stops at start with one line.
 */
import assert from "node:assert/strict";
import { NatsBus } from "../relay/bus/nats_bus.ts";
import { makeCertificates, opensslAvailable, type TestCertificates } from "./harness/certs.ts";
import { NATS_SERVER, NatsServer } from "./harness/nats.ts";
import { baseEnv, BatonProcess, RelayProcess, tempDir } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";

const TOKEN = "bus-tls-token";
const IGNORE = !NATS_SERVER || !opensslAvailable();
if (!opensslAvailable()) console.log("openssl is not installed: the bus TLS tests are ignored");

/** Runs `baton relay` with `env` until it exits (it must not start). */
async function relayExit(env: Record<string, string>): Promise<{ code: number; lines: string[] }> {
  const home = await tempDir();
  const p = BatonProcess.start("relay", {
    args: ["relay", "--port", "0", "--data-dir", `${home}/data`],
    env: baseEnv(home, env),
  });
  const timer = setTimeout(() => p.kill("SIGKILL"), 30_000);
  const st = await p.status;
  clearTimeout(timer);
  return { code: st.code, lines: p.lines };
}

/**
 * Asserts that `baton relay` with `env` stops at start (exit 1) with one line
 * saying it cannot reach the bus at `url`, for a reason that matches `why`.
 */
async function assertBusRefused(env: Record<string, string>, url: string, why: RegExp) {
  const { code, lines } = await relayExit(env);
  assert.equal(code, 1, lines.join("\n"));
  const head = `baton relay: Cannot reach the bus at ${url}: `;
  assert.ok(
    lines.some((l) => l.startsWith(head) && why.test(l.slice(head.length))),
    lines.join("\n"),
  );
  assert.ok(!lines.some((l) => /listening on/.test(l)), "it never listened");
}

/** Starts a relay on the bus and waits until `watcher` sees its node; stops it after `fn`. */
async function joins(
  watcher: NatsBus,
  env: Record<string, string>,
  fn: (relay: RelayProcess) => Promise<void> = async () => {},
): Promise<void> {
  const others = () => watcher.nodes().filter((n) => n.nodeId !== watcher.nodeId);
  const relay = await RelayProcess.start({ env });
  try {
    await eventually(
      "the relay's node on the bus",
      () => others().length === 1 || undefined,
      10_000,
    );
    await fn(relay);
  } catch (err) {
    console.error(relay.proc.output());
    throw err;
  } finally {
    await relay.stop();
  }
}

async function withTlsBus(
  clientCa: boolean,
  fn: (url: string, certs: TestCertificates, watcher: NatsBus) => Promise<void>,
): Promise<void> {
  const certs = await makeCertificates();
  await using server = await NatsServer.start({
    token: TOKEN,
    tls: {
      cert: certs.serverCert,
      key: certs.serverKey,
      ...(clientCa ? { clientCa: certs.ca } : {}),
    },
  });
  const url = `tls://127.0.0.1:${server.port}`;
  const watcher = await NatsBus.connect({
    url,
    token: TOKEN,
    tls: {
      caFile: certs.ca,
      ...(clientCa ? { certFile: certs.clientCert, keyFile: certs.clientKey } : {}),
    },
  }, { announceMs: 200 });
  try {
    await fn(url, certs, watcher);
  } finally {
    await watcher.close();
  }
}

Deno.test({
  name:
    "a relay that trusts the bus's CA joins it over TLS and is ready; one that does not stops with one line",
  ignore: IGNORE,
  async fn() {
    await withTlsBus(false, async (url, certs, watcher) => {
      await joins(
        watcher,
        { BATON_BUS_URL: url, BATON_BUS_TOKEN: TOKEN, BATON_BUS_CA: certs.ca },
        async (relay) => {
          const ready = await fetch(`${relay.url}/ready`);
          assert.equal(ready.status, 200, await ready.text());
        },
      );
      // The system's CAs do not know the test CA: the server's certificate is refused.
      await assertBusRefused({ BATON_BUS_URL: url, BATON_BUS_TOKEN: TOKEN }, url, /certificate/i);
    });
  },
});

Deno.test({
  name:
    "a bus that verifies its clients takes a node with BATON_BUS_CERT and BATON_BUS_KEY, and refuses one without",
  ignore: IGNORE,
  async fn() {
    await withTlsBus(true, async (url, certs, watcher) => {
      const env = { BATON_BUS_URL: url, BATON_BUS_TOKEN: TOKEN, BATON_BUS_CA: certs.ca };
      await joins(watcher, {
        ...env,
        BATON_BUS_CERT: certs.clientCert,
        BATON_BUS_KEY: certs.clientKey,
      });
      await assertBusRefused(env, url, /BATON_BUS_CERT/);
    });
  },
});

Deno.test({
  name:
    "the server's certificate must name the host dialled, and a tls:// URL (any case) never goes plain",
  ignore: IGNORE,
  async fn() {
    const certs = await makeCertificates();
    // Signed by the trusted CA, but for another name: not the bus at 127.0.0.1.
    {
      await using server = await NatsServer.start({
        token: TOKEN,
        tls: { cert: certs.otherCert, key: certs.otherKey },
      });
      const url = `tls://127.0.0.1:${server.port}`;
      const env = { BATON_BUS_URL: url, BATON_BUS_TOKEN: TOKEN, BATON_BUS_CA: certs.ca };
      await assertBusRefused(env, url, /127\.0\.0\.1/);
    }
    // A server without TLS: a TLS:// URL refuses it rather than sending the token in clear.
    {
      await using server = await NatsServer.start({ token: TOKEN });
      const url = `TLS://127.0.0.1:${server.port}`;
      const env = { BATON_BUS_URL: url, BATON_BUS_TOKEN: TOKEN, BATON_BUS_CA: certs.ca };
      await assertBusRefused(env, url.toLowerCase(), /tls/i);
      assert.ok(!server.lines.some((l) => /authorization violation/i.test(l)), "no token sent");
    }
  },
});

Deno.test({
  name: "TLS settings that cannot work are usage errors before anything starts",
  ignore: IGNORE,
  async fn() {
    const certs = await makeCertificates();
    const bus = { BATON_BUS_URL: "tls://127.0.0.1:4222" };
    const cases: [Record<string, string>, RegExp][] = [
      [
        { ...bus, BATON_BUS_CA: `${certs.dir}/missing.pem` },
        /^baton relay: Invalid BATON_BUS_CA: cannot read '.*missing\.pem' /,
      ],
      [{ ...bus, BATON_BUS_CA: certs.serverKey.replace(/key$/, "ext") }, /is not a PEM file$/],
      [
        { ...bus, BATON_BUS_CERT: certs.clientCert },
        /^baton relay: BATON_BUS_CERT and BATON_BUS_KEY go together/,
      ],
      [{ BATON_BUS_URL: "https://127.0.0.1:4222" }, /expected nats:\/\/host:port or tls:\/\//],
    ];
    for (const [env, expected] of cases) {
      const { code, lines } = await relayExit(env);
      assert.equal(code, 2, lines.join("\n"));
      assert.equal(lines.length, 1, lines.join("\n"));
      assert.match(lines[0]!, expected);
    }
  },
});
