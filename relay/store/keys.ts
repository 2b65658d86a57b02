import type { Database } from "./db.ts";
import { Statements } from "./_statements.ts";
import type { KeyScope } from "../../shared/api.ts";
import type { Write } from "./_write.ts";

/** A stored API key or runner token; the secret itself is never stored. */
export interface KeyRecord {
  id: string;
  userId: string;
  name: string;
  kind: "api" | "runner";
  scope: KeyScope;
  /** The one runner the key reaches; null: any of its account's. */
  runnerId: string | null;
  prefix: string;
  hash: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
}

export interface KeyRow {
  id: string;
  user_id: string;
  name: string;
  kind: string;
  scope: string;
  runner_id: string | null;
  prefix: string;
  hash: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
}

/** A runner token is always `runner`; an API key `read` only when stored so. */
function scopeOf(kind: string, scope: string): KeyScope {
  if (kind === "runner") return "runner";
  return scope === "read" ? "read" : "full";
}

export function fromRow(r: KeyRow): KeyRecord {
  return {
    id: r.id,
    userId: r.user_id,
    name: r.name,
    kind: r.kind === "runner" ? "runner" : "api",
    scope: scopeOf(r.kind, r.scope),
    runnerId: r.runner_id,
    prefix: r.prefix,
    hash: r.hash,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    lastUsedAt: r.last_used_at,
  };
}

/** The insert of a new key or token (its hash, never the secret). */
export function insertKey(k: KeyRecord): Write {
  return {
    sql: `INSERT INTO api_keys (id, user_id, name, kind, scope, runner_id, prefix, hash, created_at,
         expires_at, last_used_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    values: [
      k.id,
      k.userId,
      k.name,
      k.kind,
      k.scope,
      k.runnerId,
      k.prefix,
      k.hash,
      k.createdAt,
      k.expiresAt,
      k.lastUsedAt,
    ],
  };
}

/** SQL for API keys and runner tokens. */
export class KeysRepo {
  readonly #sql: Statements;

  constructor(db: Database) {
    this.#sql = new Statements(db);
  }

  insert(k: KeyRecord): void {
    this.#sql.run(insertKey(k));
  }

  byHash(hash: string): KeyRecord | undefined {
    const r = this.#sql.sql("SELECT * FROM api_keys WHERE hash = ?").get(hash) as
      | KeyRow
      | undefined;
    return r && fromRow(r);
  }

  byId(id: string): KeyRecord | undefined {
    const r = this.#sql.sql("SELECT * FROM api_keys WHERE id = ?").get(id) as KeyRow | undefined;
    return r && fromRow(r);
  }

  listForUser(userId: string): KeyRecord[] {
    const rows = this.#sql.sql(
      "SELECT * FROM api_keys WHERE user_id = ? ORDER BY created_at DESC, id",
    ).all(userId) as unknown as KeyRow[];
    return rows.map(fromRow);
  }

  /** Deletes the key when it belongs to `userId`; false when there was none. */
  delete(userId: string, id: string): boolean {
    const res = this.#sql.sql("DELETE FROM api_keys WHERE id = ? AND user_id = ?").run(
      id,
      userId,
    );
    return Number(res.changes) > 0;
  }

  /**
   * Binds an unbound key to `runnerId`; the runner it is bound to afterwards
   * (another one when a concurrent hello bound it first).
   */
  bindRunner(id: string, runnerId: string): string | null {
    this.#sql.sql("UPDATE api_keys SET runner_id = ? WHERE id = ? AND runner_id IS NULL").run(
      runnerId,
      id,
    );
    const r = this.#sql.sql("SELECT runner_id FROM api_keys WHERE id = ?").get(id) as
      | { runner_id: string | null }
      | undefined;
    return r?.runner_id ?? null;
  }

  touch(id: string, at: string): void {
    this.#sql.sql("UPDATE api_keys SET last_used_at = ? WHERE id = ?").run(at, id);
  }
}
