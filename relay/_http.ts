import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import type { Principal } from "./auth.ts";
import { jsonTooDeep, JsonTooDeepError, MAX_JSON_DEPTH, parseJson } from "../shared/json.ts";
import { httpErrorOf, RateLimited, type RelayError } from "./errors.ts";

/**
 * An error of the HTTP edge itself (media type, body size, authentication,
 * origin, rate limits): `{error: {code, message}}` with `status`. Domain code
 * throws RelayError instead (see errors.ts).
 */
export class HttpError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** Writes the JSON error body. */
export function errorResponse(
  c: Context,
  status: ContentfulStatusCode,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): Response {
  for (const [k, v] of Object.entries(headers)) c.header(k, v);
  return c.json({ error: { code, message } }, status);
}

/** The response for a domain error, through the one mapping of kinds to statuses. */
export function relayErrorResponse(c: Context, err: RelayError): Response {
  const { status, body } = httpErrorOf(err);
  if (err instanceof RateLimited) c.header("retry-after", String(err.retryAfterSeconds));
  return c.json(body, status);
}

/** Hono variables the relay's middleware sets. */
export type RelayEnv = {
  Variables: {
    principal: Principal;
    /** Whether the principal's key or browser session still holds (see readJson). */
    principalLive?: () => Promise<boolean>;
  };
};

/** Largest JSON body any API route accepts. */
export const MAX_JSON_BODY = 1024 * 1024;

/** Reads and validates a JSON body; every failure is a 4xx HttpError. */
export async function readJson<T extends z.ZodType>(
  c: Context<RelayEnv>,
  schema: T,
): Promise<z.infer<T>> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/json\b/i.test(type)) {
    throw new HttpError(415, "unsupported_media_type", "Content-Type must be application/json");
  }
  const buf = await readBody(c.req.raw, MAX_JSON_BODY);
  // The caller was authenticated when its headers came in; the body may come
  // much later. A key revoked (or a sign-out) meanwhile must not let it act.
  const live = c.get("principalLive");
  if (live && !await live()) {
    throw new HttpError(401, "unauthorized", "API key revoked or signed out during the request");
  }
  const body = parseJsonBody(buf);
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
    throw new HttpError(
      400,
      "invalid_body",
      `Invalid body: ${where}${issue?.message ?? "invalid"}`,
    );
  }
  return parsed.data;
}

/**
 * A JSON body read by {@linkcode readBody}, parsed with the nesting cap of
 * shared/json.ts: 400 `bad_json` (not UTF-8 JSON) or `too_deep`. Every JSON
 * body of the HTTP API goes through here (readJson) or is checked with
 * {@linkcode checkJsonDepth} when another parser takes it.
 */
export function parseJsonBody(buf: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(buf);
  } catch {
    throw new HttpError(400, "bad_json", "Body is not valid JSON");
  }
  try {
    return parseJson(text);
  } catch (err) {
    if (err instanceof JsonTooDeepError) throw tooDeep();
    throw new HttpError(400, "bad_json", "Body is not valid JSON");
  }
}

/** 400 `too_deep` for a body another parser (better-auth's) will read, when it nests too deep. */
export function checkJsonDepth(buf: Uint8Array): void {
  if (jsonTooDeep(new TextDecoder().decode(buf))) throw tooDeep();
}

function tooDeep(): HttpError {
  return new HttpError(
    400,
    "too_deep",
    `Body is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`,
  );
}

/**
 * A request's body, read up to `max` bytes: past that (declared in
 * Content-Length or counted while a chunked body streams in) it stops
 * reading, cancels the stream and throws 413 `body_too_large`, so a big body
 * never sits in memory whole.
 */
export async function readBody(req: Request, max: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > max) throw tooLarge(max);
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw tooLarge(max);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

function tooLarge(max: number): HttpError {
  return new HttpError(413, "body_too_large", `Body is larger than ${max} bytes`);
}

/** The authenticated caller (set by the auth middleware). */
export function principal(c: Context<RelayEnv>): Principal {
  return c.get("principal");
}

/**
 * The IP address in one X-Forwarded-For entry, without the port some proxies
 * add (`203.0.113.9:5123`, `[2001:db8::1]:443`); null when it is not an
 * address (the peer's address is used then).
 */
export function forwardedAddress(entry: string): string | null {
  const e = entry.trim();
  const v6 = /^\[([0-9a-fA-F:.]+)\](?::\d+)?$/.exec(e);
  if (v6) return v6[1]!;
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3})(?::\d+)?$/.exec(e);
  if (v4) return v4[1]!;
  // An IPv6 address has at least two colons; one is a host and a port.
  if (/^[0-9a-fA-F:.]+$/.test(e) && e.split(":").length > 2) return e;
  return null;
}

/** The peer address of the request (or the last X-Forwarded-For hop behind a trusted proxy). */
export function clientIp(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    // The proxy appends the address it saw: the last entry is the only one a
    // client cannot forge (earlier ones are whatever the client sent).
    const fwd = forwardedAddress(c.req.header("x-forwarded-for")?.split(",").pop() ?? "");
    if (fwd) return fwd;
  }
  const info = c.env as { remoteAddr?: { hostname?: string } } | undefined;
  return info?.remoteAddr?.hostname ?? "unknown";
}

/**
 * Whether an Accept header asks for a web page: `text/html` is listed (with
 * a non-zero weight) and weighs more than `application/json` when both are.
 * Browsers list it when they navigate; fetch(), curl and API clients do not.
 */
export function prefersHtml(accept: string | null): boolean {
  const weights = new Map<string, number>();
  for (const part of (accept ?? "").split(",")) {
    const [type, ...params] = part.split(";").map((p) => p.trim().toLowerCase());
    if (!type) continue;
    const q = params.find((p) => p.startsWith("q="));
    const weight = q ? Number(q.slice(2)) : 1;
    weights.set(type, Number.isFinite(weight) ? weight : 0);
  }
  const html = weights.get("text/html") ?? 0;
  return html > 0 && html > (weights.get("application/json") ?? 0);
}
