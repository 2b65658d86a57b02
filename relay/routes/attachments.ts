/**
 * Attachments over HTTP: the upload into a session (behind the usual
 * principal and scope checks) and the download, which authenticates itself:
 * besides a cookie or a key header it takes the key as `?apiKey=` (so an
 * `<img>` or a link can carry it), and it is the only route that does.
 *
 * What a download may do in a browser is in docs/security.md ("Attachment
 * MIME safety"): only types on {@linkcode INLINE_TYPES} are shown inline;
 * anything else is served as a download of `application/octet-stream`, and
 * every answer is sandboxed by its Content-Security-Policy.
 *
 * @module
 */
import { Hono } from "hono";
import type { UploadAttachmentsResponse } from "../../shared/attachments_api.ts";
import type { Auth, Principal } from "../auth.ts";
import { type Attachments, maxUploadBytes, NoFiles, UploadTooLarge } from "../attachments.ts";
import { multipartBoundary, MultipartError } from "../_multipart.ts";
import { HttpError, principal, type RelayEnv } from "../_http.ts";
import type { SessionService } from "../session_service.ts";
import { routeDoc } from "./_openapi.ts";

/**
 * Types a browser shows without running anything of the file: raster
 * images, plain text, PDF (in the browser's own isolated viewer), audio and
 * video. Not SVG (it carries script), not HTML, XML or JavaScript.
 */
export const INLINE_TYPES = new Set([
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "image/avif",
  "image/bmp",
  "text/plain",
  "application/pdf",
  "audio/mpeg",
  "audio/ogg",
  "audio/wav",
  "audio/webm",
  "video/mp4",
  "video/webm",
  "video/ogg",
]);

/**
 * The policy of every download but a PDF's: a sandboxed document (no
 * script, no forms, an opaque origin) that loads nothing. Chromium's PDF
 * viewer does not open in a sandboxed document; it is isolated from the
 * page's origin already.
 */
const SANDBOX_CSP =
  "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'";

/**
 * `Content-Disposition` with the name as an ASCII fallback (`filename=`) and
 * exactly (`filename*=`, RFC 6266 and RFC 5987).
 */
export function contentDisposition(kind: "inline" | "attachment", filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, "_").replace(/["\\]/g, "_");
  const exact = encodeURIComponent(filename).replace(
    /['()*]/g,
    (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${exact}`;
}

/** `POST /api/sessions/{sessionId}/attachments`, mounted under `/api/sessions`. */
export function attachmentUploadRoutes(
  attachments: Attachments,
  sessions: Pick<SessionService, "owned">,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const { policy } = attachments;
  const doc = routeDoc({
    tag: "Sessions",
    summary: "Upload files into a session (multipart/form-data, field `file` or `files`)",
    description: `Each file at most ${policy.maxFileBytes} bytes (BATON_ATTACHMENT_MAX_BYTES), ` +
      `at most ${policy.maxFiles} files per request. All or nothing: a refused upload stores ` +
      "none of its files.",
    auth: "principal",
    requestBody: {
      required: true,
      content: {
        "multipart/form-data": {
          schema: {
            type: "object",
            properties: {
              file: { type: "string", format: "binary" },
              files: { type: "array", items: { type: "string", format: "binary" } },
            },
          },
        },
      },
    },
    ok: "`{attachments: [{attachmentId, filename, mimeType, size, expiresAt}]}`",
    errors: {
      400: "`no_files` (no file in `file` or `files`), `bad_multipart` (a malformed body)",
      404: "`not_found`: no such session, or not the caller's",
      413: "`body_too_large` (Content-Length over the request cap), `file_too_large` (a file " +
        "over the cap, too many files, a form field over 64 KiB), `quota_exceeded` (the " +
        "caller's unexpired attachments would pass BATON_ATTACHMENT_USER_MAX_MB)",
      415: "`unsupported_media_type`: not multipart/form-data with a boundary",
    },
  });
  app.post("/:id/attachments", doc, async (c) => {
    const { userId } = principal(c);
    const sessionId = c.req.param("id");
    await sessions.owned(userId, sessionId);
    const boundary = multipartBoundary(c.req.header("content-type") ?? null);
    if (!boundary) {
      throw new HttpError(
        415,
        "unsupported_media_type",
        "Content-Type must be multipart/form-data with a boundary",
      );
    }
    const max = maxUploadBytes(policy);
    if (Number(c.req.header("content-length") ?? "0") > max) {
      throw new HttpError(413, "body_too_large", `Body is larger than ${max} bytes`);
    }
    const body = c.req.raw.body;
    if (!body) throw new HttpError(400, "no_files", new NoFiles().message);
    try {
      const list = await attachments.upload(userId, sessionId, body, boundary);
      return c.json({ attachments: list } satisfies UploadAttachmentsResponse);
    } catch (err) {
      if (err instanceof UploadTooLarge) throw new HttpError(413, err.code, err.message);
      if (err instanceof NoFiles) throw new HttpError(400, "no_files", err.message);
      if (err instanceof MultipartError) throw new HttpError(400, "bad_multipart", err.message);
      throw err;
    }
  });
  return app;
}

/** `GET /api/attachments/{attachmentId}`, mounted under `/api/attachments` before requirePrincipal. */
export function attachmentDownloadRoutes(
  attachments: Attachments,
  auth: Pick<Auth, "authenticate" | "principalFromKey">,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const doc = routeDoc({
    tag: "Sessions",
    summary: "Download an attachment",
    description: "Authenticated by the cookie, `x-api-key`, `Authorization: Bearer` or the " +
      "`apiKey` query parameter (this route only). Types a browser could run (HTML, SVG, XML, " +
      "JavaScript, anything not shown inline) come as `attachment` of " +
      "`application/octet-stream`; see docs/security.md.",
    auth: "principal",
    query: [{
      name: "apiKey",
      description: "An API key or runner token, when no cookie or key header is sent",
      schema: { type: "string" },
    }],
    ok: "The file's bytes, with `Content-Type`, `Content-Disposition`, `X-Attachment-Id`, " +
      "`X-Attachment-Filename` (percent-encoded)",
    errors: {
      404: "`not_found`: no such attachment, expired, its session deleted, or not the caller's",
    },
  });
  app.get("/:attachmentId", doc, async (c) => {
    let p: Principal | null = await auth.authenticate(c.req.raw.headers);
    const queryKey = c.req.query("apiKey");
    if (!p && queryKey) p = await auth.principalFromKey(queryKey);
    if (!p) throw new HttpError(401, "unauthorized", "Sign in or send an API key");
    const a = await attachments.get(p, c.req.param("attachmentId"));
    // A HEAD answer has no body: a file opened for it would stay open.
    const head = c.req.method === "HEAD";
    let file: Deno.FsFile | null = null;
    try {
      if (head) await Deno.stat(attachments.blobPath(a.sha256));
      else file = await Deno.open(attachments.blobPath(a.sha256));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        throw new HttpError(404, "not_found", "Attachment not found");
      }
      throw err;
    }
    const inline = INLINE_TYPES.has(a.mimeType);
    const headers: Record<string, string> = {
      "content-type": inline ? a.mimeType : "application/octet-stream",
      "content-length": String(a.size),
      "content-disposition": contentDisposition(inline ? "inline" : "attachment", a.filename),
      "x-attachment-id": a.attachmentId,
      "x-attachment-filename": encodeURIComponent(a.filename),
      "x-content-type-options": "nosniff",
      "cross-origin-resource-policy": "same-origin",
      // A key in the address must not stay in a cache.
      "cache-control": queryKey ? "private, no-store" : "private, max-age=3600",
    };
    if (a.mimeType !== "application/pdf") headers["content-security-policy"] = SANDBOX_CSP;
    return file ? c.body(file.readable, 200, headers) : c.body(null, 200, headers);
  });
  return app;
}
