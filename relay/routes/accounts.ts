import { Hono } from "hono";
import { z } from "zod";
import type { RegisterRequest, RegisterResponse, SetupStatusResponse } from "../../shared/api.ts";
import { type Auth, CLIENT_IP_HEADER, type Principal } from "../auth.ts";
import {
  checkJsonDepth,
  clientIp,
  HttpError,
  MAX_JSON_BODY,
  readBody,
  readJson,
  type RelayEnv,
} from "../_http.ts";
import type { Hub } from "../hub.ts";
import type { AsyncStore } from "../store/mod.ts";
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
  store: AsyncStore;
  /** Closes the sockets of browser sessions a sign-out or password change ended. */
  hub: Pick<Hub, "closeLapsed" | "carryOverSession">;
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
  const registerLimit = auth.limits.limiter("register", {
    limit: 5,
    windowMs: 15 * 60_000,
  });
  const app = new Hono<RelayEnv>();

  // better-auth owns /api/auth/*; it sees the real peer address for its limits.
  // Not in the OpenAPI document: its answers and errors are better-auth's own.
  app.on(["GET", "POST"], "/auth/*", async (c) => {
    const headers = new Headers(c.req.raw.headers);
    headers.set(CLIENT_IP_HEADER, clientIp(c, trustProxy));
    // A fresh Request (not a copy of the incoming one) so its abort signal is
    // not touched; its body read here, within the API's size limit.
    const raw = c.req.raw;
    const body = raw.body ? await readBody(raw, MAX_JSON_BODY) : null;
    if (body) checkJsonDepth(body);
    const req = new Request(raw.url, {
      method: raw.method,
      headers,
      ...(body ? { body } : {}),
    });
    const changing = raw.method !== "GET";
    const before = changing ? await auth.authenticate(c.req.raw.headers) : null;
    const res = await auth.handler(req);
    // Only a change made with a session can end sessions (sign-out, a password
    // change, revoking sessions), and only that user's: a sign-in, right or
    // wrong, leaves every cached session cached.
    if (before) auth.forgetSessions(before.userId);
    if (before && res.ok) {
      // A password change that signs every session out hands this browser a
      // new one: its open sockets carry over to it instead of closing.
      const handed = await newSessionOf(res, before);
      if (handed) hub.carryOverSession(before.userId, before.authSessionId!, handed);
      // The viewer sockets of that user's browser sessions that are gone close.
      await hub.closeLapsed(auth.principalLive, before.userId);
    }
    return res;
  });

  /**
   * The browser session a successful answer hands the caller in place of the
   * one it came with (now gone), or null.
   */
  async function newSessionOf(res: Response, before: Principal): Promise<string | null> {
    if (before.via !== "cookie" || !before.authSessionId || await auth.principalLive(before)) {
      return null;
    }
    const cookie = res.headers.getSetCookie().map((c) => c.split(";")[0]!).join("; ");
    if (!cookie) return null;
    const p = await auth.authenticate(new Headers({ cookie }));
    return p && p.userId === before.userId && p.via === "cookie" ? p.authSessionId : null;
  }

  // What the sign-in screen needs before anyone is signed in.
  const setupDoc = routeDoc({
    tag: "Accounts",
    summary: "Whether the relay still needs its owner account, and whether sign-up is open",
    auth: "none",
    ok: "`{needsOwner, allowSignup}`",
  });
  app.get("/setup-status", setupDoc, async (c) => {
    const status = { needsOwner: await store.accounts.count() === 0, allowSignup };
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
      403: "`signup_closed`: with `name`, on a relay with its owner and sign-up closed, when " +
        "the email and password open no account (whether the email has one or not)",
      429: "`rate_limited`: see `Retry-After`",
    },
  });
  app.post("/register", registerDoc, async (c) => {
    const limited = await registerLimit.hit(clientIp(c, trustProxy));
    if (!limited.ok) {
      throw new HttpError(429, "rate_limited", "Too many registration attempts; try again later", {
        "retry-after": String(limited.retryAfterSeconds),
      });
    }
    const body = await readJson(c, Register);
    const email = body.email.toLowerCase();
    // An email with an account and one without answer alike, at the same
    // cost (checkPassword hashes either way): status, code and message say
    // nothing about which emails have accounts. Only an open sign-up has to
    // tell, by creating the account.
    let userId = await auth.checkPassword(email, body.password);
    if (!userId) {
      if (!body.name) throw new HttpError(401, "invalid_credentials", "Invalid email or password");
      if (body.password.length < 8 && !await auth.signUpClosed()) {
        throw new HttpError(400, "password_too_short", "Password must have at least 8 characters");
      }
      const made = await auth.signUpEmail({ email, password: body.password, name: body.name });
      if (!made.ok && made.reason === "closed") {
        throw new HttpError(
          403,
          "signup_closed",
          "Sign-up is closed on this relay, and this email and password open no account",
        );
      }
      if (!made.ok) throw new HttpError(401, "invalid_credentials", "Invalid email or password");
      userId = made.userId;
    }
    const created = await createKey(store, userId, { name: "cli" });
    return c.json({ ok: true, key: created.key } satisfies RegisterResponse);
  });

  return app;
}
