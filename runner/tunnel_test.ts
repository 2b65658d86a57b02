import assert from "node:assert/strict";
import { loopbackUrl, tunnelMask, tunnelUrl } from "./tunnel.ts";

Deno.test("the runner forwards to 127.0.0.1 and the named port only", () => {
  assert.equal(loopbackUrl({ port: 5173, path: "/a?b=1" })?.href, "http://127.0.0.1:5173/a?b=1");
  // Nothing in a path can name another host or port.
  for (const path of ["//evil.example/", "@evil.example/", "evil", "", "/\\\\evil"]) {
    const url = loopbackUrl({ port: 80, path });
    assert.ok(url === null || url.host === "127.0.0.1:80", `${path}: ${url?.href}`);
  }
  for (const port of [0, -1, 65536, 1.5, NaN]) assert.equal(loopbackUrl({ port, path: "/" }), null);
  assert.equal(loopbackUrl({ port: "80" as unknown as number, path: "/" }), null);
});

Deno.test("the tunnel URL sits beside the control channel's", () => {
  assert.equal(tunnelUrl("https://relay.example/"), "wss://relay.example/_tunnel");
  assert.equal(tunnelUrl("http://127.0.0.1:7420"), "ws://127.0.0.1:7420/_tunnel");
});

Deno.test("the tunnel's frames go unmasked over TLS and to a loopback relay only", () => {
  for (const url of ["https://relay.example", "http://127.0.0.1:7420", "http://localhost:1"]) {
    const mask = Uint8Array.of(1, 2, 3, 4);
    const generate = tunnelMask(url);
    assert.ok(generate, url);
    generate(mask);
    assert.deepEqual([...mask], [0, 0, 0, 0], url);
  }
  // Plain ws to another host: proxies on the way may read it, so RFC 6455's random mask stays.
  assert.equal(tunnelMask("http://relay.example:7420"), undefined);
  assert.equal(tunnelMask("http://10.0.0.5"), undefined);
});
