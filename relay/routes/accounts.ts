import { Hono } from "hono";
import { z } from "zod";
import type { RegisterRequest, RegisterResponse, SetupStatusResponse } from "../../shared/api.ts";
import { type Auth, CLIENT_IP_HEADER } from "../auth.ts";
import { clientIp, HttpError, MAX_JSON_BODY, readBody, readJson, type RelayEnv } from "../_http.ts";
import type { Hub } from "../hub.ts";
import { RateLimiter } from "../rate_limit.ts";
import type { Store } from "../store/mod.ts";
import { createKey } from "../keys.ts";
import { requestSchema, routeDoc } from "./_openapi.ts";

const Register = requestSchema<RegisterRequest>()(z.object({
  name: z.string().trim().min(1).max(200).optional(),
  email: z.string().trim().email().max(320),
  password: z.string().min(1).max(256),
}));

/** What the account routes need. */
export interface AccountRoutesOptions {
  auth: Auth;
  store: Store;
  /** Closes the sockets of browser sessions a sign-out or password change ended. */
  hub: Pick<Hub, "closeLapsed">;
  allowSignup: boolean;
  trustProxy: boolean;
}

/**
 * The routes that work before anyone is signed in: better-auth's
 * `/api/auth/*`, `/api/setup-status` and `/api/register` (the CLI's
 * sign-in that answers with an API key).
 */
export function accountRoutes(options: AccountRoutesOptions): Hono<RelayEnv> {
  const { auth, store, hub, allowSignup, trustProxy } = options;
  const registerLimit = new RateLimiter({ limit: 5, windowMs: 15 * 60_000 });
  const app = new Hono<RelayEnv>();

  // better-auth owns /api/auth/*; it sees the real peer address for its limits.
  // Not in the OpenAPI document: its answers and errors are better-auth's own.
  app.on(["GET", "POST"], "/auth/*", async (c) => {
    const headers = new Headers(c.req.raw.headers);
    headers.set(CLIENT_IP_HEADER, clientIp(c, trustProxy));
    // A fresh Request (not a copy of the incoming one) so its abort signal is
    // not touched; its body read here, within the API's size limit.
    const raw = c.req.raw;
    const req = new Request(raw.url, {
      method: raw.method,
      headers,
      ...(raw.body ? { body: await readBody(raw, MAX_JSON_BODY) } : {}),
    });
    const changing = raw.method !== "GET";
    const before = changing ? await auth.authenticate(c.req.raw.headers) : null;
    const res = await auth.handler(req);
    if (changing) auth.forgetSessions();
    // Sign-out, a password change that revokes the other sessions, revoking
    // sessions: the viewer sockets of browser sessions that are gone close.
    if (before && res.ok) hub.closeLapsed(auth.principalLive, before.userId);
    return res;
  });

  // What the sign-in screen needs before anyone is signed in.
  const setupDoc = routeDoc({
    tag: "Accounts",
    summary: "Whether the relay still needs its owner account, and whether sign-up is open",
    auth: "none",
    ok: "`{needsOwner, allowSignup}`",
  });
  app.get("/setup-status", setupDoc, (c) => {
    const status = { needsOwner: store.accounts.count() === 0, allowSignup };
    return c.json(status satisfies SetupStatusResponse);
  });

  const registerDoc = routeDoc({
    tag: "Accounts",
    summary: "Sign in (or create the account, with `name`) and get a new API key",
    description: "What `baton setup` and `baton up` call. 5 requests per 15 minutes per client " +
      "IP. No cookie is set.",
    auth: "none",
    body: Register,
    ok: "`{ok: true, key}`: a new API key named `cli`",
    errors: {
      400: "`password_too_short`: a new account's password under 8 characters",
      401: "`invalid_credentials`: wrong email or password (or an unknown email without `name`)",
      403: "`signup_closed`",
      429: "`rate_limited`: see `Retry-After`",
    },
  });
  app.post("/register", registerDoc, async (c) => {
    const limited = registerLimit.hit(clientIp(c, trustProxy));
    if (!limited.ok) {
      throw new HttpError(429, "rate_limited", "Too many registration attempts; try again later", {
        "retry-after": String(limited.retryAfterSeconds),
      });
    }
    const body = await readJson(c, Register);
    const email = body.email.toLowerCase();
    let userId = auth.userIdByEmail(email);
    if (userId) {
      const ok = await auth.passwordMatches(email, body.password);
      if (!ok) throw new HttpError(401, "invalid_credentials", "Invalid email or password");
    } else {
      if (!body.name) throw new HttpError(401, "invalid_credentials", "Invalid email or password");
      if (!allowSignup && store.accounts.count() > 0) {
        throw new HttpError(403, "signup_closed", "Sign-up is closed on this relay");
      }
      if (body.password.length < 8) {
        throw new HttpError(400, "password_too_short", "Password must have at least 8 characters");
      }
      userId = await auth.signUpEmail({ email, password: body.password, name: body.name });
    }
    const created = await createKey(store, userId, "cli", null);
    return c.json({ ok: true, key: created.key } satisfies RegisterResponse);
  });

  return app;
}
