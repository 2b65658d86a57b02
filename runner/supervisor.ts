import { Backoff } from "../shared/backoff.ts";
import { DaemonExit } from "./daemon.ts";
import { selfCommand } from "./_self.ts";
import { handSecrets, SECRETS_STDIN_VARIABLE, withoutSecrets } from "./_secrets.ts";

/** Options of {@linkcode supervise}. */
export interface SuperviseOptions {
  /** Arguments passed on to `baton _daemon`. */
  daemonArgs: string[];
  /**
   * The daemon's environment (without it: ours). Credential variables are
   * dropped from it either way: the key goes on the daemon's stdin.
   */
  env?: Record<string, string>;
  /** The runner token or API key, handed to each daemon on its stdin. */
  apiKey: string;
  log: (line: string) => void;
  /** Aborting stops the daemon (SIGTERM, then SIGKILL after 10 s) and returns. */
  signal: AbortSignal;
  /** A run at least this long counts as healthy and resets the backoff. */
  healthyAfterMs?: number;
}

/**
 * Runs the daemon and restarts it when it crashes, with exponential backoff.
 * Returns the supervisor's exit code: 0 when stopped on request, 1 when the
 * daemon's configuration cannot work.
 */
export async function supervise(options: SuperviseOptions): Promise<number> {
  const backoff = new Backoff({ initialMs: 1000, maxMs: 30_000 });
  const healthy = options.healthyAfterMs ?? 60_000;
  while (!options.signal.aborted) {
    const { cmd, args } = selfCommand("_daemon", options.daemonArgs);
    const child = new Deno.Command(cmd, {
      args,
      stdin: "piped",
      stdout: "inherit",
      stderr: "inherit",
      // The whole environment (not additions to ours), without credentials:
      // /proc/<pid>/environ would show them to the agents' tools.
      env: { ...withoutSecrets(options.env), [SECRETS_STDIN_VARIABLE]: "1" },
      clearEnv: true,
    }).spawn();
    void handSecrets(child.stdin, { apiKey: options.apiKey });
    const started = Date.now();
    const onAbort = () => {
      try {
        child.kill("SIGTERM");
      } catch {
        // Already gone.
      }
      setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // Already gone.
        }
      }, 10_000).unref?.();
    };
    options.signal.addEventListener("abort", onAbort, { once: true });
    const status = await child.status;
    options.signal.removeEventListener("abort", onAbort);
    if (options.signal.aborted) return 0;
    if (status.code === DaemonExit.stopped && !status.signal) {
      options.log("runner stopped");
      return 0;
    }
    if (status.code === DaemonExit.config) {
      options.log("runner cannot start with this configuration (see the message above)");
      return 1;
    }
    if (status.code === DaemonExit.restart) {
      options.log("restarting the daemon as requested");
      backoff.reset();
      continue;
    }
    if (Date.now() - started > healthy) backoff.reset();
    const wait = backoff.next();
    const how = status.signal ? `signal ${status.signal}` : `exit code ${status.code}`;
    options.log(`daemon exited (${how}); restarting in ${wait} ms`);
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, wait);
      options.signal.addEventListener("abort", () => {
        clearTimeout(t);
        resolve();
      }, { once: true });
    });
  }
  return 0;
}
