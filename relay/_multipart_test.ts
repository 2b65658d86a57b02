import assert from "node:assert/strict";
import { multipartBoundary, MultipartError, readMultipart } from "./_multipart.ts";

const enc = new TextEncoder();

/** A stream of `bytes` cut into pieces of `size` bytes. */
function pieces(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
}

async function parse(body: Uint8Array, boundary: string, size: number) {
  const parts: { name: string; filename: string | null; type: string | null; text: string }[] = [];
  await readMultipart(pieces(body, size), boundary, (info) => {
    const chunks: Uint8Array[] = [];
    return {
      write: (c) => void chunks.push(c.slice()),
      end: () => {
        const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
        let at = 0;
        for (const c of chunks) all.set(c, (at += c.length) - c.length);
        parts.push({
          name: info.name,
          filename: info.filename,
          type: info.contentType,
          text: new TextDecoder().decode(all),
        });
      },
    };
  });
  return parts;
}

const BODY = enc.encode(
  "preamble\r\n--XyZ\r\n" +
    'Content-Disposition: form-data; name="note"\r\n\r\n' +
    "hello\r\n--XyZ\r\n" +
    'Content-Disposition: form-data; name="file"; filename="a \\"b\\".txt"; ' +
    "filename*=UTF-8''%C3%A9t%C3%A9.txt\r\nContent-Type: text/plain\r\n\r\n" +
    "line one\r\n-XyZ\r\n--Xy\r\n--\r\n--XyZ  \r\n" +
    'Content-Disposition: form-data; name="files"; filename=""\r\n\r\n' +
    "\r\n--XyZ--\r\nepilogue",
);

Deno.test("a multipart body reads the same whatever pieces it arrives in", async () => {
  const whole = await parse(BODY, "XyZ", BODY.length);
  assert.deepEqual(whole, [
    { name: "note", filename: null, type: null, text: "hello" },
    {
      name: "file",
      filename: "été.txt",
      type: "text/plain",
      text: "line one\r\n-XyZ\r\n--Xy\r\n--",
    },
    { name: "files", filename: "", type: null, text: "" },
  ]);
  for (const size of [1, 2, 3, 5, 7, 16, 64]) {
    assert.deepEqual(await parse(BODY, "XyZ", size), whole, `pieces of ${size}`);
  }
});

Deno.test("a malformed multipart body is refused", async () => {
  const bad = [
    '--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\ncut short',
    "--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--",
    "no boundary at all",
    `--XyZ\r\nX: ${"h".repeat(9000)}\r\n\r\nx\r\n--XyZ--`,
  ];
  for (const b of bad) {
    await assert.rejects(parse(enc.encode(b), "XyZ", 100), MultipartError, b.slice(0, 40));
  }
});

Deno.test("the boundary is read from a multipart/form-data Content-Type only", () => {
  assert.equal(multipartBoundary("multipart/form-data; boundary=abc"), "abc");
  assert.equal(multipartBoundary('Multipart/Form-Data; charset=x; boundary="a b"'), "a b");
  assert.equal(multipartBoundary("multipart/mixed; boundary=abc"), null);
  assert.equal(multipartBoundary("multipart/form-data"), null);
  assert.equal(multipartBoundary(null), null);
});
