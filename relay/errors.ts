/**
 * Errors by meaning. Domain code (the hub's services, the runner and viewer
 * links, triggers, webhooks) throws {@linkcode RelayError}; only the edges turn
 * one into something a client sees: {@linkcode httpErrorOf} for the HTTP API,
 * the viewer socket's error frames, the runner's call results.
 *
 * @module
 */

/** What went wrong, as a caller would react to it. */
export type ErrorKind =
  /** The request itself is wrong (a bad field, an unknown type). */
  | "invalid"
  /** The caller did not prove who it is (a webhook's signature). */
  | "unauthorized"
  /** The caller is known but may not do this here (an answer without collab mode). */
  | "forbidden"
  /** No such thing, or not the caller's (both answer alike). */
  | "not_found"
  /** The thing is in a state that refuses the request (a session that ended). */
  | "conflict"
  /** The relay's own setup cannot serve it (a webhook without a runner). */
  | "misconfigured"
  /** The runner refused, failed or answered something malformed. */
  | "rejected"
  /** The runner went away while a request waited for its answer (it may have acted). */
  | "unreachable"
  /** The runner is not connected: nothing was sent. */
  | "offline"
  /** Nothing answered in time. */
  | "timeout"
  /** Too many requests; {@linkcode RateLimited} says when to try again. */
  | "rate_limited";

/**
 * The HTTP status of each kind: the one mapping from meaning to status. Every
 * error code the API answered before errors had kinds keeps its status
 * through it (`session_ended` 409, `runner_offline` 503, `runner_unreachable`
 * 502, `runner_timeout` 504, `no_runner` 500, ...).
 */
export const HTTP_STATUS = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  misconfigured: 500,
  rejected: 502,
  unreachable: 502,
  offline: 503,
  timeout: 504,
  rate_limited: 429,
} as const satisfies Record<ErrorKind, number>;

/** A status {@linkcode HTTP_STATUS} gives. */
export type RelayErrorStatus = (typeof HTTP_STATUS)[ErrorKind];

/** An error a client may see: its kind decides the status, `code` and the message are shown. */
export class RelayError extends Error {
  constructor(
    readonly kind: ErrorKind,
    /** Stable machine-readable code, e.g. `session_ended`. */
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "RelayError";
  }
}

/** Too many requests: the answer carries `Retry-After`. */
export class RateLimited extends RelayError {
  constructor(code: string, message: string, readonly retryAfterSeconds: number) {
    super("rate_limited", code, message);
    this.name = "RateLimited";
  }
}

/** The status and `{error: {code, message}}` body a RelayError answers over HTTP. */
export function httpErrorOf(err: RelayError): {
  status: RelayErrorStatus;
  body: { error: { code: string; message: string } };
} {
  return {
    status: HTTP_STATUS[err.kind],
    body: { error: { code: err.code, message: err.message } },
  };
}

/** Same words for a missing and a foreign id. */
export function notFound(what: string): RelayError {
  return new RelayError("not_found", "not_found", `${what} not found`);
}

export function invalid(message: string, code = "bad_request"): RelayError {
  return new RelayError("invalid", code, message);
}

export function conflict(code: string, message: string): RelayError {
  return new RelayError("conflict", code, message);
}

/** A session that ended takes no input, triggers or subscriptions. */
export function sessionEnded(): RelayError {
  return conflict("session_ended", "Session has ended");
}

/** `what` is not connected (the runner, or "The webhook's runner"). */
export function offline(what = "Runner"): RelayError {
  return new RelayError("offline", "runner_offline", `${what} is not connected`);
}

export function rejected(code: string, message: string): RelayError {
  return new RelayError("rejected", code, message);
}

export function timeout(code: string, message: string): RelayError {
  return new RelayError("timeout", code, message);
}
