import type { Database } from "./db.ts";
import { Statements } from "./_statements.ts";

/** SQL for per-user settings stored as JSON values under a key. */
export class SettingsRepo {
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#sql = new Statements(db);
  }

  get<T>(userId: string, key: string, fallback: T): T {
    const r = this.#sql.sql("SELECT value FROM user_settings WHERE user_id = ? AND key = ?")
      .get(userId, key) as { value: string } | undefined;
    return r ? JSON.parse(r.value) as T : fallback;
  }

  /** Stores `value` unless the key has one already; whether it was stored. */
  setIfAbsent(userId: string, key: string, value: unknown): boolean {
    const r = this.#sql.sql(
      `INSERT INTO user_settings (user_id, key, value) VALUES (?, ?, ?)
       ON CONFLICT (user_id, key) DO NOTHING`,
    ).run(userId, key, JSON.stringify(value));
    return Number(r.changes) > 0;
  }

  set(userId: string, key: string, value: unknown): void {
    this.#sql.sql(
      `INSERT INTO user_settings (user_id, key, value) VALUES (?, ?, ?)
       ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value`,
    ).run(userId, key, JSON.stringify(value));
  }
}
