/**
 * What the route modules share to state their contract: {@linkcode routeDoc}
 * (a `describeRoute` middleware with the route's auth, request schema and
 * error statuses, from which `GET /api/openapi.json` is generated),
 * {@linkcode requestSchema} (ties a zod request schema to its type in
 * shared/api.ts) and {@linkcode openApiRoute} (serves the document).
 *
 * hono-openapi annotates the existing Hono routes in place; its `validator()`
 * is not used: `readJson` (../_http.ts) keeps validating, since it enforces
 * the byte limit while the body arrives, answers 415, and refuses a key
 * revoked meanwhile.
 *
 * @module
 */
import type { Env, Handler, Hono, MiddlewareHandler } from "hono";
import { describeRoute, type DescribeRouteOptions, generateSpecs, resolver } from "hono-openapi";
import { z } from "zod";
import type { ErrorResponse } from "../../shared/api.ts";
import denoJson from "../../deno.json" with { type: "json" };

/** `true` only when A and B are the same type (not merely assignable one way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true
  : false;

/**
 * Ties a request schema to its type in shared/api.ts:
 * `requestSchema<CreateKeyRequest>()(z.object({...}))` compiles only when the
 * JSON the schema accepts is exactly that type, so a field added, dropped or
 * changed on either side fails `deno task check`.
 */
export function requestSchema<T>() {
  return <S extends z.ZodType>(
    schema: Same<z.input<S>, T> extends true ? S : { "accepts exactly its shared/api.ts type": T },
  ): S => schema as S;
}

/** One way to authenticate: a scheme of {@linkcode SECURITY_SCHEMES} (no scopes). */
type SecurityRequirement = Record<string, string[]>;

/** The security schemes of the document, by the names {@linkcode SECURITY} uses. */
const SECURITY_SCHEMES = {
  cookie: {
    type: "apiKey",
    in: "cookie",
    name: "baton.session_token",
    description: "The browser session cookie better-auth sets at sign-in " +
      "(`__Secure-baton.session_token` when the base URL is https). " +
      "A write from a foreign Origin is refused (403 `bad_origin`).",
  },
  apiKey: {
    type: "apiKey",
    in: "header",
    name: "x-api-key",
    description: "An API key (`bk_…`) or runner token (`brt_…`); see `POST /api/keys`.",
  },
  bearer: {
    type: "http",
    scheme: "bearer",
    description: "The same key as `x-api-key`, sent as `Authorization: Bearer <key>`.",
  },
  webhookSignature: {
    type: "apiKey",
    in: "header",
    name: "x-webhook-signature",
    description: "The webhook's HMAC signature, in one of four schemes (baton enhanced with " +
      "`x-webhook-timestamp` and `x-webhook-nonce`, baton legacy, GitHub's " +
      "`x-hub-signature-256`, Standard Webhooks' `webhook-signature`); see docs/webhooks.md.",
  },
  metricsToken: {
    type: "http",
    scheme: "bearer",
    description: "`BATON_METRICS_TOKEN`, for `GET /metrics` when it is set (without it, " +
      "loopback callers need nothing and others are refused); see docs/operations.md.",
  },
} as const;

/** Who may call a route, as OpenAPI security requirements (any one of them). */
export const SECURITY: Record<
  "principal" | "cookie" | "key" | "signature" | "metrics" | "none",
  SecurityRequirement[]
> = {
  /** The session cookie, an API key or a runner token (`requirePrincipal`). */
  principal: [{ cookie: [] }, { apiKey: [] }, { bearer: [] }],
  /** The session cookie only: a key is refused with 403 `cookie_required`. */
  cookie: [{ cookie: [] }],
  /** An API key or runner token; a cookie is refused. */
  key: [{ apiKey: [] }, { bearer: [] }],
  /** The webhook's signature; no cookie or key. */
  signature: [{ webhookSignature: [] }],
  /** The metrics token when one is set; else a loopback caller (relay/operations.ts). */
  metrics: [{ metricsToken: [] }, {}],
  /** Anyone. */
  none: [],
};

/** A status the relay's `{error: {code, message}}` body comes with. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 500 | 502 | 503 | 504;

/** The statuses of a route that asks a runner (spawn, input, models, ...) and waits. */
export const RUNNER_ERRORS = {
  502: "`runner_unreachable` (it went away before answering), `bad_runner_answer`, " +
    "or the runner's own code (`runner_stopping`, `input_failed`, `trigger_failed`, ...)",
  503: "`runner_offline`: the runner is not connected",
  504: "`runner_timeout`: no answer in time",
} as const satisfies Partial<Record<ErrorStatus, string>>;

/** `{error: {code, message}}`, the one error body (a component of the document). */
const ErrorBody = z.object({
  error: z.object({
    code: z.string().meta({ description: "Stable machine-readable code, e.g. `not_found`" }),
    message: z.string().meta({ description: "For people; may change" }),
  }),
}) satisfies z.ZodType<ErrorResponse>;

const ERROR_REF = { $ref: "#/components/schemas/Error" };

/** {@linkcode ErrorBody} as JSON Schema (OpenAPI 3.1's dialect is the default, so no `$schema`). */
function errorSchema(): Record<string, unknown> {
  const { $schema: _, ...schema } = z.toJSONSchema(ErrorBody);
  return schema;
}

/** What a route states about itself. */
export interface RouteDoc {
  tag:
    | "Health"
    | "Accounts"
    | "Keys"
    | "Runners"
    | "Sessions"
    | "Triggers"
    | "Settings"
    | "Push"
    | "Webhooks";
  summary: string;
  description?: string;
  auth: keyof typeof SECURITY;
  /** The schema `readJson` validates the body with (adds 400, 413 and 415). */
  body?: z.ZodType;
  /** A body described by hand instead (the webhook fire route, which takes any JSON object). */
  requestBody?: DescribeRouteOptions["requestBody"];
  /** Query parameters. */
  query?: { name: string; description: string; schema: Record<string, unknown> }[];
  /** The success answer: its description (its shape is in shared/api.ts), and 201 when created. */
  ok: string | { status: 201; description: string };
  /** The statuses this route answers beyond those of its auth and body, each with its codes. */
  errors?: Partial<Record<ErrorStatus, string>>;
}

/** The `describeRoute` middleware of a route: its auth, body, answers and error statuses. */
export function routeDoc(doc: RouteDoc): MiddlewareHandler {
  const errors: Partial<Record<ErrorStatus, string>> = {};
  const add = (status: ErrorStatus, codes: string) => {
    errors[status] = errors[status] ? `${errors[status]}; ${codes}` : codes;
  };
  if (doc.auth === "cookie") {
    add(401, "`unauthorized`: no session cookie");
    add(403, "`cookie_required`: an API key or runner token cannot call this");
  }
  if (doc.auth === "principal" || doc.auth === "key") {
    add(401, "`unauthorized`: no credentials, or a wrong, expired or revoked key");
    // scopes.ts refuses it before any route runs, so every keyed route may answer it.
    add(
      403,
      "`forbidden_scope`: the key's scope (read-only, bound to a runner, a runner token) " +
        "does not reach this",
    );
  }
  if (doc.body) {
    add(
      400,
      "`bad_json` (not JSON), `too_deep` (JSON nested over 64 levels), `invalid_body` (the " +
        "first offending field is named)",
    );
    add(413, "`body_too_large`: over 1 MiB");
    add(415, "`unsupported_media_type`: Content-Type is not application/json");
  }
  for (const [status, codes] of Object.entries(doc.errors ?? {})) {
    add(Number(status) as ErrorStatus, codes);
  }
  add(500, "`internal`: a bug (logged)");
  const ok = typeof doc.ok === "string" ? { status: 200, description: doc.ok } : doc.ok;
  const responses: NonNullable<DescribeRouteOptions["responses"]> = {
    [ok.status]: { description: ok.description },
  };
  for (const [status, codes] of Object.entries(errors)) {
    responses[status] = {
      description: codes,
      content: { "application/json": { schema: ERROR_REF } },
    };
  }
  const requestBody = doc.body
    ? { required: true, content: { "application/json": { schema: resolver(doc.body) } } }
    : doc.requestBody;
  return describeRoute({
    tags: [doc.tag],
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    security: SECURITY[doc.auth].map((r) => ({ ...r })),
    ...(doc.query
      ? { parameters: doc.query.map((q) => ({ in: "query", required: false, ...q })) }
      : {}),
    ...(requestBody ? { requestBody } : {}),
    responses,
  });
}

/** What the document says about itself and what it leaves out. */
const DESCRIPTION = `The HTTP API of a baton relay, generated from the same zod schemas that \
validate the request bodies. Prose, examples and every error code: docs/api.md.

Every error the relay itself answers has the body \`{"error": {"code", "message"}}\`. Left out: \
better-auth's \`/api/auth/*\` (sign-up, sign-in, sign-out, sessions, change-password), a proxy \
whose answers and errors are better-auth's own (see docs/api.md), the WebSocket channels \
\`/_runner\` and \`/_viewer\` (docs/protocol.md), and the web client's pages and files.`;

/**
 * `GET /api/openapi.json`: the OpenAPI 3.1 document of every route of `app`
 * described with {@linkcode routeDoc}, built on the first request (once every
 * route is registered) and kept. It holds what the source holds (routes,
 * schemas, the relay's version), nothing of the relay's data or its address.
 */
export function openApiRoute<E extends Env>(app: Hono<E>): Handler<E> {
  let doc: Promise<unknown> | null = null;
  const build = async () => {
    const spec = await generateSpecs(app, {
      documentation: {
        openapi: "3.1.0",
        info: { title: "baton relay", version: denoJson.version, description: DESCRIPTION },
        components: {
          securitySchemes: SECURITY_SCHEMES,
          schemas: { Error: errorSchema() },
        },
      },
    });
    return withOriginCheck(spec);
  };
  return async (c) => {
    doc ??= build().catch((err) => {
      doc = null;
      throw err;
    });
    return c.json(await doc);
  };
}

/**
 * Adds 403 `bad_origin` to every write a cookie may make: `requirePrincipal`
 * refuses it from a foreign Origin, whatever the route, so it is stated once
 * here rather than on each route (which does not know its method).
 */
function withOriginCheck<T extends { paths: Record<string, Record<string, unknown>> }>(
  spec: T,
): T {
  const codes = "`bad_origin`: a browser (cookie) write from a foreign Origin";
  for (const item of Object.values(spec.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const o = op as {
        security?: Record<string, unknown>[];
        responses?: Record<string, { description: string; content?: unknown }>;
      };
      if (method === "get" || method === "head" || !o.responses) continue;
      if (!o.security?.some((s) => "cookie" in s)) continue;
      const had = o.responses["403"];
      o.responses["403"] = had ? { ...had, description: `${codes}; ${had.description}` } : {
        description: codes,
        content: { "application/json": { schema: ERROR_REF } },
      };
    }
  }
  return spec;
}
