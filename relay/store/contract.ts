/**
 * The store as the relay uses it: every repository call answers a promise,
 * so the same relay code runs on the embedded SQLite file (which answers at
 * once) and on PostgreSQL (which answers over the network).
 *
 * The repositories' shapes are defined once, by the SQLite classes; this
 * module derives the asynchronous contract from them, so a PostgreSQL store
 * that misses a method, or answers a different type, fails the type check.
 *
 * No transaction spans an `await`: a step that must be atomic is one
 * repository method (the SQLite class runs it in a transaction on its
 * connection, PostgreSQL in a transaction on one pooled connection).
 *
 * @module
 */
import type { AccountsRepo } from "./accounts.ts";
import type { AttachmentsRepo } from "./attachments.ts";
import type { EventsRepo } from "./events.ts";
import type { KeysRepo } from "./keys.ts";
import type { PushRepo } from "./push.ts";
import type { RateLimitsRepo } from "./rate_limits.ts";
import type { RetentionRepo } from "./retention.ts";
import type { RunnersRepo } from "./runners.ts";
import type { SessionsRepo } from "./sessions.ts";
import type { SettingsRepo } from "./settings.ts";
import type { TriggersRepo } from "./triggers.ts";
import type { TunnelGrantsRepo } from "./tunnel_grants.ts";
import type { WebhooksRepo } from "./webhooks.ts";

/** A repository's methods, each answering a promise of what the SQLite one returns. */
export type Async<R> = {
  [K in keyof R as R[K] extends (...args: never[]) => unknown ? K : never]: R[K] extends
    (...args: infer A) => infer T ? (...args: A) => Promise<Awaited<T>> : never;
};

/** Per-user settings: `get` keeps its type parameter, which a mapped type would lose. */
export type AsyncSettings = Omit<Async<SettingsRepo>, "get"> & {
  get<T>(userId: string, key: string, fallback: T): Promise<T>;
};

/** Which engine holds the data. */
export type Dialect = "sqlite" | "postgres";

/** Every repository over one database, asynchronous. */
export interface AsyncStore {
  readonly dialect: Dialect;
  readonly accounts: Async<AccountsRepo>;
  readonly keys: Async<KeysRepo>;
  readonly runners: Async<RunnersRepo>;
  readonly sessions: Async<SessionsRepo>;
  readonly events: Async<EventsRepo>;
  readonly settings: AsyncSettings;
  readonly triggers: Async<TriggersRepo>;
  readonly webhooks: Async<WebhooksRepo>;
  readonly retention: Async<RetentionRepo>;
  readonly attachments: Async<AttachmentsRepo>;
  readonly push: Async<PushRepo>;
  readonly rateLimits: Async<RateLimitsRepo>;
  readonly tunnelGrants: Async<TunnelGrantsRepo>;
}

/** The repository names of {@linkcode AsyncStore}, in one list. */
export const REPOSITORIES = [
  "accounts",
  "keys",
  "runners",
  "sessions",
  "events",
  "settings",
  "triggers",
  "webhooks",
  "retention",
  "attachments",
  "push",
  "rateLimits",
  "tunnelGrants",
] as const;

/**
 * Wraps a synchronous repository: each method runs at once, as before, and
 * its result (or what it threw) comes back as a settled promise.
 */
export function asyncRepo<R extends object>(repo: R): Async<R> {
  const out: Record<string, unknown> = {};
  for (
    let p = Object.getPrototypeOf(repo);
    p && p !== Object.prototype;
    p = Object.getPrototypeOf(p)
  ) {
    for (const name of Object.getOwnPropertyNames(p)) {
      const fn = (repo as Record<string, unknown>)[name];
      if (name === "constructor" || name in out || typeof fn !== "function") continue;
      out[name] = (...args: unknown[]) => {
        try {
          return Promise.resolve(fn.apply(repo, args));
        } catch (e) {
          return Promise.reject(e);
        }
      };
    }
  }
  return out as Async<R>;
}
