/**
 * SQL on PostgreSQL for the repositories under `relay/store/pg/`, through a
 * `pg` (node-postgres) pool. The repositories write their SQL as the SQLite
 * ones do, with `?` placeholders; each text is numbered here once (`$1`...)
 * and run as a named prepared statement, which `pg` parses once per pooled
 * connection and then reuses, as `Statements` does for SQLite.
 *
 * @module
 */
import type { Write } from "../_write.ts";

/** What a query answers (the part of `pg`'s result the repositories read). */
export interface PgResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}

/** A `pg` query: a named prepared statement and its values. */
export interface PgQuery {
  name?: string;
  text: string;
  values?: unknown[];
}

/** A connection, or the pool (which lends one per query). */
export interface PgQueryable {
  query(q: PgQuery | string): Promise<PgResult>;
}

/** A connection lent by the pool. */
export interface PgPoolClient extends PgQueryable {
  release(err?: Error | boolean): void;
}

/** The part of `pg`'s `Pool` this store uses. */
export interface PgPool extends PgQueryable {
  connect(): Promise<PgPoolClient>;
  end(): Promise<void>;
}

/** A PostgreSQL error as `pg` raises it. */
interface PgError extends Error {
  code?: string;
  table?: string;
  constraint?: string;
}

/**
 * The same words SQLite uses for a broken unique key ("UNIQUE constraint
 * failed: ..."), so a caller that looks at the message sees one thing on
 * either engine; PostgreSQL's own error is its `cause`.
 */
function byMeaning(err: unknown): unknown {
  const e = err as PgError;
  if (e?.code === "23505") {
    return new Error(`UNIQUE constraint failed: ${e.table ?? e.constraint ?? "unknown"}`, {
      cause: err,
    });
  }
  return err;
}

/**
 * Runs `fn` in one transaction on one connection lent by `pool`: committed
 * when it returns, rolled back when it throws.
 */
export async function inTransaction<T>(
  pool: PgPool,
  fn: (client: PgPoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const out = await fn(client);
    await client.query("COMMIT");
    client.release();
    return out;
  } catch (err) {
    try {
      await client.query("ROLLBACK");
      client.release();
    } catch {
      // The connection broke: the pool drops it rather than lend it again.
      client.release(true);
    }
    throw err;
  }
}

/** Named statements by SQL text, shared by every connection of one store. */
export class PgStatements {
  readonly #byText = new Map<string, { name: string; text: string }>();

  /** The prepared statement of `sql`: its name and its text with numbered placeholders. */
  named(sql: string): { name: string; text: string } {
    let st = this.#byText.get(sql);
    if (!st) {
      let n = 0;
      // No repository query holds a `?` inside a string literal.
      st = { name: `baton_${this.#byText.size + 1}`, text: sql.replace(/\?/g, () => `$${++n}`) };
      this.#byText.set(sql, st);
    }
    return st;
  }
}

/** SQL as the PostgreSQL repositories run it: on the pool, or inside one transaction. */
export class PgSql {
  constructor(
    private readonly target: PgQueryable,
    private readonly statements: PgStatements,
    private readonly pool: PgPool | null,
  ) {}

  async #query(sql: string, params: unknown[]): Promise<PgResult> {
    const { name, text } = this.statements.named(sql);
    try {
      return await this.target.query({ name, text, values: params });
    } catch (err) {
      throw byMeaning(err);
    }
  }

  /** Every row. */
  async all<T>(sql: string, ...params: unknown[]): Promise<T[]> {
    return (await this.#query(sql, params)).rows as T[];
  }

  /** The first row, or undefined. */
  async get<T>(sql: string, ...params: unknown[]): Promise<T | undefined> {
    return (await this.#query(sql, params)).rows[0] as T | undefined;
  }

  /** Runs a statement; how many rows it changed. */
  async run(sql: string, ...params: unknown[]): Promise<number> {
    return (await this.#query(sql, params)).rowCount ?? 0;
  }

  /** Runs a write built for both engines (see `Write`); how many rows it changed. */
  write(w: Write): Promise<number> {
    return this.run(w.sql, ...w.values);
  }

  /**
   * Runs `fn` in one transaction on one pooled connection (inside one
   * already, it joins it). No other query runs on that connection meanwhile.
   */
  async tx<T>(fn: (sql: PgSql) => Promise<T>): Promise<T> {
    if (!this.pool) return fn(this);
    return await inTransaction(this.pool, (client) => fn(new PgSql(client, this.statements, null)));
  }
}
