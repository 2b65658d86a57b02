/**
 * The bridge between node:http and the relay's fetch handler: an
 * IncomingMessage becomes a Request (its body streamed, not read whole), a
 * Response is written to the ServerResponse (streamed too, with backpressure).
 * The relay serves on node:http for its WebSocket channels (see serve.ts);
 * everything else still speaks Request and Response.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { Buffer } from "node:buffer";

/** What `Deno.serve` passes as the second argument, rebuilt from a node socket. */
export function connectionInfo(socket: Socket): Deno.ServeHandlerInfo<Deno.NetAddr> {
  return {
    remoteAddr: {
      transport: "tcp",
      hostname: peerAddress(socket),
      port: socket.remotePort ?? 0,
    },
    completed: Promise.resolve(),
  };
}

/**
 * The socket's peer address as Deno.serve names it: an IPv4 client of a
 * dual-stack (`::`) listener is `1.2.3.4`, not `::ffff:1.2.3.4`.
 */
export function peerAddress(socket: Socket): string {
  const a = socket.remoteAddress ?? "unknown";
  return a.startsWith("::ffff:") && a.includes(".") ? a.slice(7) : a;
}

/**
 * The Request for an IncomingMessage, or null when its target or headers
 * cannot make one (the caller answers 400). The URL is built as Deno.serve
 * builds it: `http://<Host header><target>`, the target not normalised.
 * Call `release` once the answer is written: what the app left unread of
 * the body is then read and dropped, so the client, still sending, gets to
 * read that answer (node:http only does this for a body never touched).
 */
export function toRequest(req: IncomingMessage): { request: Request; release: () => void } | null {
  const target = req.url ?? "/";
  const host = req.headers.host ?? "localhost";
  let url: string;
  if (target.startsWith("/")) url = `http://${host}${target}`;
  else if (/^https?:\/\//i.test(target)) url = target;
  else return null;
  const headers: [string, string][] = [];
  const raw = req.rawHeaders;
  try {
    for (let i = 0; i + 1 < raw.length; i += 2) headers.push([raw[i]!, raw[i + 1]!]);
    const method = req.method ?? "GET";
    const body = method !== "GET" && method !== "HEAD" ? bodyOf(req) : null;
    const request = new Request(url, {
      method,
      headers,
      ...(body ? { body: body.stream, duplex: "half" } as RequestInit : {}),
    });
    return { request, release: body?.release ?? (() => {}) };
  } catch (err) {
    if (err instanceof TypeError) return null;
    throw err;
  }
}

/**
 * The request body as a stream that reads from the socket only when the
 * app reads (no read-ahead), so a body the app refuses stays in the kernel.
 */
function bodyOf(req: IncomingMessage): { stream: ReadableStream<Uint8Array>; release(): void } {
  let attached = false;
  let done = false;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const onData = (chunk: Buffer) => {
    controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    if ((controller.desiredSize ?? 0) <= 0) req.pause();
  };
  const onEnd = () => {
    if (done) return;
    done = true;
    controller.close();
  };
  const onError = (err: Error) => {
    if (done) return;
    done = true;
    controller.error(err);
  };
  const release = () => {
    done = true;
    req.off("data", onData);
    req.off("end", onEnd);
    req.off("error", onError);
    // Drop the rest, so the connection can carry the next request.
    if (!req.complete) req.resume();
  };
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    pull() {
      if (!attached) {
        attached = true;
        req.on("data", onData);
        req.on("end", onEnd);
        req.on("error", onError);
      }
      req.resume();
    },
    cancel() {
      release();
    },
  }, { highWaterMark: 0 });
  return { stream, release };
}

/** The header list of a Response for `writeHead`, every Set-Cookie kept apart. */
function headerList(response: Response): [string, string][] {
  const list: [string, string][] = [];
  for (const [k, v] of response.headers) {
    if (k !== "set-cookie") list.push([k, v]);
  }
  for (const c of response.headers.getSetCookie()) list.push(["set-cookie", c]);
  return list;
}

/**
 * Writes a Response. A body that is already whole (a JSON answer, a page)
 * goes out with its Content-Length in one write; a body still being made is
 * streamed chunk by chunk, waiting for the socket to drain. When the client
 * goes away first, the body is cancelled.
 */
export async function writeResponse(response: Response, res: ServerResponse): Promise<void> {
  const head = headerList(response);
  if (!response.body) {
    res.writeHead(response.status, head.flat());
    res.end();
    return;
  }
  const reader = response.body.getReader();
  let gone = false;
  const onClose = () => {
    if (!res.writableFinished) {
      gone = true;
      reader.cancel().catch(() => {});
    }
  };
  res.on("close", onClose);
  try {
    const first = await reader.read();
    // A body made from a string or bytes is whole: its second read is done at once.
    const second = first.done ? first : await readNow(reader.read());
    if (second.done) {
      const body = first.done ? undefined : first.value;
      if (!response.headers.has("content-length")) {
        head.push(["content-length", String(body?.byteLength ?? 0)]);
      }
      res.writeHead(response.status, head.flat());
      res.end(body && asBuffer(body));
      return;
    }
    res.writeHead(response.status, head.flat());
    if (!res.write(asBuffer(first.value!))) await drained(res);
    let next = await second.later;
    while (!next.done && !gone) {
      if (!res.write(asBuffer(next.value))) await drained(res);
      next = await reader.read();
    }
    res.end();
  } catch {
    // The body failed or the client left: drop the connection.
    if (!gone) res.destroy();
  } finally {
    res.off("close", onClose);
  }
}

type Soon =
  | { done: true }
  | { done: false; later: Promise<ReadableStreamReadResult<Uint8Array>> };

/**
 * Whether a read ends the stream right away; otherwise the read, to await
 * later. A body that is whole ends within a few microtasks (a string or
 * bytes in one, a Blob in five); waiting a few more costs nothing, and a
 * guess either way changes only the framing (Content-Length or chunked).
 */
async function readNow(read: Promise<ReadableStreamReadResult<Uint8Array>>): Promise<Soon> {
  let settled: boolean | null = null;
  read.then((r) => settled = r.done, () => settled = false);
  for (let i = 0; i < 8 && settled === null; i++) await null;
  return settled ? { done: true } : { done: false, later: read };
}

/** The same bytes as a Buffer: node:http copies any other Uint8Array before writing it. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/**
 * Writes a whole HTTP/1.1 response onto a raw socket (a refused WebSocket
 * upgrade, which node:http hands over before any ServerResponse exists) and
 * closes the connection.
 */
export async function writeRawResponse(response: Response, socket: Socket): Promise<void> {
  const body = new Uint8Array(await response.arrayBuffer());
  if (socket.destroyed) return;
  const lines = [`HTTP/1.1 ${response.status} ${response.statusText || reason(response.status)}`];
  for (const [k, v] of headerList(response)) {
    if (k !== "content-length" && k !== "connection") lines.push(`${k}: ${v}`);
  }
  lines.push(`content-length: ${body.byteLength}`, "connection: close", "", "");
  socket.end(new Uint8Array([...new TextEncoder().encode(lines.join("\r\n")), ...body]));
}

function reason(status: number): string {
  return ({ 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found" } as Record<
    number,
    string
  >)[status] ?? "Error";
}
