/**
 * A session as the daemon holds it: its entry in the registry, its worker,
 * its sleep state and the events on their way to the relay. The daemon
 * (daemon.ts) numbers and sends the events; session_workers.ts runs the
 * worker.
 *
 * @module
 */
import type { SessionEvent, SessionEventBody } from "../shared/protocol.ts";
import type { SessionEntry } from "./registry.ts";
import type { WorkerProcess } from "./worker_host.ts";

/** A session the daemon holds: its worker and its not yet acknowledged events. */
export interface DaemonSession {
  entry: SessionEntry;
  worker: WorkerProcess | null;
  /** Seq of the next event; null until the relay says where a resumed session stands. */
  nextSeq: number | null;
  /** Events not numbered yet (coalesced while the relay is away). */
  queue: SessionEventBody[];
  /** Numbered events the relay has not acknowledged, oldest first. */
  unacked: SessionEvent[];
  /** Highest seq sent on the current connection. */
  sentSeq: number;
  /** The worker reported (or the daemon recorded) the end of the session. */
  ended: boolean;
  /** The agent is on a turn (from agent_start until agent_end or an error). */
  working: boolean;
  /** The worker was (or is being) stopped for want of turns; input wakes it. */
  asleep: boolean;
  /** The wake in progress, which inputs arriving meanwhile wait for. */
  waking: Promise<void> | null;
  /** Puts the worker to sleep once the session has been idle long enough. */
  sleepTimer: ReturnType<typeof setTimeout> | null;
  inputs: Map<number, { resolve: () => void; reject: (e: Error) => void }>;
}
