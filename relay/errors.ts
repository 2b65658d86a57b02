import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** An error that becomes `{error: {code, message}}` with `status` at the HTTP edge. */
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

/** 404 with the same words for a missing and a foreign id. */
export function notFound(what: string): HttpError {
  return new HttpError(404, "not_found", `${what} not found`);
}

export function badRequest(message: string, code = "bad_request"): HttpError {
  return new HttpError(400, code, message);
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
