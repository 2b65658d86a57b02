import { betterAuth } from "better-auth";
import { APIError } from "better-auth/api";
import { getMigrations } from "better-auth/db/migration";
import { NodeSqliteDialect } from "@better-auth/kysely-adapter/node-sqlite-dialect";
import type { KeyScope } from "../shared/api.ts";
import type { Database } from "./store/db.ts";
import type { Store } from "./store/mod.ts";
import { hashKey, looksLikeKey } from "./keys.ts";
import { countingStore } from "./rate_limit.ts";

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
  /** What the credential may do (a browser session: `full`); see scopes.ts. */
  scope: KeyScope;
  /** The one runner the credential reaches, when its key is bound to one. */
  runnerId: string | null;
}

/** What a socket or request was authenticated with: a browser session or a key. */
export type Credential = Pick<Principal, "via" | "keyId" | "authSessionId">;

/** better-auth configured for the relay, and the checks built on it. */
export type Auth = Awaited<ReturnType<typeof createAuth>>;

/** Builds better-auth on the relay's database, migrating its tables first. */
export async function createAuth(options: AuthOptions) {
  const { store } = options;
  const config = {
    // better-auth's queries are async and its transactions span awaits; on the
    // connection the relay writes to synchronously, one of those would swallow
    // (or break) the relay's own transactions, so it runs without them.
    database: {
      dialect: new NodeSqliteDialect({ database: options.db }),
      type: "sqlite" as const,
      transaction: false,
    },
    secret: options.secret,
    baseURL: options.baseUrl,
    basePath: "/api/auth",
    logger: { disabled: true },
    telemetry: { enabled: false },
    trustedOrigins: (request?: Request) => {
      // A same-origin request (Origin equals the Host the browser connected
      // to) is trusted too, so http://localhost and http://127.0.0.1 both work.
      const host = request?.headers.get("host");
      const proto = new URL(options.baseUrl).protocol;
      return [...options.trustedOrigins, host ? `${proto}//${host}` : null];
    },
    emailAndPassword: { enabled: true, minPasswordLength: 8, maxPasswordLength: 256 },
    session: {
      expiresIn: 60 * 60 * 24 * 30,
      updateAge: 60 * 60 * 24,
    },
    rateLimit: {
      enabled: true,
      // This relay's own counts (better-auth's memory store is process-wide).
      customStorage: countingStore(),
      window: 60,
      max: 300,
      customRules: {
        "/sign-in/*": { window: 60, max: 20 },
        "/sign-up/*": { window: 60, max: 10 },
      },
    },
    advanced: {
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
      useSecureCookies: options.baseUrl.startsWith("https:"),
      cookiePrefix: "baton",
    },
    databaseHooks: {
      user: {
        create: {
          // deno-lint-ignore require-await
          before: async (user: { email: string }) => {
            if (!options.allowSignup && store.accounts.count() > 0) {
              throw new APIError("FORBIDDEN", {
                code: "SIGNUP_CLOSED",
                message: "Sign-up is closed on this relay (start it with --allow-signup)",
              });
            }
            return { data: { ...user, email: user.email.toLowerCase() } };
          },
        },
      },
    },
  };
  const { runMigrations } = await getMigrations(config);
  await runMigrations();
  const auth = betterAuth(config);

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
  function handler(req: Request): Promise<Response> {
    const signingUp = new URL(req.url).pathname.includes("/sign-up/");
    return signingUp ? oneSignUpAtATime(() => auth.handler(req)) : auth.handler(req);
  }

  /** Creates an account with a password (one sign-up at a time); its id. */
  async function signUpEmail(body: { email: string; password: string; name: string }) {
    const res = await oneSignUpAtATime(() => auth.api.signUpEmail({ body }));
    return res.user.id;
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
    const s = await auth.api.getSession({ headers });
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
      scope: "full",
      runnerId: null,
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
      scope: rec.scope,
      runnerId: rec.runnerId,
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
    auth,
    handler,
    signUpEmail,
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
