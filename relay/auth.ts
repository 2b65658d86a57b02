import type { BetterAuth } from "./_better_auth.ts";
import type { Database } from "./store/db.ts";
import type { Store } from "./store/mod.ts";
import { hashKey, looksLikeKey } from "./keys.ts";

/** How long a checked session cookie is trusted without checking it again. */
const COOKIE_CACHE_MS = 10_000;

/** Header the relay sets (after dropping any client copy) so better-auth sees the peer IP. */
export const CLIENT_IP_HEADER = "x-baton-client-ip";

/** Options of {@linkcode createAuth}. */
export interface AuthOptions {
  db: Database;
  store: Store;
  baseUrl: string;
  secret: string;
  /** Whether accounts beyond the first may sign up. */
  allowSignup: boolean;
  /** Origins other than the base URL's that may call the auth endpoints. */
  trustedOrigins: string[];
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
}

/** What a socket or request was authenticated with: a browser session or a key. */
export type Credential = Pick<Principal, "via" | "keyId" | "authSessionId">;

/** better-auth configured for the relay, and the checks built on it. */
export type Auth = ReturnType<typeof createAuth>;

/** The relay's accounts: better-auth on the relay's database (loaded on first use). */
export function createAuth(options: AuthOptions) {
  const { store } = options;
  // better-auth itself is loaded when a request first needs it: a cookie to
  // check, a sign-in or sign-up, /api/auth/*. An idle relay, and one only
  // runners and API keys talk to, never does (about 30 MB less: once loaded,
  // a module stays, even if a worker thread loaded it and ended). Its tables
  // are created with the relay's own (store/db.ts, migration 6).
  type Loaded = { auth: BetterAuth; isAuthRefusal: (err: unknown) => boolean };
  let loading: Promise<Loaded> | null = null;
  let loaded: Loaded | null = null;
  function betterAuth(): Promise<BetterAuth> {
    loading ??= import("./_better_auth.ts").then(async (m) => {
      loaded = {
        auth: await m.startBetterAuth({
          db: options.db,
          baseUrl: options.baseUrl,
          secret: options.secret,
          trustedOrigins: options.trustedOrigins,
          clientIpHeader: CLIENT_IP_HEADER,
          signupOpen: () => options.allowSignup || store.accounts.count() === 0,
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

  /** better-auth's own routes (`/api/auth/*`), with its sign-ups taken one at a time. */
  async function handler(req: Request): Promise<Response> {
    const auth = await betterAuth();
    const signingUp = new URL(req.url).pathname.includes("/sign-up/");
    return signingUp ? oneSignUpAtATime(() => auth.handler(req)) : auth.handler(req);
  }

  /** Creates an account with a password (one sign-up at a time); its id. */
  async function signUpEmail(body: { email: string; password: string; name: string }) {
    const auth = await betterAuth();
    const res = await oneSignUpAtATime(() => auth.api.signUpEmail({ body }));
    return res.user.id;
  }

  /** Whether `password` is the password of the account `email` (a sign-in, its cookie unused). */
  async function passwordMatches(email: string, password: string): Promise<boolean> {
    const auth = await betterAuth();
    return await auth.api.signInEmail({ body: { email, password } }).then(() => true, () => false);
  }

  // Cookie sessions seen in the last few seconds, so a busy client does not
  // cost a database lookup and a signature check per request. Any change made
  // through /api/auth (sign-out, password change) empties it at once.
  const cookieCache = new Map<string, { principal: Principal; until: number }>();
  /** Bumped by every change through /api/auth, so a lookup that raced one is not cached. */
  let generation = 0;

  /** The principal of a request: API key headers first, then the session cookie. */
  async function authenticate(headers: Headers): Promise<Principal | null> {
    const key = keyFromHeaders(headers);
    if (key !== null) return await principalFromKey(key);
    const cookie = headers.get("cookie");
    if (!cookie) return null;
    const now = Date.now();
    const hit = cookieCache.get(cookie);
    if (hit && hit.until > now) return hit.principal;
    const asked = generation;
    const s = await (await betterAuth()).api.getSession({ headers });
    if (!s) return null;
    // A sign-out (or password change) finished while we asked: the session
    // better-auth found may be gone now, and must not be cached.
    const raced = asked !== generation;
    if (raced && !authSessionLive(s.session.id)) return null;
    const principal: Principal = {
      userId: s.user.id,
      email: s.user.email,
      name: s.user.name,
      via: "cookie",
      keyId: null,
      authSessionId: s.session.id,
    };
    if (raced) return principal;
    if (cookieCache.size > 10_000) cookieCache.clear();
    const expires = new Date(s.session.expiresAt).getTime();
    cookieCache.set(cookie, { principal, until: Math.min(now + COOKIE_CACHE_MS, expires) });
    return principal;
  }

  /** Forgets every cached cookie session (after any change through /api/auth). */
  function forgetSessions(): void {
    generation++;
    cookieCache.clear();
  }

  /**
   * Whether what a principal was authenticated with still holds: its browser
   * session, or its key (not revoked, not expired). For sockets that start
   * after an await following the check.
   */
  function principalLive(p: Credential): boolean {
    if (p.via === "cookie") return p.authSessionId !== null && authSessionLive(p.authSessionId);
    const rec = p.keyId === null ? undefined : store.keys.byId(p.keyId);
    return rec !== undefined && (!rec.expiresAt || Date.parse(rec.expiresAt) > Date.now());
  }

  /** The principal a raw API key or runner token stands for, when it is valid. */
  async function principalFromKey(key: string): Promise<Principal | null> {
    if (!looksLikeKey(key)) return null;
    const rec = store.keys.byHash(await hashKey(key));
    if (!rec) return null;
    if (rec.expiresAt && Date.parse(rec.expiresAt) <= Date.now()) return null;
    const user = store.accounts.byId(rec.userId);
    if (!user) return null;
    const now = new Date();
    if (!rec.lastUsedAt || now.getTime() - Date.parse(rec.lastUsedAt) > 60_000) {
      store.keys.touch(rec.id, now.toISOString());
    }
    return {
      userId: user.id,
      email: user.email,
      name: user.name,
      via: "key",
      keyId: rec.id,
      authSessionId: null,
    };
  }

  /** The user id owning `email`, if any. */
  function userIdByEmail(email: string): string | undefined {
    return store.accounts.idByEmail(email);
  }

  /** Whether a browser session (better-auth's `session` row) still exists and has not expired. */
  function authSessionLive(id: string): boolean {
    const expires = store.accounts.browserSessionExpiry(id);
    return expires !== undefined && expires > Date.now();
  }

  return {
    handler,
    signUpEmail,
    passwordMatches,
    isAuthRefusal,
    authenticate,
    principalFromKey,
    userIdByEmail,
    forgetSessions,
    principalLive,
  };
}

/** The key from `x-api-key` or `Authorization: Bearer`, or null when neither is sent. */
export function keyFromHeaders(headers: Headers): string | null {
  const x = headers.get("x-api-key");
  if (x) return x.trim();
  const authz = headers.get("authorization");
  if (authz && /^bearer\s+/i.test(authz)) return authz.replace(/^bearer\s+/i, "").trim();
  return null;
}
