import type { PgSql } from "./_sql.ts";

/** Per-user settings stored as JSON values under a key (see SettingsRepo). */
export class PgSettingsRepo {
  constructor(private readonly sql: PgSql) {}

  async get<T>(userId: string, key: string, fallback: T): Promise<T> {
    const r = await this.sql.get<{ value: string }>(
      "SELECT value FROM user_settings WHERE user_id = ? AND key = ?",
      userId,
      key,
    );
    return r ? JSON.parse(r.value) as T : fallback;
  }

  async setIfAbsent(userId: string, key: string, value: unknown): Promise<boolean> {
    const n = await this.sql.run(
      `INSERT INTO user_settings (user_id, key, value) VALUES (?, ?, ?)
       ON CONFLICT (user_id, key) DO NOTHING`,
      userId,
      key,
      JSON.stringify(value),
    );
    return n > 0;
  }

  async set(userId: string, key: string, value: unknown): Promise<void> {
    await this.sql.run(
      `INSERT INTO user_settings (user_id, key, value) VALUES (?, ?, ?)
       ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value`,
      userId,
      key,
      JSON.stringify(value),
    );
  }
}
