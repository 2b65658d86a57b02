/**
 * One HTTP request through a runner's tunnel: a new stream of its tunnel
 * channel carries the request head and body to `127.0.0.1:{port}` on the
 * runner, and the response back. Bodies stream both ways under the stream's
 * credit, so the relay holds at most a window per direction whatever the
 * size, and a client that stops reading stops that stream only.
 *
 * The answer is fitted to where it is served (`prefix`): `Set-Cookie` held
 * to the prefix's path without `Domain`, `Location` to the service's own
 * paths kept inside, absolute paths in HTML/CSS/JS bodies put under the
 * prefix (tunnel_rewrite.ts), and, on the relay's origin, a CSP sandbox.
 * Who may ask is the route's business (routes/tunnel.ts, tunnel_origin.ts).
 *
 * @module
 */
import type { MuxStream } from "../shared/streams.ts";
import {
  MAX_TUNNEL_HEAD_BYTES,
  TUNNEL_STRIPPED_REQUEST_HEADERS,
  type TunnelRequestHead,
  type TunnelResponseHead,
} from "../shared/tunnel_api.ts";
import { prefersHtml } from "./_http.ts";
import type { StreamLink } from "./tunnel_link.ts";
import { decoderFor, rewriteKind, rewriteStream } from "./tunnel_rewrite.ts";

/** The CSP every tunnelled answer on the relay's origin carries: scripts run, in an opaque origin. */
export const TUNNEL_CSP = "sandbox allow-scripts allow-forms allow-popups allow-modals";

/** Response headers of the service that would act on the relay's own origin. */
const DROPPED_RESPONSE_HEADERS = new Set([
  "strict-transport-security",
  "clear-site-data",
  "service-worker-allowed",
  "alt-svc",
  "set-cookie",
  "content-length",
]);

/** Where and how a tunnelled answer is served. */
export interface ProxyTarget {
  port: number;
  /** The path before the service's own (`/api/tunnel/g/{token}`; empty on an origin of its own). */
  prefix: string;
  /** Send the CSP sandbox (the relay's origin) or not (a tunnel origin of its own). */
  sandbox: boolean;
  /** The service path and query (from `/`). */
  path: string;
  /** The service's own cookies, on a tunnel origin (never the relay's). */
  cookie?: string;
  /**
   * Let the page's own opaque origin read the answer (a preview address):
   * a sandboxed page's module scripts and fetches are cross-origin requests.
   */
  cors?: boolean;
}

/** An error of the tunnel itself: its HTTP status, code and words. */
export class TunnelFailure extends Error {
  constructor(
    readonly status: 400 | 401 | 404 | 502 | 503,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "TunnelFailure";
  }
}

/** Opens a stream for `head` on `link`; a TunnelFailure (503) when the tunnel cannot. */
export function openStream(link: StreamLink, head: object): MuxStream {
  try {
    return link.mux.open(new TextEncoder().encode(JSON.stringify(head)));
  } catch (err) {
    if (err instanceof RangeError) {
      throw new TunnelFailure(503, "tunnel_busy", `The runner's tunnel is busy: ${err.message}`);
    }
    throw new TunnelFailure(503, "runner_offline", "Runner is not connected");
  }
}

/** A runner's answer on a new stream: its head and the bytes after it, still to be read. */
export interface RunnerAnswer<T> {
  stream: MuxStream;
  reader: ReadableStreamDefaultReader<Uint8Array>;
  head: T;
  rest: Uint8Array;
}

/**
 * Opens a stream for `head`, lets `send` start what goes up on it, and reads
 * the head of the runner's answer. Answers instead with the failure page when
 * the stream cannot open (503), or, the stream reset, when it ends before a
 * head (502 `tunnel_failed`).
 */
export async function askRunner<T>(
  req: Request,
  link: StreamLink,
  target: ProxyTarget,
  head: object,
  send?: (stream: MuxStream) => void,
): Promise<RunnerAnswer<T> | Response> {
  let stream: MuxStream;
  try {
    stream = openStream(link, head);
  } catch (err) {
    if (err instanceof TunnelFailure) return failure(req, err, target.sandbox);
    throw err;
  }
  send?.(stream);
  const reader = stream.readable.getReader();
  try {
    return { stream, reader, ...await readHead<T>(reader) };
  } catch {
    stream.reset("bad_head");
    return failure(
      req,
      new TunnelFailure(
        502,
        "tunnel_failed",
        "The runner's tunnel closed before the service answered",
      ),
      target.sandbox,
    );
  }
}

/** The failure for the runner's report that the service could not be reached. */
export function serviceFailure(
  error: Extract<TunnelResponseHead, { error: unknown }>["error"],
  port: number,
): TunnelFailure {
  return new TunnelFailure(
    error.code === "bad_target" ? 400 : 502,
    error.code,
    error.code === "port_closed"
      ? `Nothing is listening on port ${port} on this runner`
      : String(error.message).slice(0, 500),
  );
}

/** The request headers forwarded to the service (credentials and hop-by-hop dropped). */
export function forwardedHeaders(
  req: Request,
  target: Pick<ProxyTarget, "cookie">,
): [string, string][] {
  const headers: [string, string][] = [];
  for (const [k, v] of req.headers) {
    if (!TUNNEL_STRIPPED_REQUEST_HEADERS.has(k)) headers.push([k, v]);
  }
  if (target.cookie) headers.push(["cookie", target.cookie]);
  return headers;
}

/** Forwards `req` to the service; never throws for the service's failures (they are pages). */
export async function proxyHttp(
  req: Request,
  link: StreamLink,
  target: ProxyTarget,
): Promise<Response> {
  const { port, prefix } = target;
  const head: TunnelRequestHead = {
    kind: "http",
    method: req.method,
    port,
    path: target.path,
    headers: forwardedHeaders(req, target),
  };
  const answer = await askRunner<TunnelResponseHead>(req, link, target, head, (stream) => {
    // The request body goes up as the service reads it (credit), never whole.
    if (req.body) req.body.pipeTo(stream.writable).catch(() => stream.reset("request aborted"));
    else stream.writable.close().catch(() => {});
  });
  if (answer instanceof Response) return answer;
  const { stream, reader } = answer;
  const h = answer.head;
  if ("error" in h) {
    reader.cancel().catch(() => {});
    return failure(req, serviceFailure(h.error, port), target.sandbox);
  }
  if (!Number.isInteger(h.status) || h.status < 200 || h.status > 599) {
    reader.cancel().catch(() => {});
    return failure(
      req,
      new TunnelFailure(
        502,
        "tunnel_failed",
        `The service answered an unusable status: ${h.status}`,
      ),
      target.sandbox,
    );
  }
  const out = new Headers();
  /** The service's Content-Length: kept while the body passes as it came (rewriting changes it). */
  let length: string | null = null;
  for (const [k, v] of Array.isArray(h.headers) ? h.headers : []) {
    const name = String(k).toLowerCase();
    try {
      if (name === "set-cookie") out.append("set-cookie", scopeCookie(String(v), prefix));
      else if (name === "location") out.set("location", rewriteLocation(String(v), prefix, port));
      else if (name === "content-length" && /^\d{1,15}$/.test(String(v).trim())) {
        length = String(v).trim();
      } else if (!DROPPED_RESPONSE_HEADERS.has(name)) out.append(name, String(v));
    } catch { /* an invalid header is dropped */ }
  }
  // The service's own CSP still applies; this one adds the sandbox.
  if (target.sandbox) out.append("content-security-policy", TUNNEL_CSP);
  // No credential rides on these requests (the grant is in the path): `*` lends nothing.
  if (target.cors) {
    out.set("access-control-allow-origin", "*");
    out.set("access-control-expose-headers", "*");
    out.delete("access-control-allow-credentials");
  }
  const noBody = req.method === "HEAD" || [204, 205, 304].includes(h.status);
  if (noBody) {
    reader.cancel().catch(() => {});
    if (req.method === "HEAD" && length !== null) out.set("content-length", length);
    return new Response(null, { status: h.status, headers: out });
  }
  let body = bodyOf(reader, answer.rest, stream);
  const kind = prefix ? rewriteKind(out.get("content-type")) : null;
  let rewritten = false;
  if (kind) {
    const encoding = out.get("content-encoding");
    const decoder = decoderFor(encoding);
    // An encoding we cannot undo passes as it is, unrewritten.
    if (decoder || !encoding || encoding.trim().toLowerCase() === "identity") {
      if (decoder) body = body.pipeThrough(decoder);
      out.delete("content-encoding");
      out.delete("etag");
      body = body.pipeThrough(rewriteStream(kind, prefix));
      rewritten = true;
    }
  }
  // A body that passes as it came keeps its length: the browser shows a download's
  // size and progress. (One the relay rewrote gets the length of what it sends, or
  // none.)
  if (length !== null && !rewritten) out.set("content-length", length);
  return new Response(body, { status: h.status, headers: out });
}

/** The rest of the response, read only as the client takes it (which grants the runner credit). */
function bodyOf(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  first: Uint8Array,
  stream: MuxStream,
): ReadableStream<Uint8Array> {
  let pending: Uint8Array | null = first.byteLength > 0 ? first : null;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (pending) {
        controller.enqueue(pending);
        pending = null;
        return;
      }
      const { done, value } = await reader.read();
      if (!done) return controller.enqueue(value);
      controller.close();
      // A service that answered without reading the whole request body (a
      // 413, a refusal) leaves the upload waiting for credit: the answer is
      // complete, so the stream is dropped (a no-op when both sides ended).
      stream.reset("response complete");
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/** Reads the 4-byte length and the JSON head; what follows is the body's start. */
export async function readHead<T = TunnelResponseHead>(
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<{ head: T; rest: Uint8Array }> {
  let buf = new Uint8Array(0);
  let need = 4;
  for (;;) {
    if (buf.byteLength >= need) {
      if (need === 4) {
        need = 4 + new DataView(buf.buffer, buf.byteOffset).getUint32(0);
        if (need - 4 > MAX_TUNNEL_HEAD_BYTES) throw new RangeError("Response head too large");
        continue;
      }
      const head = JSON.parse(new TextDecoder().decode(buf.subarray(4, need)));
      if (typeof head !== "object" || head === null) throw new TypeError("Bad head");
      return { head, rest: buf.subarray(need) };
    }
    const { done, value } = await reader.read();
    if (done) throw new TypeError("Stream ended before the head");
    const next = new Uint8Array(buf.byteLength + value.byteLength);
    next.set(buf);
    next.set(value, buf.byteLength);
    buf = next;
  }
}

/** A Set-Cookie of the service, held to the tunnel's path and the host it is served from. */
export function scopeCookie(cookie: string, prefix: string): string {
  const [pair = "", ...attrs] = cookie.split(";");
  let path = "/";
  const kept: string[] = [];
  for (const a of attrs) {
    const [name = "", ...v] = a.trim().split("=");
    const key = name.toLowerCase();
    if (key === "domain") continue;
    if (key === "path") {
      path = v.join("=").trim() || "/";
      continue;
    }
    kept.push(a.trim());
  }
  const scoped = path.startsWith("/") ? `${prefix}${path}` : `${prefix}/`;
  return [pair.trim(), `Path=${scoped}`, ...kept].join("; ");
}

/** A redirect of the service to its own absolute path stays inside the tunnel. */
export function rewriteLocation(location: string, prefix: string, port: number): string {
  if (location.startsWith("/") && !location.startsWith("//")) return prefix + location;
  for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
    if (location === origin || location.startsWith(`${origin}/`)) {
      return prefix + (location.slice(origin.length) || "/");
    }
  }
  return location;
}

/**
 * The answer to a CORS preflight on a preview address (the sandboxed page's
 * non-simple requests are cross-origin), given by the relay: the service
 * would not know the page's opaque origin. Null when `req` is not one.
 */
export function preflight(req: Request): Response | null {
  const method = req.headers.get("access-control-request-method");
  if (req.method !== "OPTIONS" || !method) return null;
  const headers = req.headers.get("access-control-request-headers");
  return new Response(null, {
    status: 204,
    headers: {
      "access-control-allow-origin": "*",
      "access-control-allow-methods": method.slice(0, 100),
      ...(headers ? { "access-control-allow-headers": headers.slice(0, 2000) } : {}),
      "access-control-max-age": "600",
    },
  });
}

/** A tunnel error: a short page for a browser, the API's JSON for anything else. */
export function failure(req: Request, f: TunnelFailure, sandbox: boolean): Response {
  const csp: Record<string, string> = sandbox ? { "content-security-policy": TUNNEL_CSP } : {};
  if (prefersHtml(req.headers.get("accept"))) {
    const esc = f.message.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
    const title = f.status === 502
      ? "Nothing answered"
      : f.status === 503
      ? "Runner unavailable"
      : f.status === 400
      ? "Bad tunnel address"
      : "Preview closed";
    const page = `<!doctype html><meta charset="utf-8"><title>Tunnel: ${f.status}</title>` +
      `<body style="font-family:system-ui;max-width:40rem;margin:3rem auto;padding:0 1rem">` +
      `<h1>${title}</h1><p>${esc}</p>` +
      `<p><small>baton tunnel · ${f.code}</small></p></body>`;
    return new Response(page, {
      status: f.status,
      headers: { "content-type": "text/html; charset=utf-8", ...csp },
    });
  }
  return Response.json({ error: { code: f.code, message: f.message } }, {
    status: f.status,
    headers: csp,
  });
}
