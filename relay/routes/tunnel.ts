/**
 * The HTTP tunnel: `/api/tunnel/runner/{runnerId}/{port}/*` (and the legacy
 * `/api/tunnel/{sessionId}/{port}/*`) forwarded to `127.0.0.1:{port}` on the
 * runner over one stream of its tunnel channel (shared/streams.ts). Bodies
 * stream both ways under the stream's credit, so the relay holds at most a
 * window per direction whatever the size, and a client that stops reading
 * stops the service's stream, nothing else.
 *
 * The owner's browser session only: an API key is refused, the caller's
 * cookie and key headers never reach the service, and every answer carries
 * a CSP sandbox (no `allow-same-origin`), so a previewed page runs in an
 * opaque origin: it cannot read the relay's cookies or call `/api` as the
 * user (docs/security.md, "Tunnel isolation").
 *
 * @module
 */
import { type Context, Hono } from "hono";
import type { MuxStream } from "../../shared/streams.ts";
import {
  MAX_TUNNEL_HEAD_BYTES,
  TUNNEL_STRIPPED_REQUEST_HEADERS,
  type TunnelRequestHead,
  type TunnelResponseHead,
} from "../../shared/tunnel_api.ts";
import type { Auth } from "../auth.ts";
import { HttpError, prefersHtml, type RelayEnv } from "../_http.ts";
import { notFound } from "../errors.ts";
import type { Store } from "../store/mod.ts";
import type { TunnelLink, TunnelRegistry } from "../tunnel_link.ts";

/** The CSP every tunnelled answer carries: scripts and forms run, in an opaque origin. */
export const TUNNEL_CSP = "sandbox allow-scripts allow-forms allow-popups";

/** Response headers of the service that would act on the relay's own origin. */
const DROPPED_RESPONSE_HEADERS = new Set([
  "strict-transport-security",
  "clear-site-data",
  "service-worker-allowed",
  "alt-svc",
  "set-cookie",
  "content-length",
]);

/** Options of {@linkcode tunnelRoutes}. */
export interface TunnelRoutesOptions {
  auth: Pick<Auth, "authenticate">;
  tunnels: TunnelRegistry;
  store: Pick<Store, "sessions">;
  originAllowed: (req: Request) => boolean;
}

/** The tunnel routes, mounted at `/api/tunnel` (before the API's key-or-cookie check). */
export function tunnelRoutes(o: TunnelRoutesOptions): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const userOf = async (c: Context<RelayEnv>): Promise<string> => {
    const h = c.req.raw.headers;
    // A service's own Basic or Bearer auth passes the check (and is stripped);
    // a baton key is refused, as the spec has the tunnel take cookies only.
    const bearer = h.get("authorization")?.match(/^\s*bearer\s+(\S+)/i)?.[1] ?? "";
    if (h.has("x-api-key") || /^(bk|brt)_/.test(bearer)) {
      throw new HttpError(
        401,
        "cookie_required",
        "The tunnel takes the browser session cookie only, not API keys",
      );
    }
    const cookieOnly = new Headers(h);
    cookieOnly.delete("authorization");
    const p = await o.auth.authenticate(cookieOnly);
    if (!p || p.via !== "cookie") throw new HttpError(401, "unauthorized", "Sign in first");
    const m = c.req.method;
    if (m !== "GET" && m !== "HEAD" && !o.originAllowed(c.req.raw)) {
      throw new HttpError(403, "bad_origin", "Request origin is not allowed");
    }
    return p.userId;
  };

  app.all("/runner/:runnerId/:port/*", async (c) => {
    const userId = await userOf(c);
    const runnerId = c.req.param("runnerId");
    const link = o.tunnels.connected(userId, runnerId);
    return await proxy(c, link, `/api/tunnel/runner/${runnerId}`);
  });
  app.all("/:sessionId/:port/*", async (c) => {
    const userId = await userOf(c);
    const sessionId = c.req.param("sessionId");
    const session = o.store.sessions.getOwned(userId, sessionId);
    if (!session) throw notFound("Session");
    const link = o.tunnels.connected(userId, session.runnerId);
    return await proxy(c, link, `/api/tunnel/${sessionId}`);
  });
  return app;
}

/** Forwards the request on a new stream of `link`; `base` is the prefix before `/{port}`. */
async function proxy(c: Context<RelayEnv>, link: TunnelLink, base: string): Promise<Response> {
  const portText = c.req.param("port") ?? "";
  const port = /^\d{1,5}$/.test(portText) ? Number(portText) : 0;
  if (port < 1 || port > 65535) {
    throw new HttpError(400, "bad_port", `Port must be 1 to 65535: '${portText.slice(0, 20)}'`);
  }
  const prefix = `${base}/${port}`;
  const url = new URL(c.req.url);
  // Relative links of the service's pages need the trailing slash.
  if (url.pathname === prefix) return c.redirect(`${prefix}/${url.search}`, 308);
  // The raw path (percent-encoding kept), after the prefix.
  const path = (url.pathname.slice(prefix.length) || "/") + url.search;
  const req = c.req.raw;
  const headers: [string, string][] = [];
  for (const [k, v] of req.headers) {
    if (!TUNNEL_STRIPPED_REQUEST_HEADERS.has(k)) headers.push([k, v]);
  }
  const head: TunnelRequestHead = { kind: "http", method: req.method, port, path, headers };
  let stream: MuxStream;
  try {
    stream = link.mux.open(new TextEncoder().encode(JSON.stringify(head)));
  } catch (err) {
    if (err instanceof RangeError) {
      throw new HttpError(503, "tunnel_busy", `The runner's tunnel is busy: ${err.message}`);
    }
    throw new HttpError(503, "runner_offline", "Runner is not connected");
  }
  // The request body goes up as the service reads it (credit), never whole.
  if (req.body) req.body.pipeTo(stream.writable).catch(() => stream.reset("request aborted"));
  else stream.writable.close().catch(() => {});

  const reader = stream.readable.getReader();
  let answer: { head: TunnelResponseHead; rest: Uint8Array };
  try {
    answer = await readHead(reader);
  } catch {
    stream.reset("bad_head");
    return failure(
      c,
      502,
      "tunnel_failed",
      "The runner's tunnel closed before the service answered",
    );
  }
  const h = answer.head;
  if ("error" in h) {
    reader.cancel().catch(() => {});
    const status = h.error.code === "bad_target" ? 400 : 502;
    const message = h.error.code === "port_closed"
      ? `Nothing is listening on port ${port} on this runner`
      : String(h.error.message).slice(0, 500);
    return failure(c, status, h.error.code, message);
  }
  if (!Number.isInteger(h.status) || h.status < 200 || h.status > 599) {
    reader.cancel().catch(() => {});
    return failure(c, 502, "tunnel_failed", `The service answered an unusable status: ${h.status}`);
  }
  const out = new Headers();
  for (const [k, v] of Array.isArray(h.headers) ? h.headers : []) {
    const name = String(k).toLowerCase();
    try {
      if (name === "set-cookie") out.append("set-cookie", scopeCookie(String(v), prefix));
      else if (name === "location") out.set("location", rewriteLocation(String(v), prefix, port));
      else if (!DROPPED_RESPONSE_HEADERS.has(name)) out.append(name, String(v));
    } catch { /* an invalid header is dropped */ }
  }
  // The service's own CSP still applies; this one adds the sandbox.
  out.append("content-security-policy", TUNNEL_CSP);
  const noBody = req.method === "HEAD" || [204, 205, 304].includes(h.status);
  if (noBody) {
    reader.cancel().catch(() => {});
    return new Response(null, { status: h.status, headers: out });
  }
  return new Response(bodyOf(reader, answer.rest, stream), { status: h.status, headers: out });
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
async function readHead(
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<{ head: TunnelResponseHead; rest: Uint8Array }> {
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

/** A Set-Cookie of the service, held to the tunnel's path and the relay's host. */
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

/** A tunnel error: a short page for a browser, the API's JSON for anything else. */
function failure(c: Context<RelayEnv>, status: 400 | 502, code: string, message: string): Response {
  if (prefersHtml(c.req.header("accept") ?? null)) {
    const esc = message.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
    const page = `<!doctype html><meta charset="utf-8"><title>Tunnel: ${status}</title>` +
      `<body style="font-family:system-ui;max-width:40rem;margin:3rem auto;padding:0 1rem">` +
      `<h1>${status === 502 ? "Nothing answered" : "Bad tunnel address"}</h1><p>${esc}</p>` +
      `<p><small>baton tunnel · ${code}</small></p></body>`;
    return new Response(page, {
      status,
      headers: {
        "content-type": "text/html; charset=utf-8",
        "content-security-policy": TUNNEL_CSP,
      },
    });
  }
  return c.json({ error: { code, message } }, status);
}
