import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { writeResponse } from "./_node_http.ts";

/** A node:http server that answers every request with `make()`, written by writeResponse. */
async function serving(make: () => Response, run: (url: string) => Promise<void>): Promise<void> {
  const server = createServer((_req, res) => {
    writeResponse(make(), res).catch(() => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

Deno.test("a JSON answer goes out whole, with its length in bytes", async () => {
  const body = JSON.stringify({ name: "é✓".repeat(1000) });
  await serving(() => Response.json(JSON.parse(body)), async (url) => {
    const res = await fetch(url);
    assert.equal(res.headers.get("content-length"), String(new TextEncoder().encode(body).length));
    assert.equal(await res.text(), body);
  });
});

Deno.test("bytes and a Blob go out whole too", async () => {
  await serving(() => new Response(new Uint8Array([1, 2, 3])), async (url) => {
    const res = await fetch(url);
    assert.equal(res.headers.get("content-length"), "3");
    assert.deepEqual([...new Uint8Array(await res.arrayBuffer())], [1, 2, 3]);
  });
  await serving(() => new Response(new Blob(["blob"])), async (url) => {
    const res = await fetch(url);
    assert.equal(res.headers.get("content-length"), "4");
    assert.equal(await res.text(), "blob");
  });
});

Deno.test("a body still being made reaches the client before it is finished", async () => {
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => finish = resolve);
  const make = () => {
    let step = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        step++;
        if (step === 1) c.enqueue(new TextEncoder().encode('{"events":['));
        else {
          await finished;
          c.enqueue(new TextEncoder().encode("]}"));
          c.close();
        }
      },
    }, { highWaterMark: 0 });
    return new Response(body, { headers: { "content-type": "application/json" } });
  };
  await serving(make, async (url) => {
    const res = await fetch(url);
    assert.equal(res.headers.get("content-length"), null);
    assert.equal(res.headers.get("transfer-encoding"), "chunked");
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    // The first piece arrives while the rest is still being made.
    assert.equal((await reader.read()).value, '{"events":[');
    finish();
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += r.value;
    assert.equal(rest, "]}");
  });
});
