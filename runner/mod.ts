/**
 * The runner: a supervisor that keeps the daemon alive, the daemon that dials
 * the relay, and one worker process per agent session. The CLI starts it
 * through {@linkcode supervise}; `baton _daemon` and `baton _worker` enter
 * the daemon and the worker directly (see `main.ts`).
 *
 * @module
 */
export {
  ConfigError,
  ensureRunnerId,
  loadRunnerConfig,
  normalizeRelayUrl,
  parseRelayUrls,
  readUserConfig,
  RUNNER_FLAGS,
  type RunnerConfig,
  runnerFlags,
  updateUserConfig,
} from "./config.ts";
export { supervise, type SuperviseOptions } from "./supervisor.ts";
export { missingPrograms, sandboxDependencyWarning } from "./sandbox/deps.ts";
export { listModels } from "./models.ts";
export { type RunnerSecrets, shedEnvironmentSecrets, takeSecrets } from "./_secrets.ts";
