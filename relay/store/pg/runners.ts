import { fromRow, type RunnerRecord, type RunnerRow, upsertRunner } from "../runners.ts";
import type { TriggerDef } from "../../../shared/triggers.ts";
import type { PgSql } from "./_sql.ts";

/** Runners (see RunnersRepo). */
export class PgRunnersRepo {
  constructor(private readonly sql: PgSql) {}

  async get(id: string): Promise<RunnerRecord | undefined> {
    const r = await this.sql.get<RunnerRow>("SELECT * FROM runners WHERE id = ?", id);
    return r && fromRow(r);
  }

  async getOwned(userId: string, id: string): Promise<RunnerRecord | undefined> {
    const r = await this.get(id);
    return r && r.userId === userId ? r : undefined;
  }

  async listForUser(userId: string): Promise<RunnerRecord[]> {
    const rows = await this.sql.all<RunnerRow>(
      "SELECT * FROM runners WHERE user_id = ? ORDER BY name, id",
      userId,
    );
    return rows.map(fromRow);
  }

  async upsert(r: RunnerRecord): Promise<void> {
    await this.sql.write(upsertRunner(r));
  }

  async triggerDefs(id: string): Promise<TriggerDef[]> {
    const r = await this.sql.get<{ trigger_defs: string }>(
      "SELECT trigger_defs FROM runners WHERE id = ?",
      id,
    );
    return r ? JSON.parse(r.trigger_defs) as TriggerDef[] : [];
  }

  async setTriggerDefs(id: string, defs: TriggerDef[]): Promise<void> {
    await this.sql.run(
      "UPDATE runners SET trigger_defs = ? WHERE id = ?",
      JSON.stringify(defs),
      id,
    );
  }

  async touch(id: string, at: string): Promise<void> {
    await this.sql.run("UPDATE runners SET last_seen_at = ? WHERE id = ?", at, id);
  }
}
