/**
 * Readiness: whether this relay node can take traffic now. The wiring
 * registers named checks (the store's, later the bus's), each with its own
 * time limit; `GET /ready` runs them all and answers 503 naming those that
 * failed, so a load balancer stops sending work to a node that cannot store
 * or forward it. A node shutting down is draining: from then on it fails a
 * `draining` check of its own, whatever the others say, so the balancer
 * moves traffic away while the node still finishes what it has. Liveness
 * (`GET /health`) stays separate and trivial.
 *
 * @module
 */
import type { ReadyCheck } from "../shared/operations_api.ts";

/** One check: resolves when the dependency answers, throws (or rejects) when it does not. */
export type ReadinessCheck = (signal: AbortSignal) => void | Promise<void>;

/** Options of {@linkcode Readiness.add}. */
export interface ReadinessCheckOptions {
  /** How long the check may take before it counts as failed (default 2 s). */
  timeoutMs?: number;
}

/** A probe that waits longer than this is itself the problem: balancers probe every few seconds. */
export const DEFAULT_CHECK_TIMEOUT_MS = 2000;

/** The outcome of every check. */
export interface ReadinessReport {
  ok: boolean;
  checks: Record<string, ReadyCheck>;
}

/** Options of {@linkcode Readiness}. */
export interface ReadinessOptions {
  /** Told when a check starts or stops failing (one line each time). */
  log?: (line: string) => void;
}

/** The named checks of one node. */
export class Readiness {
  readonly #checks = new Map<string, { check: ReadinessCheck; timeoutMs: number }>();
  readonly #log: (line: string) => void;
  /** The run in flight: concurrent probes share it, so a flood of them queries the store once. */
  #running: Promise<ReadinessReport> | null = null;
  /** Checks that failed in the last run, to log only changes. */
  readonly #failing = new Set<string>();
  /** Why the node stopped taking traffic, once it is shutting down. */
  #draining: string | null = null;

  constructor(options: ReadinessOptions = {}) {
    this.#log = options.log ?? (() => {});
  }

  /** Registers a check under a name of its own (`store`, `bus`). */
  add(name: string, check: ReadinessCheck, options: ReadinessCheckOptions = {}): void {
    if (this.#checks.has(name) || name === "draining") {
      throw new Error(`Readiness check already registered: '${name}'`);
    }
    this.#checks.set(name, { check, timeoutMs: options.timeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS });
  }

  /** The registered checks' names, in order. */
  names(): string[] {
    return [...this.#checks.keys()];
  }

  /**
   * Marks the node as shutting down: every report from now on fails, with a
   * `draining` check saying `reason`. There is no way back (a node drains
   * once, on its way out).
   */
  drain(reason = "Shutting down"): void {
    if (this.#draining !== null) return;
    this.#draining = reason;
    this.#log(`not ready: draining: ${reason}`);
  }

  /** Whether {@linkcode drain} was called. */
  get draining(): boolean {
    return this.#draining !== null;
  }

  /** Runs every check at once (or joins the run in flight). */
  run(): Promise<ReadinessReport> {
    this.#running ??= this.#runAll().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  async #runAll(): Promise<ReadinessReport> {
    const results = await Promise.all(
      [...this.#checks].map(async ([name, c]) =>
        [name, await runCheck(c.check, c.timeoutMs)] as const
      ),
    );
    const checks: Record<string, ReadyCheck> = {};
    for (const [name, result] of results) {
      checks[name] = result;
      if (!result.ok && !this.#failing.has(name)) {
        this.#failing.add(name);
        this.#log(`not ready: ${name}: ${result.error}`);
      } else if (result.ok && this.#failing.delete(name)) {
        this.#log(`ready again: ${name}`);
      }
    }
    if (this.#draining !== null) {
      checks.draining = { ok: false, ms: 0, error: this.#draining };
      return { ok: false, checks };
    }
    return { ok: results.every(([, r]) => r.ok), checks };
  }
}

/** One check under its time limit; what it threw becomes its error. */
async function runCheck(check: ReadinessCheck, timeoutMs: number): Promise<ReadyCheck> {
  const started = performance.now();
  const abort = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abort.abort();
      reject(new Error(`No answer within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  const ms = () => Math.round((performance.now() - started) * 10) / 10;
  try {
    await Promise.race([Promise.resolve().then(() => check(abort.signal)), late]);
    return { ok: true, ms: ms() };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, ms: ms(), error: message.slice(0, 300) || "Failed" };
  } finally {
    clearTimeout(timer);
  }
}
