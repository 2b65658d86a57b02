import { type Database, transaction } from "./db.ts";
import { Statements } from "./_statements.ts";
import type {
  ModelRef,
  SessionActivity,
  SessionInfo,
  SessionStatus,
} from "../../shared/protocol.ts";
import type { Write } from "./_write.ts";

/** A session as stored, with its owner. */
export interface SessionRecord extends SessionInfo {
  userId: string;
  prompt: string;
  /**
   * Size of its stored events' JSON (characters, about bytes), as of
   * `lastSeq` in the row; in memory the pipeline's count is ahead of it.
   */
  eventBytes?: number;
}

export interface SessionRow {
  id: string;
  user_id: string;
  runner_id: string;
  status: string;
  activity: string;
  cwd: string;
  model: string | null;
  prompt: string;
  title: string;
  created_at: string;
  updated_at: string;
  ended_at: string | null;
  end_reason: string | null;
  last_seq: number;
  pinned: number;
  event_bytes?: number;
  parent_id?: string | null;
  agent?: string | null;
}

/** Parsed models by their JSON: a listing has thousands of rows but few distinct models. */
const MODELS = new Map<string, ModelRef>();

function parseModel(json: string): ModelRef {
  let m = MODELS.get(json);
  if (!m) {
    m = JSON.parse(json) as ModelRef;
    if (MODELS.size > 1000) MODELS.clear();
    MODELS.set(json, m);
  }
  // A copy: callers may change what they get.
  return { provider: m.provider, id: m.id };
}

export function fromRow(r: SessionRow): SessionRecord {
  return {
    sessionId: r.id,
    userId: r.user_id,
    runnerId: r.runner_id,
    status: r.status as SessionStatus,
    activity: r.activity as SessionActivity,
    cwd: r.cwd,
    model: r.model ? parseModel(r.model) : null,
    prompt: r.prompt,
    title: r.title,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    endedAt: r.ended_at,
    endReason: r.end_reason,
    lastSeq: r.last_seq,
    isPinned: r.pinned === 1,
    parentId: r.parent_id ?? null,
    agent: r.agent ?? null,
    // Listings leave it out: undefined, not 0, so nobody takes it for a size.
    ...(r.event_bytes !== undefined ? { eventBytes: r.event_bytes } : {}),
  };
}

/** The fields of a session that change while it runs. */
export type SessionPatch = Partial<
  Pick<SessionRecord, "status" | "activity" | "cwd" | "model" | "title" | "endedAt" | "endReason">
>;

const COLUMNS: Record<keyof SessionPatch, string> = {
  status: "status",
  activity: "activity",
  cwd: "cwd",
  model: "model",
  title: "title",
  endedAt: "ended_at",
  endReason: "end_reason",
};

/** The insert of a new session. */
export function insertSession(s: SessionRecord): Write {
  return {
    sql: `INSERT INTO sessions (id, user_id, runner_id, status, activity, cwd, model, prompt, title,
         created_at, updated_at, ended_at, end_reason, last_seq, pinned, parent_id, agent)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    values: [
      s.sessionId,
      s.userId,
      s.runnerId,
      s.status,
      s.activity,
      s.cwd,
      s.model ? JSON.stringify(s.model) : null,
      s.prompt,
      s.title,
      s.createdAt,
      s.updatedAt,
      s.endedAt,
      s.endReason,
      s.lastSeq,
      s.isPinned ? 1 : 0,
      s.parentId ?? null,
      s.agent ?? null,
    ],
  };
}

/** The update of a session's changing fields and `updated_at`; null when `patch` names none. */
export function updateSession(id: string, patch: SessionPatch, at: string): Write | null {
  const sets: string[] = [];
  const values: (string | null)[] = [];
  for (const [key, column] of Object.entries(COLUMNS) as [keyof SessionPatch, string][]) {
    if (!(key in patch)) continue;
    const v = patch[key];
    sets.push(`${column} = ?`);
    values.push(key === "model" ? (v ? JSON.stringify(v) : null) : (v as string | null));
  }
  if (sets.length === 0) return null;
  return {
    sql: `UPDATE sessions SET ${sets.join(", ")}, updated_at = ? WHERE id = ?`,
    values: [...values, at, id],
  };
}

/** SQL for sessions (the event log itself is in {@linkcode EventsRepo}). */
export class SessionsRepo {
  readonly #sql: Statements;
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
    this.#sql = new Statements(db);
  }

  insert(s: SessionRecord): void {
    this.#sql.run(insertSession(s));
  }

  get(id: string): SessionRecord | undefined {
    const r = this.#sql.sql("SELECT * FROM sessions WHERE id = ?").get(id) as
      | SessionRow
      | undefined;
    return r && fromRow(r);
  }

  /** The session when `userId` owns it; foreign and missing ids look alike. */
  getOwned(userId: string, id: string): SessionRecord | undefined {
    const s = this.get(id);
    return s && s.userId === userId ? s : undefined;
  }

  /**
   * Every session of a user, newest first, without their prompts (a listing
   * shows titles; the prompt can be long). Rows come back as arrays: on a
   * listing of thousands they cost half as much as objects.
   */
  listForUser(userId: string): SessionRecord[] {
    const st = this.#sql.arrays(
      `SELECT id, user_id, runner_id, status, activity, cwd, model, title, created_at,
         updated_at, ended_at, end_reason, last_seq, pinned, parent_id, agent
       FROM sessions WHERE user_id = ? ORDER BY created_at DESC, id DESC`,
    );
    return (st.all(userId) as unknown as unknown[][]).map((r) =>
      fromRow({
        id: r[0] as string,
        user_id: r[1] as string,
        runner_id: r[2] as string,
        status: r[3] as string,
        activity: r[4] as string,
        cwd: r[5] as string,
        model: r[6] as string | null,
        prompt: "",
        title: r[7] as string,
        created_at: r[8] as string,
        updated_at: r[9] as string,
        ended_at: r[10] as string | null,
        end_reason: r[11] as string | null,
        last_seq: r[12] as number,
        pinned: r[13] as number,
        parent_id: r[14] as string | null,
        agent: r[15] as string | null,
      })
    );
  }

  listLiveForRunner(runnerId: string): SessionRecord[] {
    const rows = this.#sql.sql(
      "SELECT * FROM sessions WHERE runner_id = ? AND status IN ('starting', 'running')",
    ).all(runnerId) as unknown as SessionRow[];
    return rows.map(fromRow);
  }

  listPinned(userId: string): SessionRecord[] {
    const rows = this.#sql.sql(
      "SELECT * FROM sessions WHERE user_id = ? AND pinned = 1 ORDER BY created_at DESC, id DESC",
    ).all(userId) as unknown as SessionRow[];
    return rows.map(fromRow);
  }

  update(id: string, patch: SessionPatch, at: string): void {
    const w = updateSession(id, patch, at);
    if (w) this.#sql.run(w);
  }

  /** Moves the row's last seq forward, with its log's size at that seq. */
  setLastSeq(id: string, seq: number, eventBytes: number): void {
    this.#sql.sql(
      "UPDATE sessions SET last_seq = ?, event_bytes = ? WHERE id = ? AND last_seq < ?",
    ).run(seq, eventBytes, id, seq);
  }

  /**
   * {@linkcode setLastSeq} for several sessions in one transaction (what the
   * event pipeline writes for the sessions that leave memory, and at shutdown).
   */
  setLastSeqs(list: { id: string; seq: number; eventBytes: number }[]): void {
    if (list.length === 0) return;
    transaction(this.#db, () => {
      for (const l of list) this.setLastSeq(l.id, l.seq, l.eventBytes);
    });
  }

  /**
   * Brings every session's `last_seq` up to the highest seq in its event log
   * (they lag it after a crash: see Hub), and its size with it (only the
   * chunks past the old last seq are read). One index lookup per session.
   */
  catchUpLastSeqs(): number {
    const res = this.#sql.sql(
      `WITH tail AS (
         SELECT id, (SELECT last_seq FROM session_event_chunks WHERE session_id = sessions.id
                     ORDER BY first_seq DESC LIMIT 1) AS seq
         FROM sessions)
       UPDATE sessions SET last_seq = tail.seq,
         event_bytes = event_bytes + (SELECT COALESCE(SUM(length(body)), 0)
           FROM session_event_chunks
           WHERE session_id = sessions.id AND first_seq > sessions.last_seq)
       FROM tail
       WHERE tail.id = sessions.id AND sessions.last_seq < tail.seq`,
    ).run();
    return Number(res.changes);
  }

  /** Pins or unpins a session of `userId`; false when it is not theirs or not there. */
  setPinned(userId: string, id: string, pinned: boolean): boolean {
    const res = this.#sql.sql("UPDATE sessions SET pinned = ? WHERE id = ? AND user_id = ?").run(
      pinned ? 1 : 0,
      id,
      userId,
    );
    return Number(res.changes) > 0;
  }

  /** The sessions a session's agent started (its subagents), oldest first. */
  listChildren(parentId: string): SessionRecord[] {
    const rows = this.#sql.sql(
      "SELECT * FROM sessions WHERE parent_id = ? ORDER BY created_at, id",
    ).all(parentId) as unknown as SessionRow[];
    return rows.map(fromRow);
  }

  /** How many subagents a session has started (ended ones included). */
  countChildren(parentId: string): number {
    const r = this.#sql.sql("SELECT COUNT(*) AS n FROM sessions WHERE parent_id = ?").get(
      parentId,
    ) as { n: number };
    return Number(r.n);
  }

  delete(id: string): void {
    this.#sql.sql("DELETE FROM sessions WHERE id = ?").run(id);
  }
}
