/**
 * The relay's schema on PostgreSQL: one migration for each of SQLite's
 * (relay/store/migrations.ts), with the same version and name, applied in the same
 * order. Append only, as SQLite's. tests/store_conformance_test.ts keeps the
 * two in step: the same versions and names, and after both are migrated the
 * same tables with the same columns.
 *
 * Types map one way: SQLite's INTEGER is BIGINT here (seqs, sizes and epoch
 * milliseconds outgrow 32 bits; the store reads BIGINT back as a number),
 * TEXT is TEXT. The repositories' SQL compares flags with 0 and 1, so flags
 * stay integers rather than becoming booleans. better-auth's tables are as
 * better-auth creates them on PostgreSQL (timestamptz, boolean).
 *
 * Two columns exist here only: `ord` in trigger_subscriptions and
 * trigger_listeners stands in for SQLite's rowid, by which their lists keep
 * the order rows were added in.
 *
 * Over 400 lines: the migrations are the schema's history, one list in
 * order.
 *
 * The DDL stands here and in ../migrations.ts on purpose, though much of it reads
 * alike (`duplicates` lists it): a migration is history, applied as written
 * to databases already in use, so neither text may be derived from the
 * other, and each dialect's types differ. The conformance test, not a shared
 * text, keeps them in step.
 *
 * @module
 */
import { inTransaction, type PgPool } from "./_sql.ts";

/** One schema step; all pending ones are applied in one transaction. */
export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

/** The migrations' advisory lock: a second node starting at once waits, then finds nothing to do. */
const MIGRATION_LOCK = 0x6261746f6e; // "baton"

export const PG_MIGRATIONS: PgMigration[] = [
  {
    version: 1,
    name: "keys, runners, sessions, events, settings",
    sql: `
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        prefix TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        expires_at TEXT,
        last_used_at TEXT
      );
      CREATE INDEX api_keys_user ON api_keys (user_id);

      -- Listed by name: compared byte by byte, as SQLite does, whatever the database's locale.
      CREATE TABLE runners (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT COLLATE "C" NOT NULL,
        platform TEXT NOT NULL DEFAULT '',
        version TEXT NOT NULL DEFAULT '',
        roots TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        last_seen_at TEXT
      );
      CREATE INDEX runners_user ON runners (user_id);

      CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        runner_id TEXT NOT NULL,
        status TEXT NOT NULL,
        activity TEXT NOT NULL DEFAULT 'idle',
        cwd TEXT NOT NULL DEFAULT '',
        model TEXT,
        prompt TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        ended_at TEXT,
        end_reason TEXT,
        last_seq BIGINT NOT NULL DEFAULT 0,
        pinned BIGINT NOT NULL DEFAULT 0
      );
      CREATE INDEX sessions_user ON sessions (user_id, created_at);
      CREATE INDEX sessions_runner ON sessions (runner_id, status);

      CREATE TABLE session_events (
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      );

      CREATE TABLE user_settings (
        user_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (user_id, key)
      );
    `,
  },
  {
    version: 2,
    name: "webhooks, trigger subscriptions, listeners and history",
    sql: `
      CREATE TABLE webhooks (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
        source TEXT NOT NULL,
        secret_enc TEXT NOT NULL,
        runner_id TEXT,
        cwd TEXT,
        prompt TEXT,
        model TEXT,
        event_filter TEXT NOT NULL DEFAULT '[]',
        filters TEXT NOT NULL DEFAULT '[]',
        filter_mode TEXT NOT NULL DEFAULT 'and',
        enabled BIGINT NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX webhooks_user ON webhooks (user_id, created_at);

      CREATE TABLE webhook_deliveries (
        webhook_id TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        trigger_id TEXT NOT NULL,
        session_id TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (webhook_id, delivery_id)
      );
      CREATE INDEX webhook_deliveries_age ON webhook_deliveries (created_at);

      CREATE TABLE trigger_subscriptions (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        runner_id TEXT NOT NULL,
        trigger_type TEXT NOT NULL,
        params TEXT NOT NULL DEFAULT '{}',
        filters TEXT NOT NULL DEFAULT '[]',
        filter_mode TEXT NOT NULL DEFAULT 'and',
        created_at TEXT NOT NULL,
        ord BIGINT GENERATED BY DEFAULT AS IDENTITY
      );
      CREATE INDEX trigger_subscriptions_session ON trigger_subscriptions (session_id);
      CREATE INDEX trigger_subscriptions_runner ON trigger_subscriptions (runner_id, trigger_type);

      CREATE TABLE trigger_listeners (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        runner_id TEXT NOT NULL,
        trigger_type TEXT NOT NULL,
        prompt TEXT NOT NULL DEFAULT '',
        cwd TEXT,
        model TEXT,
        params TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        ord BIGINT GENERATED BY DEFAULT AS IDENTITY
      );
      CREATE INDEX trigger_listeners_runner ON trigger_listeners (runner_id, trigger_type);

      CREATE TABLE trigger_history (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        pos BIGINT NOT NULL,
        trigger_id TEXT NOT NULL,
        type TEXT NOT NULL,
        source TEXT NOT NULL,
        summary TEXT,
        payload TEXT NOT NULL,
        deliver_as TEXT NOT NULL,
        direction TEXT NOT NULL,
        expects_response BIGINT NOT NULL DEFAULT 0,
        response TEXT,
        ts TEXT NOT NULL
      );
      CREATE INDEX trigger_history_session ON trigger_history (session_id, pos);

      ALTER TABLE runners ADD COLUMN trigger_defs TEXT NOT NULL DEFAULT '[]';
    `,
  },
  {
    version: 3,
    name: "session listing in index order",
    sql: `
      DROP INDEX sessions_user;
      CREATE INDEX sessions_user ON sessions (user_id, created_at, id);
    `,
  },
  {
    version: 4,
    name: "used webhook nonces survive a restart",
    sql: `
      CREATE TABLE webhook_nonces (
        webhook_id TEXT NOT NULL,
        nonce TEXT NOT NULL,
        until BIGINT NOT NULL,
        PRIMARY KEY (webhook_id, nonce)
      );
      CREATE INDEX webhook_nonces_until ON webhook_nonces (until);
    `,
  },
  {
    version: 5,
    name: "session events stored in chunks",
    sql: `
      CREATE TABLE session_event_chunks (
        session_id TEXT NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        seqs TEXT,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, first_seq)
      );
      INSERT INTO session_event_chunks (session_id, first_seq, last_seq, seqs, body)
        SELECT session_id, seq, seq, NULL, body FROM session_events ORDER BY session_id, seq;
      DROP TABLE session_events;
    `,
  },
  {
    version: 6,
    name: "key scopes and runner binding",
    sql: `
      ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
      ALTER TABLE api_keys ADD COLUMN runner_id TEXT;
      UPDATE api_keys SET scope = 'runner' WHERE kind = 'runner';
    `,
  },
  {
    version: 7,
    name: "webhooks may require replay protection",
    sql: `
      ALTER TABLE webhooks ADD COLUMN require_replay_protection BIGINT NOT NULL DEFAULT 0;
    `,
  },
  {
    // better-auth's tables as better-auth 1.7.25 creates them on PostgreSQL
    // (its getMigrations, compiled for a pg pool); the conformance test checks
    // that better-auth finds nothing missing here.
    version: 8,
    name: "account tables",
    sql: `
      CREATE TABLE IF NOT EXISTS "user" ("id" text not null primary key, "name" text not null,
        "email" text not null unique, "emailVerified" boolean not null, "image" text,
        "createdAt" timestamptz default CURRENT_TIMESTAMP not null,
        "updatedAt" timestamptz default CURRENT_TIMESTAMP not null);
      CREATE TABLE IF NOT EXISTS "session" ("id" text not null primary key,
        "expiresAt" timestamptz not null, "token" text not null unique,
        "createdAt" timestamptz default CURRENT_TIMESTAMP not null,
        "updatedAt" timestamptz not null, "ipAddress" text, "userAgent" text,
        "userId" text not null references "user" ("id") on delete cascade);
      CREATE TABLE IF NOT EXISTS "account" ("id" text not null primary key,
        "accountId" text not null, "providerId" text not null,
        "userId" text not null references "user" ("id") on delete cascade, "accessToken" text,
        "refreshToken" text, "idToken" text, "accessTokenExpiresAt" timestamptz,
        "refreshTokenExpiresAt" timestamptz, "scope" text, "password" text,
        "createdAt" timestamptz default CURRENT_TIMESTAMP not null,
        "updatedAt" timestamptz not null);
      CREATE TABLE IF NOT EXISTS "verification" ("id" text not null primary key,
        "identifier" text not null, "value" text not null, "expiresAt" timestamptz not null,
        "createdAt" timestamptz default CURRENT_TIMESTAMP not null,
        "updatedAt" timestamptz default CURRENT_TIMESTAMP not null);
      CREATE INDEX IF NOT EXISTS "session_userId_idx" on "session" ("userId");
      CREATE INDEX IF NOT EXISTS "account_userId_idx" on "account" ("userId");
      CREATE INDEX IF NOT EXISTS "verification_identifier_idx" on "verification" ("identifier");
    `,
  },
  {
    version: 9,
    name: "event log sizes and session deletions",
    sql: `
      ALTER TABLE sessions ADD COLUMN event_bytes BIGINT NOT NULL DEFAULT 0;
      UPDATE sessions SET event_bytes = (
        SELECT COALESCE(SUM(length(body)), 0) FROM session_event_chunks
        WHERE session_id = sessions.id AND first_seq <= sessions.last_seq);
      CREATE INDEX sessions_ended ON sessions (status, pinned, ended_at);
      CREATE TABLE session_deletions (
        session_id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        at TEXT NOT NULL
      );
    `,
  },
  {
    version: 10,
    name: "attachments",
    sql: `
      CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        filename TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        size BIGINT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX attachments_session ON attachments (session_id);
      CREATE INDEX attachments_user ON attachments (user_id, expires_at);
      CREATE INDEX attachments_expiry ON attachments (expires_at);
      CREATE INDEX attachments_sha ON attachments (sha256);
    `,
  },
  {
    version: 11,
    name: "push subscriptions",
    sql: `
      CREATE TABLE push_subscriptions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        endpoint TEXT NOT NULL UNIQUE,
        p256dh TEXT NOT NULL,
        auth TEXT NOT NULL,
        enabled_events TEXT NOT NULL DEFAULT '*',
        suppress_children BIGINT NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
      );
      CREATE INDEX push_subscriptions_user ON push_subscriptions (user_id, created_at);
    `,
  },
  {
    version: 12,
    name: "session parents",
    sql: `
      ALTER TABLE sessions ADD COLUMN parent_id TEXT;
      ALTER TABLE sessions ADD COLUMN agent TEXT;
      CREATE INDEX sessions_parent ON sessions (parent_id);
    `,
  },
  {
    // Shared by every node (relay/limits.ts): a limit holds across nodes.
    version: 13,
    name: "rate limits",
    sql: `
      CREATE TABLE rate_limits (
        key TEXT PRIMARY KEY,
        hits BIGINT NOT NULL,
        resets_at BIGINT NOT NULL
      );
      CREATE INDEX rate_limits_resets ON rate_limits (resets_at);
    `,
  },
  {
    // Shared by every node (relay/tunnel_grants.ts): a preview opened on one
    // node is answered by all, and outlives a restart.
    version: 14,
    name: "tunnel grants",
    sql: `
      CREATE TABLE tunnel_grants (
        hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        runner_id TEXT NOT NULL,
        port BIGINT NOT NULL,
        auth_session_id TEXT,
        created_at BIGINT NOT NULL,
        last_used BIGINT NOT NULL,
        expires_at BIGINT NOT NULL
      );
      CREATE INDEX tunnel_grants_user ON tunnel_grants (user_id, last_used);
      CREATE INDEX tunnel_grants_expires ON tunnel_grants (expires_at);
      CREATE TABLE tunnel_tickets (
        hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        sealed TEXT NOT NULL,
        expires_at BIGINT NOT NULL
      );
      CREATE INDEX tunnel_tickets_user ON tunnel_tickets (user_id, expires_at);
      CREATE INDEX tunnel_tickets_expires ON tunnel_tickets (expires_at);
    `,
  },
];

/**
 * Applies the migrations the database lacks, through version `through`,
 * all in one transaction under an advisory lock: of two relay nodes starting
 * at once, one migrates and the other then finds the schema up to date.
 */
export async function migratePg(
  pool: PgPool,
  { log, through = Infinity }: { log?: (line: string) => void; through?: number } = {},
): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query({
      text: "SELECT pg_advisory_xact_lock($1)",
      values: [MIGRATION_LOCK],
    });
    await client.query(`CREATE TABLE IF NOT EXISTS baton_migrations (
        version BIGINT PRIMARY KEY,
        name TEXT NOT NULL,
        applied_at TEXT NOT NULL
      )`);
    const row = (await client.query("SELECT MAX(version) AS v FROM baton_migrations")).rows[0];
    const current = row?.v == null ? 0 : Number(row.v);
    for (const m of PG_MIGRATIONS) {
      if (m.version <= current) continue;
      if (m.version > through) break;
      const t0 = performance.now();
      if (current > 0) log?.(`Updating the database to version ${m.version} (${m.name})...`);
      await client.query(m.sql);
      await client.query({
        text: "INSERT INTO baton_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
        values: [m.version, m.name, new Date().toISOString()],
      });
      if (current > 0) {
        log?.(
          `Database at version ${m.version} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
        );
      }
    }
  });
}
