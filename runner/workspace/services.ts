/**
 * The runner's end of `service_message`: the relay forwards a viewer's
 * request as the control request `service_message`; this module checks it,
 * runs the git op in the session's folder, and sends progress and live
 * status (`status_changed`) back as `service_message` frames.
 *
 * @module
 */
import { GIT_OPS, type GitOp, SERVICE_IDS } from "../../shared/git_api.ts";
import { RequestError } from "../control_link.ts";
import { isWithin } from "../roots.ts";
import * as ops from "./git.ts";
import { GitError } from "./git_run.ts";
import { GitWatchers } from "./git_watch.ts";

/** What the service needs of the daemon. */
export interface WorkspaceServicesOptions {
  /** The folder of a session the daemon holds and has not ended; null otherwise. */
  cwdOf: (sessionId: string) => string | null;
  /** Whether the session's worker runs (not asleep): only those are watched. */
  awake: (sessionId: string) => boolean;
  /**
   * The runner's workspace roots (real paths; null: any folder). A repository
   * whose top folder lies above every root is refused: its status and diffs
   * would show files outside the roots.
   */
  roots: string[] | null;
  /** Sends a frame to the relay (false when offline: dropped). */
  send: (msg: unknown) => boolean;
  log: (line: string) => void;
  /** Repositories watched at once (default 16). */
  maxWatchers?: number;
}

/** Longest a request waits for its repository's watch to be set. */
const WATCH_WAIT_MS = 2000;

/** Waits for `p`, at most `ms`. */
async function within(p: Promise<void>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([p, new Promise<void>((r) => timer = setTimeout(r, ms))]);
  clearTimeout(timer);
}

/** Progress frames of one request at most this often (push prints a line per percent). */
const PROGRESS_EVERY_MS = 200;

/** Serves `service_message` requests for the daemon; one instance per daemon. */
export class WorkspaceServices {
  readonly #opts: WorkspaceServicesOptions;
  readonly watchers: GitWatchers;
  /** Sessions whose watch stopped because they fell asleep. */
  readonly #paused = new Set<string>();

  constructor(options: WorkspaceServicesOptions) {
    this.#opts = options;
    this.watchers = new GitWatchers({
      max: options.maxWatchers ?? 16,
      onStatus: (sessionId, status) =>
        this.#opts.send({
          t: "service_message",
          serviceId: "git",
          sessionId,
          op: "status_changed",
          data: status,
        }),
      status: (top) => ops.status(top),
      log: options.log,
    });
  }

  /** Answers the control request `service_message`; errors are RequestErrors. */
  async handle(req: unknown): Promise<unknown> {
    const r = (req ?? {}) as Record<string, unknown>;
    const { sessionId, serviceId, op, requestId } = r;
    const data = typeof r.data === "object" && r.data !== null && !Array.isArray(r.data)
      ? r.data as Record<string, unknown>
      : {};
    if (typeof sessionId !== "string" || typeof op !== "string") {
      throw new RequestError("bad_request", "A service message needs a sessionId and an op");
    }
    if (!SERVICE_IDS.includes(serviceId as "git")) {
      throw new RequestError("unknown_service", `Unknown service: '${String(serviceId)}'`);
    }
    if (!GIT_OPS.includes(op as GitOp)) {
      throw new RequestError("unknown_op", `Unknown git op: '${op}'`);
    }
    const cwd = this.#opts.cwdOf(sessionId);
    if (cwd === null) throw new RequestError("not_found", "Session is not on this runner");
    try {
      const top = await this.#repoTop(cwd);
      // Once watched, every later change is pushed; a huge tree may take long to
      // watch, and the answer does not wait for it more than WATCH_WAIT_MS.
      if (this.#opts.awake(sessionId)) {
        await within(this.watchers.watch(sessionId, top), WATCH_WAIT_MS);
      }
      return await this.#run(op as GitOp, top, data, sessionId, requestId);
    } catch (err) {
      if (err instanceof GitError) throw new RequestError(err.code, err.message);
      throw err;
    }
  }

  #run(
    op: GitOp,
    top: string,
    data: Record<string, unknown>,
    sessionId: string,
    requestId: unknown,
  ): Promise<unknown> {
    switch (op) {
      case "status":
        return ops.status(top);
      case "diff":
        return ops.diff(top, data);
      case "branches":
        return ops.branches(top);
      case "checkout":
        return ops.checkout(top, data);
      case "stage":
        return ops.stage(top, data);
      case "unstage":
        return ops.unstage(top, data);
      case "commit":
        return ops.commit(top, data);
      case "push":
        return ops.push(top, data, this.#progress(sessionId, requestId));
      case "log":
        return ops.log(top, data).then((commits) => ({ commits }));
      case "discard":
        return ops.discard(top, data);
    }
  }

  /** Sends git's stderr on as `progress` frames, at most one per PROGRESS_EVERY_MS. */
  #progress(sessionId: string, requestId: unknown): (text: string) => void {
    let last = 0;
    let pending = "";
    return (text) => {
      pending += text;
      const now = Date.now();
      if (now - last < PROGRESS_EVERY_MS) return;
      last = now;
      // The last line (git redraws progress in place with \r) is what the person needs.
      const lines = pending.split(/\r|\n/).map((l) => l.trim()).filter(Boolean);
      pending = "";
      if (!lines.length) return;
      this.#opts.send({
        t: "service_message",
        serviceId: "git",
        sessionId,
        requestId,
        op: "progress",
        data: { text: lines.slice(-5).join("\n").slice(0, 4000) },
      });
    };
  }

  /**
   * The session ended (or fell asleep, `paused`): stop watching its
   * repository. A paused watch comes back with {@linkcode resume}.
   */
  forget(sessionId: string, paused = false): void {
    if (paused && this.watchers.has(sessionId)) this.#paused.add(sessionId);
    else this.#paused.delete(sessionId);
    this.watchers.unwatch(sessionId);
  }

  /** The session wakes: watch its repository again if it was watched when it fell asleep. */
  resume(sessionId: string): void {
    if (!this.#paused.delete(sessionId)) return;
    const cwd = this.#opts.cwdOf(sessionId);
    if (cwd === null) return;
    this.#repoTop(cwd).then(
      (top) => this.watchers.watch(sessionId, top),
      () => {},
    );
  }

  /** The repository's top folder for `cwd`, when it lies inside a workspace root. */
  async #repoTop(cwd: string): Promise<string> {
    const top = await ops.repoTop(cwd);
    const roots = this.#opts.roots;
    if (roots && !roots.some((root) => isWithin(top, root, Deno.build.os))) {
      throw new GitError(
        "repo_outside_roots",
        `The repository at '${top}' reaches above the runner's workspace roots`,
      );
    }
    return top;
  }

  close(): void {
    this.watchers.close();
  }
}
