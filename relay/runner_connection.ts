/**
 * What the relay needs of one runner's control connection, wherever it is:
 * a socket on this node (`RunnerLink`) or one another node holds
 * (`RemoteRunner`).
 *
 * @module
 */
import type { ChunkSink } from "./chunked_reply.ts";

/** How long a runner may take to answer a spawn (it starts the worker first). */
export const SPAWN_ANSWER_MS = 30_000;
/** ... when it fetches the input's attachments before it answers. */
export const SPAWN_WITH_ATTACHMENTS_MS = 120_000;

/** What the relay needs of one runner's control connection (`RunnerLink` is one). */
export interface RunnerConnection {
  readonly runnerId: string;
  readonly userId: string;
  /** The key the runner connected with (null: not a key). */
  readonly keyId: string | null;
  /** Sessions whose spawn request is in flight (not yet confirmed by the runner). */
  readonly pendingSpawns: Set<string>;
  send(msg: unknown): void;
  /**
   * Resolves with the runner's answer; rejects with a RelayError. With a
   * `sink`, the answer may come in pieces first (chunked_reply.ts).
   */
  request(op: string, data: unknown, timeoutMs: number, sink?: ChunkSink): Promise<unknown>;
  close(code: number, reason: string): void;
}
