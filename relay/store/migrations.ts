/**
 * The relay's schema on SQLite, as its history: one migration per step,
 * applied in order by `migrate` (db.ts). relay/store/pg/migrations.ts has one
 * for each of these, with the same version and name.
 *
 * @module
 */
/** One schema step; applied once, in order, inside a transaction. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

// Append only: a released migration is never edited. SQL stays portable
// (no INSERT OR IGNORE, no AUTOINCREMENT) so a PostgreSQL store can reuse the
// repository queries; only these DDL statements are SQLite flavoured.
export const MIGRATIONS: Migration[] = [
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

      CREATE TABLE runners (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        name TEXT NOT NULL,
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
        last_seq INTEGER NOT NULL DEFAULT 0,
        pinned INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX sessions_user ON sessions (user_id, created_at);
      CREATE INDEX sessions_runner ON sessions (runner_id, status);

      CREATE TABLE session_events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      ) WITHOUT ROWID;

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
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX webhooks_user ON webhooks (user_id, created_at);

      CREATE TABLE webhook_deliveries (
        webhook_id TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        trigger_id TEXT NOT NULL,
        session_id TEXT,
        created_at INTEGER NOT NULL,
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
        created_at TEXT NOT NULL
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
        updated_at TEXT NOT NULL
      );
      CREATE INDEX trigger_listeners_runner ON trigger_listeners (runner_id, trigger_type);

      CREATE TABLE trigger_history (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        pos INTEGER NOT NULL,
        trigger_id TEXT NOT NULL,
        type TEXT NOT NULL,
        source TEXT NOT NULL,
        summary TEXT,
        payload TEXT NOT NULL,
        deliver_as TEXT NOT NULL,
        direction TEXT NOT NULL,
        expects_response INTEGER NOT NULL DEFAULT 0,
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
        until INTEGER NOT NULL,
        PRIMARY KEY (webhook_id, nonce)
      ) WITHOUT ROWID;
      CREATE INDEX webhook_nonces_until ON webhook_nonces (until);
    `,
  },
  {
    // A row per commit and session instead of a row per event (see EventsRepo).
    // Stored events come across one per chunk.
    version: 5,
    name: "session events stored in chunks",
    sql: `
      CREATE TABLE session_event_chunks (
        session_id TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
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
    // Existing API keys keep doing everything (full); existing runner tokens
    // are bound to a runner by their next hello (see runner_socket.ts).
    version: 6,
    name: "key scopes and runner binding",
    sql: `
      ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'full';
      ALTER TABLE api_keys ADD COLUMN runner_id TEXT;
      UPDATE api_keys SET scope = 'runner' WHERE kind = 'runner';
      `,
  },
  {
    // New webhooks refuse deliveries that can be replayed (legacy signing,
    // GitHub's without a delivery id); existing ones keep what they accepted.
    version: 7,
    name: "webhooks may require replay protection",
    sql: `
      ALTER TABLE webhooks ADD COLUMN require_replay_protection INTEGER NOT NULL DEFAULT 0;
      `,
  },
  {
    // better-auth's tables, exactly as better-auth 1.7.25 creates them (its
    // getMigrations), so that the relay need not load better-auth at start to
    // create them (~30 MB it loads on first use instead; relay/auth.ts).
    // Before this, better-auth created them at every start: on such a
    // database they are there already. relay/auth_test.ts checks that
    // better-auth finds nothing missing; a better-auth upgrade that wants
    // more gets a migration of its own.
    version: 8,
    name: "account tables",
    sql: `
      CREATE TABLE IF NOT EXISTS "user" ("id" text not null primary key, "name" text not null,
        "email" text not null unique, "emailVerified" integer not null, "image" text,
        "createdAt" date not null, "updatedAt" date not null);
      CREATE TABLE IF NOT EXISTS "session" ("id" text not null primary key,
        "expiresAt" date not null, "token" text not null unique, "createdAt" date not null,
        "updatedAt" date not null, "ipAddress" text, "userAgent" text,
        "userId" text not null references "user" ("id") on delete cascade);
      CREATE TABLE IF NOT EXISTS "account" ("id" text not null primary key,
        "accountId" text not null, "providerId" text not null,
        "userId" text not null references "user" ("id") on delete cascade, "accessToken" text,
        "refreshToken" text, "idToken" text, "accessTokenExpiresAt" date,
        "refreshTokenExpiresAt" date, "scope" text, "password" text, "createdAt" date not null,
        "updatedAt" date not null);
      CREATE TABLE IF NOT EXISTS "verification" ("id" text not null primary key,
        "identifier" text not null, "value" text not null, "expiresAt" date not null,
        "createdAt" date not null, "updatedAt" date not null);
      CREATE INDEX IF NOT EXISTS "session_userId_idx" on "session" ("userId");
      CREATE INDEX IF NOT EXISTS "account_userId_idx" on "account" ("userId");
      CREATE INDEX IF NOT EXISTS "verification_identifier_idx" on "verification" ("identifier");
      `,
  },
  {
    // Retention (relay/retention.ts) weighs sessions by the size of their
    // logs without reading them: each row carries its log's size, kept with
    // its last seq (see EventPipeline). A deletion leaves a row in
    // session_deletions until its events are gone, so one cut short by a
    // stop is finished at the next start.
    version: 9,
    name: "event log sizes and session deletions",
    sql: `
      ALTER TABLE sessions ADD COLUMN event_bytes INTEGER NOT NULL DEFAULT 0;
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
    // Files uploaded into a session (relay/attachments.ts). The bytes are
    // files under <data-dir>/attachments named by their sha-256; a row says
    // who may read which, until when. A deleted session takes its rows with
    // it (store/retention.ts); the sweep removes blobs no row names.
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
        size INTEGER NOT NULL,
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
    // Browser push subscriptions (relay/push.ts): one row per browser
    // endpoint, owned by the account that subscribed it last.
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
        suppress_children INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
      );
      CREATE INDEX push_subscriptions_user ON push_subscriptions (user_id, created_at);
    `,
  },
  {
    // Subagents (relay/subagents.ts): a child session names the session whose
    // agent started it, and the agent definition it runs as, if any.
    version: 12,
    name: "session parents",
    sql: `
      ALTER TABLE sessions ADD COLUMN parent_id TEXT;
      ALTER TABLE sessions ADD COLUMN agent TEXT;
      CREATE INDEX sessions_parent ON sessions (parent_id);
    `,
  },
  {
    // Request counters (store/rate_limits.ts): one fixed window per key. A
    // relay on SQLite counts in memory (relay/limits.ts); the table is here so
    // the two engines keep one schema, and for PostgreSQL's nodes to share.
    version: 13,
    name: "rate limits",
    sql: `
      CREATE TABLE rate_limits (
        key TEXT PRIMARY KEY,
        hits INTEGER NOT NULL,
        resets_at INTEGER NOT NULL
      );
      CREATE INDEX rate_limits_resets ON rate_limits (resets_at);
    `,
  },
  {
    // Preview grants and their handoff tickets (relay/tunnel_grants.ts), by
    // the SHA-256 of their token, never the token: every node of a cluster
    // answers a preview another node opened, and a restart keeps them. A
    // ticket's grant is sealed with a key only its token gives (see there).
    version: 14,
    name: "tunnel grants",
    sql: `
      CREATE TABLE tunnel_grants (
        hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        runner_id TEXT NOT NULL,
        port INTEGER NOT NULL,
        auth_session_id TEXT,
        created_at INTEGER NOT NULL,
        last_used INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE INDEX tunnel_grants_user ON tunnel_grants (user_id, last_used);
      CREATE INDEX tunnel_grants_expires ON tunnel_grants (expires_at);
      CREATE TABLE tunnel_tickets (
        hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        sealed TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE INDEX tunnel_tickets_user ON tunnel_tickets (user_id, expires_at);
      CREATE INDEX tunnel_tickets_expires ON tunnel_tickets (expires_at);
    `,
  },
];
