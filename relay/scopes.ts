/**
 * What a restricted credential may reach over HTTP, in one table rather than
 * a check in every route. A browser session and a full, unbound API key reach
 * everything their account owns. Otherwise:
 *
 * - a runner token (`brt_`, scope `runner`) only broadcasts its runner's
 *   triggers and triggers that runner's sessions (what the spec gives
 *   services); its control channel is checked in runner_socket.ts;
 * - a read-only key only reads (GET, and the POSTs that only read a
 *   runner's files: `files`, `search-files`, `read-file`);
 * - a key bound to a runner reaches that runner and its sessions only;
 * - neither reaches keys or webhooks (a webhook's secret starts sessions on
 *   any runner, a key could be minted with more rights).
 *
 * A refusal is 403 `forbidden_scope`. A session or runner outside the scope
 * is refused alike whether it exists or not.
 *
 * @module
 */
import type { MiddlewareHandler } from "hono";
import type { Principal } from "./auth.ts";
import { HttpError, principal, type RelayEnv } from "./_http.ts";
import type { AsyncStore } from "./store/mod.ts";

/** The error code of every scope refusal. */
export const FORBIDDEN_SCOPE = "forbidden_scope";

/** Whether the credential reaches everything its account owns. */
export function isUnrestricted(p: Pick<Principal, "scope" | "runnerId">): boolean {
  return p.scope === "full" && p.runnerId === null;
}

/** Throws 403 `forbidden_scope` with `message`. */
export function forbiddenScope(message: string): never {
  throw new HttpError(403, FORBIDDEN_SCOPE, message);
}

/** Throws unless the credential may act on runner `runnerId` (for ids in a body). */
export function assertRunnerInScope(p: Principal, runnerId: string): void {
  if (p.scope === "runner") forbiddenScope(RUNNER_TOKEN_MESSAGE);
  if (p.runnerId !== null && p.runnerId !== runnerId) {
    forbiddenScope(`This key is bound to runner '${p.runnerId}'`);
  }
}

const RUNNER_TOKEN_MESSAGE = "A runner token may only broadcast its runner's triggers and " +
  "trigger that runner's sessions; use an API key for anything else";

/** Runner routes that take their question as a POST body but only read. */
const READ_POSTS = new Set(["files", "search-files", "read-file"]);

/** `/api/*` after the principal is known: refuses what the credential's scope does not allow. */
export function scopeGuard(store: Pick<AsyncStore, "sessions">): MiddlewareHandler<RelayEnv> {
  const onRunner = async (p: Principal, sessionId: string) =>
    p.runnerId !== null && (await store.sessions.get(sessionId))?.runnerId === p.runnerId;

  return async (c, next) => {
    const p = principal(c);
    if (isUnrestricted(p)) return await next();
    const method = c.req.method;
    // ["runners" | "sessions" | ..., id?, action?, ...]
    const [family = "", id = "", action, ...rest] = c.req.path.split("/").filter(Boolean).slice(1);
    const bound = p.runnerId;

    if (p.scope === "runner") {
      const broadcast = family === "runners" && action === "trigger-broadcast" &&
        rest.length === 0 && method === "POST" && id === bound;
      const trigger = family === "sessions" && action === "trigger" && rest.length === 0 &&
        method === "POST" && await onRunner(p, id);
      if (!broadcast && !trigger) forbiddenScope(RUNNER_TOKEN_MESSAGE);
      return await next();
    }

    const readPost = family === "runners" && method === "POST" && rest.length === 0 &&
      READ_POSTS.has(action ?? "");
    if (p.scope === "read" && method !== "GET" && method !== "HEAD" && !readPost) {
      forbiddenScope("This API key is read-only");
    }
    if (family === "keys" || family === "webhooks") {
      forbiddenScope("Keys and webhooks need a full API key or a browser session");
    }
    if (bound !== null) {
      // The listings filter themselves (routes/runners.ts, routes/sessions.ts);
      // spawn, restart and stop name the runner in their body.
      const listing = id === "" || (family === "sessions" && id === "pinned" && !action);
      const inBody = family === "runners" && ["spawn", "restart", "stop"].includes(id) && !action;
      const allowed = (family === "runners" && (listing || inBody || id === bound)) ||
        (family === "sessions" && (listing || await onRunner(p, id)));
      if (!allowed) forbiddenScope(`This key is bound to runner '${bound}'`);
    }
    await next();
  };
}
