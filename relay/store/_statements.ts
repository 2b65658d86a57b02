import type { StatementResultingChanges, StatementSync } from "node:sqlite";
import type { Database } from "./db.ts";
import type { Write } from "./_write.ts";

/**
 * A repository's prepared statements, by SQL text: preparing costs more than
 * running a lookup by key, so each statement is prepared once per database
 * and kept. Every repository under `relay/store/` reaches SQL through one.
 */
export class Statements {
  readonly #cache = new Map<string, StatementSync>();
  readonly #arrays = new Map<string, StatementSync>();

  constructor(private readonly db: Database) {}

  /** The prepared statement of `sql` (rows come back as objects). */
  sql(sql: string): StatementSync {
    let st = this.#cache.get(sql);
    if (!st) this.#cache.set(sql, st = this.db.prepare(sql));
    return st;
  }

  /** Runs a write built for both engines. */
  run(w: Write): StatementResultingChanges {
    return this.sql(w.sql).run(...w.values);
  }

  /** The prepared statement of `sql` whose rows come back as arrays (no key per column). */
  arrays(sql: string): StatementSync {
    let st = this.#arrays.get(sql);
    if (!st) {
      st = this.db.prepare(sql);
      // Deno has it (as Node 22.16+ does); its node:sqlite types do not list it yet.
      (st as unknown as { setReturnArrays(on: boolean): void }).setReturnArrays(true);
      this.#arrays.set(sql, st);
    }
    return st;
  }
}
