import { join } from "node:path";
import type { ModelRef } from "../shared/protocol.ts";

/** What the daemon keeps on disk about a live session, to bring it back after a restart. */
export interface SessionEntry {
  sessionId: string;
  cwd: string;
  model: ModelRef | null;
  /** pi's conversation file, once the worker reported it. */
  piSessionFile: string | null;
  /** The worker's process id (to stop an orphan before resuming). */
  pid: number | null;
  createdAt: string;
  /** A turn was in flight: a restarted daemon resumes the session at once. */
  busy?: boolean;
  /** The worker was stopped after a while without a turn; the next input wakes it. */
  asleep?: boolean;
  /** A subagent's role: the agent definition it runs as (runner/subagents.ts). */
  agent?: string;
}

/**
 * `<home>/.baton/runner/sessions/<id>.json`, one file per live session, and
 * `<home>/.baton/runner/conversations/<id>.json`, where each session's pi
 * conversation file is (kept after the session ends, until the relay deletes
 * the session: see {@linkcode SessionRegistry.conversationOf}).
 */
export class SessionRegistry {
  readonly dir: string;
  readonly conversationsDir: string;

  constructor(batonDir: string) {
    this.dir = join(batonDir, "runner", "sessions");
    this.conversationsDir = join(batonDir, "runner", "conversations");
  }

  /** Remembers a session's conversation file, for when the relay deletes the session. */
  async saveConversation(sessionId: string, file: string): Promise<void> {
    await Deno.mkdir(this.conversationsDir, { recursive: true, mode: 0o700 });
    const path = join(this.conversationsDir, `${sessionId}.json`);
    const tmp = `${path}.${crypto.randomUUID()}.tmp`;
    await Deno.writeTextFile(tmp, JSON.stringify({ piSessionFile: file }) + "\n", { mode: 0o600 });
    await Deno.rename(tmp, path);
  }

  /** The conversation file remembered for a session, if any. */
  async conversationOf(sessionId: string): Promise<string | null> {
    try {
      const text = await Deno.readTextFile(join(this.conversationsDir, `${sessionId}.json`));
      const file = (JSON.parse(text) as { piSessionFile?: unknown }).piSessionFile;
      return typeof file === "string" ? file : null;
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof SyntaxError) return null;
      throw err;
    }
  }

  async removeConversation(sessionId: string): Promise<void> {
    try {
      await Deno.remove(join(this.conversationsDir, `${sessionId}.json`));
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }

  async list(): Promise<SessionEntry[]> {
    const out: SessionEntry[] = [];
    try {
      for await (const f of Deno.readDir(this.dir)) {
        if (!f.isFile || !f.name.endsWith(".json")) continue;
        try {
          const e = JSON.parse(await Deno.readTextFile(join(this.dir, f.name))) as SessionEntry;
          if (typeof e.sessionId === "string" && typeof e.cwd === "string") out.push(e);
        } catch {
          // A half-written or foreign file: skip it rather than fail the start.
        }
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    return out.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  /** Writes an entry atomically (temp file + rename). */
  async save(e: SessionEntry): Promise<void> {
    await Deno.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const path = join(this.dir, `${e.sessionId}.json`);
    const tmp = `${path}.${crypto.randomUUID()}.tmp`;
    await Deno.writeTextFile(tmp, JSON.stringify(e, null, 2) + "\n", { mode: 0o600 });
    await Deno.rename(tmp, path);
  }

  async remove(sessionId: string): Promise<void> {
    try {
      await Deno.remove(join(this.dir, `${sessionId}.json`));
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  }
}
