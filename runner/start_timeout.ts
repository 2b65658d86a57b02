/**
 * A worker that has not started its session in time (a stuck extension, a
 * package installing from a registry that does not answer), instead of the
 * session staying "starting" with every input timing out
 * (`startTimeout`, docs/configuration.md). A new session ends with an error
 * that says which step the worker was on, and its processes are ended. One
 * with a conversation to keep (woken, or resumed after a restart) goes back
 * to sleep with that error: the next input tries again.
 *
 * @module
 */
import { RequestError } from "./control_link.ts";
import type { DaemonSession } from "./daemon_session.ts";
import { killTree } from "./platform/process_tree.ts";
import type { SessionEventBody } from "../shared/protocol.ts";
import type { WorkerProcess } from "./worker_host.ts";

/** What the timeout needs of the daemon's sessions (runner/session_workers.ts). */
export interface StartTimeoutHost {
  isStopping(): boolean;
  enqueue(s: DaemonSession, e: SessionEventBody): void;
  save(s: DaemonSession): void;
  clearSleep(s: DaemonSession): void;
  endProcesses(s: DaemonSession): Promise<void>;
  log(line: string): void;
}

/** Watches `worker`'s start of session `s` for `limit` ms (0: not at all). */
export function armStartTimeout(
  host: StartTimeoutHost,
  s: DaemonSession,
  worker: WorkerProcess,
  o: { limit: number; resumed: boolean },
): void {
  if (o.limit <= 0) return;
  // Timers take at most 2^31-1 ms (24.8 days); a longer one would fire at once.
  const timer = setTimeout(() => timedOut(host, s, worker, o), Math.min(o.limit, 2 ** 31 - 1));
  worker.settled.then(() => clearTimeout(timer));
}

function timedOut(
  host: StartTimeoutHost,
  s: DaemonSession,
  worker: WorkerProcess,
  { limit, resumed }: { limit: number; resumed: boolean },
): void {
  if (s.worker !== worker || s.ended || s.asleep || host.isStopping()) return;
  const within = limit % 60_000 === 0 ? `${limit / 60_000} min` : `${limit / 1000} s`;
  const why = `The agent did not start within ${within}: it was still ${worker.stage} ` +
    "(startTimeout in ~/.baton/config.json or BATON_START_TIMEOUT sets the limit; " +
    "the runner's log may say more)";
  const said = `session ${s.entry.sessionId}: the worker did not start within ${within} ` +
    `(still ${worker.stage}); `;
  host.clearSleep(s);
  if (!resumed) {
    host.log(said + "ending the session");
    s.ended = true;
    host.enqueue(s, { type: "session_end", reason: "error", message: why });
    void host.endProcesses(s);
    return;
  }
  host.log(said + "it sleeps again until the next input");
  // Inputs that woke it are told why rather than that the worker exited.
  for (const p of s.inputs.values()) p.reject(new RequestError("start_timeout", why));
  s.inputs.clear();
  s.asleep = true;
  s.working = false;
  s.entry.asleep = true;
  s.entry.busy = false;
  host.save(s);
  host.enqueue(s, { type: "session_error", message: `${why}. The next input tries again` });
  // The worker's tree (hooks, MCP servers it started), not the servers the agent left
  // running before it slept: those may be under live preview.
  killTree(worker.pid, { signal: "SIGKILL" }).catch(() => worker.kill("SIGKILL"));
}
