import { fromRow, insertKey, type KeyRecord, type KeyRow } from "../keys.ts";
import type { PgSql } from "./_sql.ts";

/** API keys and runner tokens (see KeysRepo). */
export class PgKeysRepo {
  constructor(private readonly sql: PgSql) {}

  async insert(k: KeyRecord): Promise<void> {
    await this.sql.write(insertKey(k));
  }

  async byHash(hash: string): Promise<KeyRecord | undefined> {
    const r = await this.sql.get<KeyRow>("SELECT * FROM api_keys WHERE hash = ?", hash);
    return r && fromRow(r);
  }

  async byId(id: string): Promise<KeyRecord | undefined> {
    const r = await this.sql.get<KeyRow>("SELECT * FROM api_keys WHERE id = ?", id);
    return r && fromRow(r);
  }

  async listForUser(userId: string): Promise<KeyRecord[]> {
    const rows = await this.sql.all<KeyRow>(
      "SELECT * FROM api_keys WHERE user_id = ? ORDER BY created_at DESC, id",
      userId,
    );
    return rows.map(fromRow);
  }

  async delete(userId: string, id: string): Promise<boolean> {
    return await this.sql.run("DELETE FROM api_keys WHERE id = ? AND user_id = ?", id, userId) >
      0;
  }

  /** The runner the key is bound to afterwards (the first hello to bind it wins). */
  async bindRunner(id: string, runnerId: string): Promise<string | null> {
    await this.sql.run(
      "UPDATE api_keys SET runner_id = ? WHERE id = ? AND runner_id IS NULL",
      runnerId,
      id,
    );
    const r = await this.sql.get<{ runner_id: string | null }>(
      "SELECT runner_id FROM api_keys WHERE id = ?",
      id,
    );
    return r?.runner_id ?? null;
  }

  async touch(id: string, at: string): Promise<void> {
    await this.sql.run("UPDATE api_keys SET last_used_at = ? WHERE id = ?", at, id);
  }
}
