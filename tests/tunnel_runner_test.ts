/**
 * The runner's end of tunnel streams, in-process: two stream multiplexers
 * joined back to back (the relay's and the runner's, as over `/_tunnel`),
 * the runner's real stream handler, and a service on 127.0.0.1. Whatever a
 * request head says, the runner reaches 127.0.0.1:{port} and nothing else.
 */
import assert from "node:assert/strict";
import { StreamMux } from "../shared/streams.ts";
import { serveStream } from "../runner/tunnel.ts";
import { readHead } from "../relay/tunnel_proxy.ts";

function pair() {
  // Frames cross on the next microtask, as they would over a socket.
  const link: { relay?: StreamMux; runner?: StreamMux } = {};
  const relay = new StreamMux({
    dialer: true,
    send: (f) => void queueMicrotask(() => link.runner!.receive(f.slice())),
  });
  const runner = new StreamMux({
    dialer: false,
    send: (f) => void queueMicrotask(() => relay.receive(f.slice())),
    onStream: (s, h) => serveStream(s, h, { log: () => {} }),
  });
  link.relay = relay;
  link.runner = runner;
  return relay;
}

async function ask(relay: StreamMux, head: object) {
  const stream = relay.open(new TextEncoder().encode(JSON.stringify(head)));
  await stream.writable.close();
  const reader = stream.readable.getReader();
  const { head: answer, rest } = await readHead<Record<string, unknown>>(reader);
  let body = new TextDecoder().decode(rest);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    body += new TextDecoder().decode(value);
  }
  return { answer, body };
}

Deno.test("the runner reaches 127.0.0.1:{port} only, whatever the head says", async () => {
  const seen: string[] = [];
  const service = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    seen.push(`${req.headers.get("host")} ${new URL(req.url).pathname}`);
    return new Response("local");
  });
  const port = service.addr.port;
  const relay = pair();
  try {
    // A Host header, an absolute-looking path: still the loopback service, with its own Host.
    const ok = await ask(relay, {
      kind: "http",
      method: "GET",
      port,
      path: "/x",
      headers: [["host", "evil.example"], ["x-forwarded-host", "evil.example"]],
    });
    assert.equal(ok.answer.status, 200);
    assert.equal(ok.body, "local");
    assert.deepEqual(seen, [`127.0.0.1:${port} /x`]);
    // Paths that would name another host, and bad ports, are refused before any connection.
    for (const path of ["//evil.example/", "@evil.example/", "http://evil.example/"]) {
      for (const kind of ["http", "ws"]) {
        const r = await ask(relay, { kind, method: "GET", port, path, headers: [], protocols: [] });
        assert.deepEqual(
          (r.answer.error as { code: string }).code,
          "bad_target",
          `${kind} ${path}`,
        );
      }
    }
    for (const bad of [0, 65536, "80"]) {
      const r = await ask(relay, { kind: "ws", port: bad, path: "/", headers: [], protocols: [] });
      assert.equal((r.answer.error as { code: string }).code, "bad_target");
    }
    assert.equal(seen.length, 1);
  } finally {
    await service.shutdown();
  }
});
