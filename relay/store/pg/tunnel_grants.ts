import {
  checkMax,
  COUNT_GRANTS_SQL,
  DELETE_GRANT_SQL,
  GET_GRANT_SQL,
  grantFromRow,
  type GrantRecord,
  type GrantRow,
  INSERT_TICKET_SQL,
  insertGrant,
  REDEEM_TICKET_SQL,
  type SpentTicket,
  SWEEP_GRANTS_SQL,
  SWEEP_TICKETS_SQL,
  type TicketRecord,
  TOUCH_GRANT_SQL,
  TRIM_GRANTS_SQL,
  TRIM_TICKETS_SQL,
} from "../tunnel_grants.ts";
import type { PgSql } from "./_sql.ts";

/** A user's grants and tickets, locked while one of them is added (advisory lock space 4). */
const LOCK_USER = "SELECT pg_advisory_xact_lock(4, hashtext(?))";

/**
 * Preview grants and handoff tickets shared by every relay node (see
 * TunnelGrantsRepo). A ticket is spent by one `DELETE ... RETURNING`: of two
 * nodes spending it at once, the second waits for the first's row lock, then
 * finds the row gone and gets nothing back.
 */
export class PgTunnelGrantsRepo {
  constructor(private readonly sql: PgSql) {}

  /**
   * Stores a grant, the user's least recently used beyond `max` going, in one
   * transaction under the user's lock: two nodes adding at once do not both
   * keep `max`.
   */
  async insert(g: GrantRecord, max: number): Promise<void> {
    checkMax(max);
    await this.sql.tx(async (sql) => {
      await sql.get(LOCK_USER, g.userId);
      await sql.run(TRIM_GRANTS_SQL, g.userId, g.userId, max - 1);
      await sql.write(insertGrant(g));
    });
  }

  async get(hash: string): Promise<GrantRecord | null> {
    const r = await this.sql.get<GrantRow>(GET_GRANT_SQL, hash);
    return r ? grantFromRow(hash, r) : null;
  }

  async touch(hash: string, use: { lastUsed: number; expiresAt: number }): Promise<void> {
    await this.sql.run(TOUCH_GRANT_SQL, use.lastUsed, use.expiresAt, hash);
  }

  async delete(hash: string): Promise<boolean> {
    return await this.sql.run(DELETE_GRANT_SQL, hash) > 0;
  }

  async count(): Promise<number> {
    return (await this.sql.get<{ n: number }>(COUNT_GRANTS_SQL))!.n;
  }

  async insertTicket(t: TicketRecord, max: number): Promise<void> {
    checkMax(max);
    await this.sql.tx(async (sql) => {
      await sql.get(LOCK_USER, t.userId);
      await sql.run(TRIM_TICKETS_SQL, t.userId, t.userId, max - 1);
      await sql.run(INSERT_TICKET_SQL, t.hash, t.userId, t.sealed, t.expiresAt);
    });
  }

  async redeemTicket(hash: string): Promise<SpentTicket | null> {
    const r = await this.sql.get<{ sealed: string; expires_at: number }>(REDEEM_TICKET_SQL, hash);
    return r ? { sealed: r.sealed, expiresAt: r.expires_at } : null;
  }

  async sweep(now: number): Promise<number> {
    return await this.sql.run(SWEEP_GRANTS_SQL, now) + await this.sql.run(SWEEP_TICKETS_SQL, now);
  }
}
