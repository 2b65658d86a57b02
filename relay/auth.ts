import type { BetterAuth } from "./_better_auth.ts";
import type { KeyScope } from "../shared/api.ts";
import type { Database } from "./store/db.ts";
import type { AsyncStore } from "./store/mod.ts";
import { hashKey, looksLikeKey } from "./keys.ts";
import { type Limits, memoryLimits } from "./limits.ts";

/** How long a checked session cookie is trusted without checking it again. */
const COOKIE_CACHE_MS = 10_000;

/** Header the relay sets (after dropping any client copy) so better-auth sees the peer IP. */
export const CLIENT_IP_HEADER = "x-baton-client-ip";

/** Options of {@linkcode createAuth}. */
export interface AuthOptions {
  /** The SQLite database better-auth runs on, or null with `pgPool`. */
  db: Database | null;
  /** The PostgreSQL store's `pg` pool: better-auth runs there instead. */
  pgPool?: unknown;
  store: AsyncStore;
  baseUrl: string;
  secret: string;
  /** Whether accounts beyond the first may sign up. */
  allowSignup: boolean;
  /** Every origin that may call the auth endpoints (see browserAccess). */
  trustedOrigins: string[];
  /**
   * Where sign-ins, sign-ups and registrations are counted (default: this
   * relay's memory; on PostgreSQL, the database every node shares).
   */
  limits?: Limits;
}

/** Who made a request, and with what. */
export interface Principal {
  userId: string;
  email: string;
  name: string;
  via: "cookie" | "key";
  /** The API key or runner token used, when `via` is `key`. */
  keyId: string | null;
  /** better-auth's session id, when `via` is `cookie`. */
  authSessionId: string | null;
  /** What the credential may do (a browser session: `full`); see scopes.ts. */
  scope: KeyScope;
  /** The one runner the credential reaches, when its key is bound to one. */
  runnerId: string | null;
}

/** What a socket or request was authenticated with: a browser session or a key. */
export type Credential = Pick<Principal, "via" | "keyId" | "authSessionId">;

/** better-auth configured for the relay, and the checks built on it. */
export type Auth = ReturnType<typeof createAuth>;

/** The relay's accounts: better-auth on the relay's database (loaded on first use). */
export function createAuth(options: AuthOptions) {
  const { store } = options;
  const limits = options.limits ?? memoryLimits();
  // better-auth itself is loaded when a request first needs it: a cookie to
  // check, a sign-in or sign-up, /api/auth/*. An idle relay, and one only
  // runners and API keys talk to, never does (about 30 MB less: once loaded,
  // a module stays, even if a worker thread loaded it and ended). Its tables
  // are created with the relay's own (store/db.ts, migration 8).
  type Loaded = { auth: BetterAuth; isAuthRefusal: (err: unknown) => boolean };
  let loading: Promise<Loaded> | null = null;
  let loaded: Loaded | null = null;
  function betterAuth(): Promise<BetterAuth> {
    loading ??= import("./_better_auth.ts").then(async (m) => {
      loaded = {
        auth: await m.startBetterAuth({
          db: options.db,
          ...(options.pgPool ? { pgPool: options.pgPool } : {}),
          baseUrl: options.baseUrl,
          secret: options.secret,
          trustedOrigins: options.trustedOrigins,
          rateLimitStorage: limits.authStorage(),
          clientIpHeader: CLIENT_IP_HEADER,
          signupOpen: async () => options.allowSignup || await store.accounts.count() === 0,
        }),
        isAuthRefusal: m.isAuthRefusal,
      };
      return loaded;
    }).catch((err) => {
      // The next request tries again rather than failing for the process's life.
      loading = null;
      throw err;
    });
    return loading.then((l) => l.auth);
  }

  /** Whether `err` is a refusal better-auth raised (only once it is loaded can it raise one). */
  function isAuthRefusal(err: unknown): err is Error & { statusCode: number; body?: unknown } {
    return loaded?.isAuthRefusal(err) ?? false;
  }

  // The hook's check that sign-up is open and the insert it lets through are
  // awaits apart, so two first sign-ups at once could both find no account.
  // Sign-ups run one at a time instead; they are rare and rate-limited.
  let lastSignUp: Promise<unknown> = Promise.resolve();
  function oneSignUpAtATime<T>(run: () => Promise<T>): Promise<T> {
    const turn = lastSignUp.then(run, run);
    lastSignUp = turn.catch(() => {});
    return turn;
  }

  /** Whether sign-up is closed: the relay has its owner and was not started with allowSignup. */
  async function signUpClosed(): Promise<boolean> {
    return !options.allowSignup && await store.accounts.count() > 0;
  }

  /**
   * better-auth's own routes (`/api/auth/*`), with its sign-ups taken one at
   * a time. A closed sign-up is refused before better-auth looks the email
   * up, which would answer USER_ALREADY_EXISTS for an email with an account.
   */
  async function handler(req: Request): Promise<Response> {
    const signingUp = new URL(req.url).pathname.includes("/sign-up/");
    if (!signingUp) return (await betterAuth()).handler(req);
    return oneSignUpAtATime(async () =>
      await signUpClosed() ? signUpClosedResponse() : (await betterAuth()).handler(req)
    );
  }

  /**
   * The account whose password this is, or null, at the same cost either
   * way: an unknown email costs a password hash too (as better-auth's own
   * sign-in does), so the time taken does not tell which emails have
   * accounts. Unlike a sign-in, it starts no browser session.
   */
  async function checkPassword(email: string, password: string): Promise<string | null> {
    const ctx = await (await betterAuth()).$context;
    const found = await ctx.internalAdapter.findUserByEmail(email.toLowerCase(), {
      includeAccounts: true,
    });
    const hash = found?.accounts.find((a) =>
      a.providerId === "credential" && a.accountId === found.user.id
    )?.password;
    if (!found || !hash) {
      await ctx.password.hash(password);
      return null;
    }
    return await ctx.password.verify({ hash, password }) ? found.user.id : null;
  }

  /**
   * Creates an account with a password (one sign-up at a time): its id, or
   * why not. Checked in its turn, after any sign-up before it finished.
   */
  function signUpEmail(
    body: { email: string; password: string; name: string },
  ): Promise<{ ok: true; userId: string } | { ok: false; reason: "closed" | "exists" }> {
    return oneSignUpAtATime(async () => {
      if (await signUpClosed()) return { ok: false, reason: "closed" } as const;
      // better-auth would answer a made-up user for an email it has (see autoSignIn).
      if (await store.accounts.idByEmail(body.email)) {
        return { ok: false, reason: "exists" } as const;
      }
      const res = await (await betterAuth()).api.signUpEmail({ body });
      return { ok: true, userId: res.user.id } as const;
    });
  }

  // Cookie sessions seen in the last few seconds, so a busy client does not
  // cost a database lookup and a signature check per request. A change made
  // through /api/auth with a session (sign-out, password change, revoking
  // sessions) forgets that user's entries at once; other users' stay.
  const cookieCache = new Map<string, { principal: Principal; until: number }>();
  /** Per user, bumped by every such change, so a lookup that raced one is not cached. */
  const generations = new Map<string, number>();

  /** The principal of a request: API key headers first, then the session cookie. */
  async function authenticate(headers: Headers): Promise<Principal | null> {
    const key = keyFromHeaders(headers);
    if (key !== null) return await principalFromKey(key);
    const cookie = headers.get("cookie");
    if (!cookie) return null;
    const now = Date.now();
    const hit = cookieCache.get(cookie);
    if (hit && hit.until > now) return hit.principal;
    const asked = changesSeen;
    const s = await (await betterAuth()).api.getSession({ headers });
    if (!s) return null;
    // A sign-out (or password change) of this user finished while we asked:
    // the session better-auth found may be gone now, and must not be cached.
    const raced = (generations.get(s.user.id) ?? 0) > asked;
    if (raced && !await authSessionLive(s.session.id)) return null;
    const principal: Principal = {
      userId: s.user.id,
      email: s.user.email,
      name: s.user.name,
      via: "cookie",
      keyId: null,
      authSessionId: s.session.id,
      scope: "full",
      runnerId: null,
    };
    if (raced) return principal;
    if (cookieCache.size > 10_000) cookieCache.clear();
    const expires = new Date(s.session.expiresAt).getTime();
    cookieCache.set(cookie, { principal, until: Math.min(now + COOKIE_CACHE_MS, expires) });
    return principal;
  }
  /** Changes forgotten so far (the last value given to `generations`). */
  let changesSeen = 0;

  /**
   * Forgets the cached cookie sessions of one user, after a change through
   * /api/auth made with one of their sessions (it may have ended some).
   */
  function forgetSessions(userId: string): void {
    generations.set(userId, ++changesSeen);
    for (const [cookie, hit] of cookieCache) {
      if (hit.principal.userId === userId) cookieCache.delete(cookie);
    }
  }

  /**
   * Whether what a principal was authenticated with still holds: its browser
   * session, or its key (not revoked, not expired). For sockets that start
   * after an await following the check.
   */
  async function principalLive(p: Credential): Promise<boolean> {
    if (p.via === "cookie") {
      return p.authSessionId !== null && await authSessionLive(p.authSessionId);
    }
    const rec = p.keyId === null ? undefined : await store.keys.byId(p.keyId);
    return rec !== undefined && (!rec.expiresAt || Date.parse(rec.expiresAt) > Date.now());
  }

  /** The principal a raw API key or runner token stands for, when it is valid. */
  async function principalFromKey(key: string): Promise<Principal | null> {
    if (!looksLikeKey(key)) return null;
    const rec = await store.keys.byHash(await hashKey(key));
    if (!rec) return null;
    if (rec.expiresAt && Date.parse(rec.expiresAt) <= Date.now()) return null;
    const user = await store.accounts.byId(rec.userId);
    if (!user) return null;
    const now = new Date();
    if (!rec.lastUsedAt || now.getTime() - Date.parse(rec.lastUsedAt) > 60_000) {
      await store.keys.touch(rec.id, now.toISOString());
    }
    return {
      userId: user.id,
      email: user.email,
      name: user.name,
      via: "key",
      keyId: rec.id,
      authSessionId: null,
      scope: rec.scope,
      runnerId: rec.runnerId,
    };
  }

  /** The user id owning `email`, if any. */
  function userIdByEmail(email: string): Promise<string | undefined> {
    return store.accounts.idByEmail(email);
  }

  /** Whether a browser session (better-auth's `session` row) still exists and has not expired. */
  async function authSessionLive(id: string): Promise<boolean> {
    const expires = await store.accounts.browserSessionExpiry(id);
    return expires !== undefined && expires > Date.now();
  }

  return {
    handler,
    signUpClosed,
    checkPassword,
    signUpEmail,
    isAuthRefusal,
    authenticate,
    principalFromKey,
    userIdByEmail,
    forgetSessions,
    principalLive,
    /** Where the account routes count their own limits (registration). */
    limits,
  };
}

/** better-auth's refusal of a sign-up, in its shape, when sign-up is closed. */
function signUpClosedResponse(): Response {
  return Response.json(
    {
      code: "SIGNUP_CLOSED",
      message: "Sign-up is closed on this relay (start it with --allow-signup)",
    },
    { status: 403 },
  );
}

/** The key from `x-api-key` or `Authorization: Bearer`, or null when neither is sent. */
export function keyFromHeaders(headers: Headers): string | null {
  const x = headers.get("x-api-key");
  if (x) return x.trim();
  const authz = headers.get("authorization");
  if (authz && /^bearer\s+/i.test(authz)) return authz.replace(/^bearer\s+/i, "").trim();
  return null;
}
