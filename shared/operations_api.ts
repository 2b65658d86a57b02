/**
 * Wire types of a relay node's operations endpoints: `GET /ready` (can this
 * node take traffic) and `GET /metrics` (Prometheus text). `GET /health`
 * stays in api.ts: it says only that the process answers.
 *
 * @module
 */

/** One readiness check's outcome. */
export interface ReadyCheck {
  ok: boolean;
  /** How long it took, in milliseconds. */
  ms: number;
  /**
   * Why it failed; only for callers who may read `/metrics` (loopback, or
   * the metrics token): a driver's message may name internal addresses.
   */
  error?: string;
}

/**
 * `GET /ready`: 200 with `ok: true` when every check passed; 503 with
 * `ok: false` and the relay's error body (`not_ready`) otherwise.
 */
export interface ReadyResponse {
  ok: boolean;
  /** Every registered check by name (`store`, and `bus` once a bus is configured). */
  checks: Record<string, ReadyCheck>;
  error?: { code: string; message: string };
}

/** The media type of `GET /metrics` (Prometheus text exposition 0.0.4). */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
