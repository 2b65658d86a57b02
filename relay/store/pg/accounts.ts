import type { AccountRecord } from "../accounts.ts";
import type { PgSql } from "./_sql.ts";

/** Reads of better-auth's `user` and `session` tables (see AccountsRepo). */
export class PgAccountsRepo {
  constructor(private readonly sql: PgSql) {}

  byId(id: string): Promise<AccountRecord | undefined> {
    return this.sql.get<AccountRecord>('SELECT id, email, name FROM "user" WHERE id = ?', id);
  }

  async idByEmail(email: string): Promise<string | undefined> {
    const r = await this.sql.get<{ id: string }>(
      'SELECT id FROM "user" WHERE email = ?',
      email.toLowerCase(),
    );
    return r?.id;
  }

  first(): Promise<{ id: string; email: string } | undefined> {
    return this.sql.get('SELECT id, email FROM "user" ORDER BY "createdAt", id LIMIT 1');
  }

  async count(): Promise<number> {
    return (await this.sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM "user"'))!.n;
  }

  async browserSessionExpiry(id: string): Promise<number | undefined> {
    // A timestamptz comes back as a Date.
    const r = await this.sql.get<{ e: Date | string }>(
      'SELECT "expiresAt" AS e FROM "session" WHERE id = ?',
      id,
    );
    return r === undefined ? undefined : new Date(r.e).getTime();
  }
}
