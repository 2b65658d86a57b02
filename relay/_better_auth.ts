/**
 * better-auth as the relay configures it. Loaded on first use only
 * ({@linkcode createAuth} in auth.ts imports it when a request first needs
 * it): the package and its dependencies are about 30 MB of the relay's
 * memory, which a relay that only runners (API keys) talk to never needs.
 * Its tables are created with the relay's own (store/db.ts, migration 8).
 *
 * @module
 */
import { betterAuth } from "better-auth";
import { APIError } from "better-auth/api";
import { getMigrations } from "better-auth/db/migration";
import { NodeSqliteDialect } from "@better-auth/kysely-adapter/node-sqlite-dialect";
import type { DatabaseSync } from "node:sqlite";
import { countingStore } from "./rate_limit.ts";
import type { AuthRateStorage } from "./limits.ts";

/** What {@linkcode authConfig} needs from the relay. */
export interface AuthConfigOptions {
  /** The SQLite database (null when `pgPool` is given). */
  db: DatabaseSync | null;
  /**
   * A `pg` pool on the relay's PostgreSQL store: better-auth then runs there
   * (with transactions) instead of on `db`. Its tables come with the store's
   * migrations (relay/store/pg/migrations.ts, version 8).
   */
  pgPool?: unknown;
  baseUrl: string;
  secret: string;
  /** The origins that may call the auth endpoints (the base URL's among them). */
  trustedOrigins: string[];
  /** The header that carries the client's address (the relay sets it, dropping a client's copy). */
  clientIpHeader: string;
  /**
   * Where sign-ins and sign-ups are counted: the database relay nodes share
   * (limits.ts); without it, this relay's own memory.
   */
  rateLimitStorage?: AuthRateStorage;
  /** Whether one more account may sign up now. */
  signupOpen: () => Promise<boolean>;
}

/** The SQLite database of options that name no PostgreSQL pool. */
function sqliteOf(options: AuthConfigOptions): DatabaseSync {
  if (!options.db) throw new Error("better-auth needs the SQLite database or a PostgreSQL pool");
  return options.db;
}

/** The relay's better-auth options (the schema of its tables follows from them). */
export function authConfig(options: AuthConfigOptions) {
  return {
    // better-auth's queries are async and its transactions span awaits; on the
    // connection the relay writes to synchronously, one of those would swallow
    // (or break) the relay's own transactions, so it runs without them.
    database: options.pgPool
      // better-auth takes a pg pool as it is (Kysely's PostgresDialect).
      ? options.pgPool as { connect(): Promise<unknown> }
      : {
        dialect: new NodeSqliteDialect({ database: sqliteOf(options) }),
        type: "sqlite" as const,
        transaction: false,
      },
    secret: options.secret,
    baseURL: options.baseUrl,
    basePath: "/api/auth",
    logger: { disabled: true },
    telemetry: { enabled: false },
    // The base URL's, the loopback names' and the configured ones; never
    // "whatever Host the request names" (DNS rebinding would pass that).
    trustedOrigins: options.trustedOrigins,
    emailAndPassword: {
      enabled: true,
      minPasswordLength: 8,
      maxPasswordLength: 256,
      // A sign-up does not sign in: better-auth then answers a sign-up with an
      // email that has an account as it answers a new one (a made-up user, no
      // session, after the same password hash), so sign-up does not tell
      // which emails have accounts. The client signs in next.
      autoSignIn: false,
    },
    session: {
      expiresIn: 60 * 60 * 24 * 30,
      updateAge: 60 * 60 * 24,
    },
    rateLimit: {
      enabled: true,
      // This relay's own counts (better-auth's memory store is process-wide),
      // or on PostgreSQL every node's: one atomic step per request, so two
      // nodes cannot both take a key's last slot (store/rate_limits.ts).
      customStorage: options.rateLimitStorage ?? countingStore(),
      window: 60,
      max: 300,
      customRules: {
        "/sign-in/*": { window: 60, max: 20 },
        "/sign-up/*": { window: 60, max: 10 },
      },
    },
    // No OpenTelemetry spans. With @opentelemetry/api resolvable (the single-file
    // bundle needs it for pi's providers) better-auth turns them on, and then a
    // second relay in one process (the tests' in-process relays) ran its queries
    // on the first one's closed database: "database is not open".
    experimental: { instrumentation: { enabled: false } },
    advanced: {
      ipAddress: { ipAddressHeaders: [options.clientIpHeader] },
      useSecureCookies: options.baseUrl.startsWith("https:"),
      cookiePrefix: "baton",
    },
    databaseHooks: {
      user: {
        create: {
          before: async (user: { email: string }) => {
            if (!await options.signupOpen()) {
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
}

/**
 * better-auth on the relay's database. Its tables come with the relay's own
 * (store/db.ts); should this version want more of them (a test checks it
 * does not), they are added first, as they were before the relay had them.
 */
export async function startBetterAuth(options: AuthConfigOptions) {
  const config = authConfig(options);
  const { toBeCreated, toBeAdded, runMigrations } = await getMigrations(config);
  if (toBeCreated.length || toBeAdded.length) await runMigrations();
  return betterAuth(config);
}

/** The relay's better-auth instance. */
export type BetterAuth = Awaited<ReturnType<typeof startBetterAuth>>;

/** Whether `err` is a refusal better-auth raised (it keeps its status and code). */
export function isAuthRefusal(err: unknown): err is APIError {
  return err instanceof APIError;
}
