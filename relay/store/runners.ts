import type { Database } from "./db.ts";
import { Statements } from "./_statements.ts";
import type { TriggerDef } from "../../shared/triggers.ts";
import type { Write } from "./_write.ts";

/** A runner as stored: who owns it and what it said in its last hello. */
export interface RunnerRecord {
  id: string;
  userId: string;
  name: string;
  platform: string;
  version: string;
  roots: string[];
  createdAt: string;
  lastSeenAt: string | null;
}

export interface RunnerRow {
  id: string;
  user_id: string;
  name: string;
  platform: string;
  version: string;
  roots: string;
  created_at: string;
  last_seen_at: string | null;
}

export function fromRow(r: RunnerRow): RunnerRecord {
  return {
    id: r.id,
    userId: r.user_id,
    name: r.name,
    platform: r.platform,
    version: r.version,
    roots: JSON.parse(r.roots) as string[],
    createdAt: r.created_at,
    lastSeenAt: r.last_seen_at,
  };
}

/** Inserts a runner, or updates what its hello says (its owner and creation stay). */
export function upsertRunner(r: RunnerRecord): Write {
  return {
    sql:
      `INSERT INTO runners (id, user_id, name, platform, version, roots, created_at, last_seen_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, platform = excluded.platform,
         version = excluded.version, roots = excluded.roots, last_seen_at = excluded.last_seen_at`,
    values: [
      r.id,
      r.userId,
      r.name,
      r.platform,
      r.version,
      JSON.stringify(r.roots),
      r.createdAt,
      r.lastSeenAt,
    ],
  };
}

/** SQL for runners. */
export class RunnersRepo {
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#sql = new Statements(db);
  }

  get(id: string): RunnerRecord | undefined {
    const r = this.#sql.sql("SELECT * FROM runners WHERE id = ?").get(id) as
      | RunnerRow
      | undefined;
    return r && fromRow(r);
  }

  /** The runner when `userId` owns it; foreign and missing ids look alike. */
  getOwned(userId: string, id: string): RunnerRecord | undefined {
    const r = this.get(id);
    return r && r.userId === userId ? r : undefined;
  }

  listForUser(userId: string): RunnerRecord[] {
    const rows = this.#sql.sql(
      "SELECT * FROM runners WHERE user_id = ? ORDER BY name, id",
    ).all(userId) as unknown as RunnerRow[];
    return rows.map(fromRow);
  }

  /** Inserts or refreshes a runner after a hello. */
  upsert(r: RunnerRecord): void {
    this.#sql.run(upsertRunner(r));
  }

  /** The trigger definitions the runner last announced (services and its own). */
  triggerDefs(id: string): TriggerDef[] {
    const r = this.#sql.sql("SELECT trigger_defs FROM runners WHERE id = ?").get(id) as
      | { trigger_defs: string }
      | undefined;
    return r ? JSON.parse(r.trigger_defs) as TriggerDef[] : [];
  }

  setTriggerDefs(id: string, defs: TriggerDef[]): void {
    this.#sql.sql("UPDATE runners SET trigger_defs = ? WHERE id = ?").run(
      JSON.stringify(defs),
      id,
    );
  }

  touch(id: string, at: string): void {
    this.#sql.sql("UPDATE runners SET last_seen_at = ? WHERE id = ?").run(at, id);
  }
}
