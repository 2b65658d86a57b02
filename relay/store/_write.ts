/**
 * A statement both engines run, written once: its SQL (with `?`
 * placeholders, which the PostgreSQL store numbers) and its values. Each
 * SQLite repository's module builds the writes of its table, so the columns
 * and how a field is stored (JSON text, 0 or 1 for a boolean) are in one
 * place; `Statements.run` and `PgSql.write` run them.
 *
 * @module
 */
import type { SQLInputValue } from "node:sqlite";

/** One SQL statement with its values. */
export interface Write {
  readonly sql: string;
  readonly values: SQLInputValue[];
}
