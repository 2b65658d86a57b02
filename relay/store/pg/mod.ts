/**
 * The relay's store on PostgreSQL: the same repositories as the SQLite
 * store, answering promises ({@linkcode AsyncStore}), over a `pg` pool.
 *
 * `pg` is imported only here, and this module only when a PostgreSQL URL is
 * used (`await import`), so the embedded default never loads it.
 *
 * @module
 */
import pg from "pg";
import type { AsyncSettings, AsyncStore } from "../contract.ts";
import type { CommitEvents } from "../event_writer.ts";
import { type PgPool, PgSql, PgStatements } from "./_sql.ts";
import { migratePg } from "./migrations.ts";
import { PgAccountsRepo } from "./accounts.ts";
import { PgAttachmentsRepo } from "./attachments.ts";
import { chunkEvents } from "../events.ts";
import { appendLocked, LOCK_SESSIONS, PgEventsRepo } from "./events.ts";
import { PgKeysRepo } from "./keys.ts";
import { PgPushRepo } from "./push.ts";
import { PgRateLimitsRepo } from "./rate_limits.ts";
import { PgRetentionRepo } from "./retention.ts";
import { PgRunnersRepo } from "./runners.ts";
import { PgSessionsRepo } from "./sessions.ts";
import { PgSettingsRepo } from "./settings.ts";
import { PgTriggersRepo } from "./triggers.ts";
import { PgTunnelGrantsRepo } from "./tunnel_grants.ts";
import { PgWebhooksRepo } from "./webhooks.ts";

export { migratePg, PG_MIGRATIONS } from "./migrations.ts";

/** Options of {@linkcode openPgStore}. */
export interface PgStoreOptions {
  /** Most connections the pool opens (default 10). */
  poolSize?: number;
  /**
   * Told when a migration of a database that had data starts and ends, and
   * when a connection idle in the pool breaks (the server restarted or cut it).
   */
  log?: (line: string) => void;
}

// BIGINT (seqs, sizes, epoch ms) and NUMERIC (what SUM of a BIGINT answers)
// come back as numbers, as SQLite's INTEGER does: every value the store keeps
// is far below 2^53.
const INT8 = 20;
const NUMERIC = 1700;
const types = {
  getTypeParser(oid: number, format?: string) {
    if (oid === INT8 || oid === NUMERIC) return Number;
    // deno-lint-ignore no-explicit-any
    return (pg.types.getTypeParser as any)(oid, format);
  },
};

/** Every repository over one PostgreSQL database. */
export class PgStore implements AsyncStore {
  readonly dialect = "postgres" as const;
  readonly accounts: PgAccountsRepo;
  readonly keys: PgKeysRepo;
  readonly runners: PgRunnersRepo;
  readonly sessions: PgSessionsRepo;
  readonly events: PgEventsRepo;
  readonly settings: AsyncSettings;
  readonly triggers: PgTriggersRepo;
  readonly webhooks: PgWebhooksRepo;
  readonly retention: PgRetentionRepo;
  readonly attachments: PgAttachmentsRepo;
  readonly push: PgPushRepo;
  readonly rateLimits: PgRateLimitsRepo;
  readonly tunnelGrants: PgTunnelGrantsRepo;
  readonly #sql: PgSql;

  constructor(readonly pool: PgPool) {
    const sql = this.#sql = new PgSql(pool, new PgStatements(), pool);
    this.accounts = new PgAccountsRepo(sql);
    this.keys = new PgKeysRepo(sql);
    this.runners = new PgRunnersRepo(sql);
    this.sessions = new PgSessionsRepo(sql);
    this.events = new PgEventsRepo(sql);
    this.settings = new PgSettingsRepo(sql);
    this.triggers = new PgTriggersRepo(sql);
    this.webhooks = new PgWebhooksRepo(sql);
    this.retention = new PgRetentionRepo(sql);
    this.attachments = new PgAttachmentsRepo(sql);
    this.push = new PgPushRepo(sql);
    this.rateLimits = new PgRateLimitsRepo(sql);
    this.tunnelGrants = new PgTunnelGrantsRepo(sql);
  }

  /**
   * Writes a batch of event commits in one transaction (the PostgreSQL
   * {@linkcode CommitEvents}): each session's new events, skipping those at
   * or below its last stored seq, and its state when that changed.
   */
  readonly commit: CommitEvents = (batch) =>
    this.#sql.tx(async (sql) => {
      const sessions = new PgSessionsRepo(sql);
      // Cut before the first statement: events out of order reject the batch whole.
      const chunked = batch.map((c) => chunkEvents(c.events));
      await sql.get(LOCK_SESSIONS, batch.map((c) => c.sessionId));
      for (const [i, c] of batch.entries()) {
        await appendLocked(sql, c.sessionId, chunked[i]!);
        if (c.patch) {
          await sessions.update(c.sessionId, c.patch, c.at);
          await sessions.setLastSeq(c.sessionId, c.lastSeq, c.eventBytes);
        }
      }
    });

  /** Closes every pooled connection. */
  close(): Promise<void> {
    return this.pool.end();
  }
}

/**
 * Connects to the PostgreSQL database at `url` (`postgres://user:pass@host:port/db`)
 * and brings its schema up to date.
 */
export async function openPgStore(url: string, options: PgStoreOptions = {}): Promise<PgStore> {
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10, types });
  // A connection that breaks while idle in the pool must not take the relay
  // down with it; the pool drops it and opens another when next needed. Said
  // in the log, since a database that keeps cutting connections is worth a look.
  pool.on("error", (err: Error) => {
    options.log?.(`PostgreSQL: a pooled connection broke while idle: ${err.message.slice(0, 300)}`);
  });
  try {
    await migratePg(pool as unknown as PgPool, { log: options.log });
  } catch (err) {
    await pool.end().catch(() => {});
    throw new Error(`PostgreSQL at ${redacted(url)}: ${(err as Error).message}`, { cause: err });
  }
  return new PgStore(pool as unknown as PgPool);
}

/** The URL without its password, to name it in an error. */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(an invalid URL)";
  }
}
