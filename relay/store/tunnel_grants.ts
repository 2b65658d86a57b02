import { type Database, transaction } from "./db.ts";
import { Statements } from "./_statements.ts";
import type { Write } from "./_write.ts";

/** A preview grant as stored, under the SHA-256 of its token (relay/tunnel_grants.ts). */
export interface GrantRecord {
  hash: string;
  userId: string;
  runnerId: string;
  port: number;
  authSessionId: string | null;
  /** Epoch ms. */
  createdAt: number;
  /** When a node last wrote that it was used (epoch ms; written at most once a minute). */
  lastUsed: number;
  /** The end of its idle hour or of its day, whichever comes first (epoch ms). */
  expiresAt: number;
}

/** A handoff ticket as stored: what it hands over is sealed with a key only its token gives. */
export interface TicketRecord {
  hash: string;
  userId: string;
  sealed: string;
  /** Epoch ms. */
  expiresAt: number;
}

/** What spending a ticket gives back. */
export type SpentTicket = Pick<TicketRecord, "sealed" | "expiresAt">;

/** A `tunnel_grants` row as both engines read it (the hash is the key asked for). */
export interface GrantRow {
  user_id: string;
  runner_id: string;
  port: number;
  auth_session_id: string | null;
  created_at: number;
  last_used: number;
  expires_at: number;
}

/** The record of a row read under `hash`. */
export function grantFromRow(hash: string, r: GrantRow): GrantRecord {
  return {
    hash,
    userId: r.user_id,
    runnerId: r.runner_id,
    port: r.port,
    authSessionId: r.auth_session_id,
    createdAt: r.created_at,
    lastUsed: r.last_used,
    expiresAt: r.expires_at,
  };
}

/**
 * Keeps a user's most recently used grants, as many as the third parameter
 * says, and deletes the rest (run before an insert, with the bound less one).
 * Parameters: user, user, how many to keep.
 */
export const TRIM_GRANTS_SQL = `
  DELETE FROM tunnel_grants WHERE user_id = ? AND hash NOT IN (
    SELECT hash FROM tunnel_grants WHERE user_id = ?
    ORDER BY last_used DESC, created_at DESC LIMIT ?)`;

/** Stores a grant (both engines run it). */
export function insertGrant(g: GrantRecord): Write {
  return {
    sql: `INSERT INTO tunnel_grants
      (hash, user_id, runner_id, port, auth_session_id, created_at, last_used, expires_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    values: [
      g.hash,
      g.userId,
      g.runnerId,
      g.port,
      g.authSessionId,
      g.createdAt,
      g.lastUsed,
      g.expiresAt,
    ],
  };
}

/** A grant by hash. */
export const GET_GRANT_SQL = `
  SELECT user_id, runner_id, port, auth_session_id, created_at, last_used, expires_at
  FROM tunnel_grants WHERE hash = ?`;

/** Records a use: last_used, expires_at, hash. */
export const TOUCH_GRANT_SQL =
  "UPDATE tunnel_grants SET last_used = ?, expires_at = ? WHERE hash = ?";

/** Forgets a grant by hash. */
export const DELETE_GRANT_SQL = "DELETE FROM tunnel_grants WHERE hash = ?";

/** Grants stored, expired ones not yet swept included. */
export const COUNT_GRANTS_SQL = "SELECT COUNT(*) AS n FROM tunnel_grants";

/** Like TRIM_GRANTS_SQL, for a user's tickets: the latest to expire stay. */
export const TRIM_TICKETS_SQL = `
  DELETE FROM tunnel_tickets WHERE user_id = ? AND hash NOT IN (
    SELECT hash FROM tunnel_tickets WHERE user_id = ? ORDER BY expires_at DESC LIMIT ?)`;

/** Stores a ticket: hash, user, sealed, expires_at. */
export const INSERT_TICKET_SQL =
  "INSERT INTO tunnel_tickets (hash, user_id, sealed, expires_at) VALUES (?, ?, ?, ?)";

/**
 * Spends a ticket: one statement deletes its row and answers what it held.
 * Of two nodes spending one ticket at once, only the one whose DELETE removed
 * the row gets it back (the other's finds nothing to delete).
 */
export const REDEEM_TICKET_SQL =
  "DELETE FROM tunnel_tickets WHERE hash = ? RETURNING sealed, expires_at";

/** Forgets grants that expired before `now` (the indexes on expires_at find them). */
export const SWEEP_GRANTS_SQL = "DELETE FROM tunnel_grants WHERE expires_at < ?";
/** Forgets tickets that expired before `now`. */
export const SWEEP_TICKETS_SQL = "DELETE FROM tunnel_tickets WHERE expires_at < ?";

/** Checks what every engine's bounded insert is given. */
export function checkMax(max: number): void {
  if (!(Number.isInteger(max) && max >= 1)) throw new RangeError(`Invalid bound: ${max}`);
}

/**
 * Preview grants and handoff tickets (tables `tunnel_grants`,
 * `tunnel_tickets`), shared by every relay node on the database. The rules
 * (how long a grant lives, when its use is written) are TunnelGrants'; this
 * keeps rows, bounds them per user and spends a ticket once.
 */
export class TunnelGrantsRepo {
  readonly #db: Database;
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#db = db;
    this.#sql = new Statements(db);
  }

  /** Stores a grant; the user's least recently used beyond `max` (this one counted) go. */
  insert(g: GrantRecord, max: number): void {
    checkMax(max);
    transaction(this.#db, () => {
      this.#sql.sql(TRIM_GRANTS_SQL).run(g.userId, g.userId, max - 1);
      this.#sql.run(insertGrant(g));
    });
  }

  /** The grant stored under `hash`, expired or not. */
  get(hash: string): GrantRecord | null {
    const r = this.#sql.sql(GET_GRANT_SQL).get(hash) as GrantRow | undefined;
    return r ? grantFromRow(hash, r) : null;
  }

  /** Records a use of a grant and its new end. */
  touch(hash: string, use: { lastUsed: number; expiresAt: number }): void {
    this.#sql.sql(TOUCH_GRANT_SQL).run(use.lastUsed, use.expiresAt, hash);
  }

  /** Deletes a grant; whether it was there. */
  delete(hash: string): boolean {
    return Number(this.#sql.sql(DELETE_GRANT_SQL).run(hash).changes) > 0;
  }

  /** Grants stored now, expired ones not yet swept included. */
  count(): number {
    return (this.#sql.sql(COUNT_GRANTS_SQL).get() as { n: number }).n;
  }

  /** Stores a ticket; the user's soonest to expire beyond `max` (this one counted) go. */
  insertTicket(t: TicketRecord, max: number): void {
    checkMax(max);
    transaction(this.#db, () => {
      this.#sql.sql(TRIM_TICKETS_SQL).run(t.userId, t.userId, max - 1);
      this.#sql.sql(INSERT_TICKET_SQL).run(t.hash, t.userId, t.sealed, t.expiresAt);
    });
  }

  /** Spends the ticket stored under `hash`: what it held, to one caller only, then never again. */
  redeemTicket(hash: string): SpentTicket | null {
    const r = this.#sql.sql(REDEEM_TICKET_SQL).get(hash) as
      | { sealed: string; expires_at: number }
      | undefined;
    return r ? { sealed: r.sealed, expiresAt: r.expires_at } : null;
  }

  /** Deletes the grants and tickets that expired before `now`; how many. */
  sweep(now: number): number {
    return Number(this.#sql.sql(SWEEP_GRANTS_SQL).run(now).changes) +
      Number(this.#sql.sql(SWEEP_TICKETS_SQL).run(now).changes);
  }
}
