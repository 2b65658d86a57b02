/**
 * The tunnel's streaming rewrite (relay/tunnel_rewrite.ts): absolute paths
 * of HTML, CSS and JS bodies under the tunnel prefix, at any chunk split.
 */
import assert from "node:assert/strict";
import { decoderFor, rewriteKind, rewriteStream } from "../relay/tunnel_rewrite.ts";

const P = "/api/tunnel/g/tok";

async function run(kind: "html" | "css" | "js", parts: string[], prefix = P): Promise<string> {
  const enc = new TextEncoder();
  const body = ReadableStream.from(parts.map((p) => enc.encode(p)));
  return await new Response(body.pipeThrough(rewriteStream(kind, prefix))).text();
}

const PAGE = `<!doctype html><html><head>
<link rel="stylesheet" href="/style.css"><script type="module" src='/src/main.js'></script>
<style>body { background: url(/img/bg.png) } .a { background: url("//cdn.example/x.png") }</style>
<script type="module">import "/@client"; import { x } from "/lib.js"; import("/lazy.js");</script>
</head><body><a href="/about">About</a> <a href="https://example.com/x">out</a>
<a href="relative/ok">rel</a> <form action="/submit"></form> <img src=/unquoted.png>
<a href="${P}/already">done</a> ünïcödé → ✓</body></html>`;

const EXPECTED = PAGE
  .replace(`href="/style.css"`, `href="${P}/style.css"`)
  .replace(`src='/src/main.js'`, `src='${P}/src/main.js'`)
  .replace(`url(/img/bg.png)`, `url(${P}/img/bg.png)`)
  .replace(`import "/@client"`, `import "${P}/@client"`)
  .replace(`from "/lib.js"`, `from "${P}/lib.js"`)
  .replace(`import("/lazy.js")`, `import("${P}/lazy.js")`)
  .replace(`href="/about"`, `href="${P}/about"`)
  .replace(`action="/submit"`, `action="${P}/submit"`)
  .replace(`src=/unquoted.png`, `src=${P}/unquoted.png`);

Deno.test("the tunnel rewrites absolute paths in HTML, leaving other URLs alone", async () => {
  assert.equal(await run("html", [PAGE]), EXPECTED);
});

Deno.test("the rewrite finds a pattern split across chunks at every byte", async () => {
  const bytes = new TextEncoder().encode(PAGE);
  for (let cut = 1; cut < bytes.length; cut++) {
    const enc = ReadableStream.from([bytes.slice(0, cut), bytes.slice(cut)]);
    const got = await new Response(enc.pipeThrough(rewriteStream("html", P))).text();
    assert.equal(got, EXPECTED, `split at ${cut}`);
  }
  // And one byte at a time.
  const single = ReadableStream.from([...bytes].map((b) => new Uint8Array([b])));
  assert.equal(await new Response(single.pipeThrough(rewriteStream("html", P))).text(), EXPECTED);
});

Deno.test("the rewrite streams: output comes before the body ends", async () => {
  const { readable, writable } = rewriteStream("js", P);
  const w = writable.getWriter();
  const r = readable.getReader();
  const big = `import a from "/a.js";\n` + "x".repeat(100_000);
  w.write(new TextEncoder().encode(big));
  const first = new TextDecoder().decode((await r.read()).value);
  assert.ok(first.startsWith(`import a from "${P}/a.js";`));
  assert.ok(first.length > 90_000, "most of the chunk is emitted at once");
  w.close();
  await r.cancel();
});

Deno.test("CSS and JS have their own patterns", async () => {
  assert.equal(
    await run("css", [`@import "/base.css"; a { background:url( '/x.png') }`]),
    `@import "${P}/base.css"; a { background:url( '${P}/x.png') }`,
  );
  assert.equal(
    await run("js", [`import "/a"; export * from '/b'; const s = "/not-a-path";`]),
    `import "${P}/a"; export * from '${P}/b'; const s = "/not-a-path";`,
  );
  // An origin tunnel has no prefix to add (wildcard): nothing changes.
  assert.equal(await run("js", [`import "/a";`], ""), `import "/a";`);
});

Deno.test("content types and encodings the tunnel rewrites", async () => {
  assert.equal(rewriteKind("text/html; charset=utf-8"), "html");
  assert.equal(rewriteKind("application/javascript"), "js");
  assert.equal(rewriteKind("text/javascript"), "js");
  assert.equal(rewriteKind("text/css"), "css");
  assert.equal(rewriteKind("image/png"), null);
  assert.equal(rewriteKind(null), null);
  for (const [enc, fmt] of [["gzip", "gzip"], ["deflate", "deflate"], ["br", "brotli"]] as const) {
    const packed = ReadableStream.from([new TextEncoder().encode(`import "/x";`)])
      .pipeThrough(new CompressionStream(fmt as CompressionFormat));
    const got = await new Response(
      packed.pipeThrough(decoderFor(enc)!).pipeThrough(rewriteStream("js", P)),
    ).text();
    assert.equal(got, `import "${P}/x";`, enc);
  }
  assert.equal(decoderFor("identity"), null);
});
