import type { Database } from "./db.ts";
import { Statements } from "./_statements.ts";

/** An account as the relay reads it (better-auth owns the `user` table and writes it). */
export interface AccountRecord {
  id: string;
  email: string;
  name: string;
}

/** Reads of better-auth's `user` and `session` tables that the relay needs. */
export class AccountsRepo {
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#sql = new Statements(db);
  }

  byId(id: string): AccountRecord | undefined {
    return this.#sql.sql('SELECT id, email, name FROM "user" WHERE id = ?').get(id) as
      | AccountRecord
      | undefined;
  }

  /** The account id owning `email` (compared lowercased), if any. */
  idByEmail(email: string): string | undefined {
    const r = this.#sql.sql('SELECT id FROM "user" WHERE email = ?').get(email.toLowerCase()) as
      | { id: string }
      | undefined;
    return r?.id;
  }

  /** The oldest account (the owner of a `baton up` relay), if any. */
  first(): { id: string; email: string } | undefined {
    return this.#sql.sql('SELECT id, email FROM "user" ORDER BY "createdAt", id LIMIT 1').get() as
      | { id: string; email: string }
      | undefined;
  }

  count(): number {
    return (this.#sql.sql('SELECT COUNT(*) AS n FROM "user"').get() as { n: number }).n;
  }

  /** When a browser session (better-auth's `session` row) expires, in ms; undefined when it is gone. */
  browserSessionExpiry(id: string): number | undefined {
    const r = this.#sql.sql('SELECT "expiresAt" AS e FROM "session" WHERE id = ?').get(id) as
      | { e: string | number }
      | undefined;
    return r === undefined ? undefined : new Date(r.e).getTime();
  }
}
