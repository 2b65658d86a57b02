import {
  ConfigError,
  ensureRunnerId,
  loadRunnerConfig,
  parseRelayUrls,
  RUNNER_FLAGS,
  runnerFlags,
  sandboxDependencyWarning,
  shedEnvironmentSecrets,
  supervise,
  takeSecrets,
} from "../runner/mod.ts";
import { parseFlags, UsageError } from "./_args.ts";
import { untilSignal } from "./relay.ts";
import { SERVICE_ACTIONS, SERVICE_HELP, serviceMain } from "./service.ts";

export const RUNNER_HELP = `Usage: baton runner [options]

Start a runner: a supervisor that keeps the runner daemon alive. The daemon
dials out to the relay and starts one agent worker per session.

Options:
  --relay <url[,url…]>
                   Relay address, http(s):// or ws(s)://; several relay nodes
                   comma-separated or the flag repeated (env BATON_RELAY_URL, config
                   relayUrl or relayUrls). The runner uses one node at a time and moves
                   to the next when its node fails (docs/scaling.md)
  --name <name>    Runner name shown in the UI (env BATON_RUNNER_NAME, config runnerName,
                   default the hostname)
  --safe-mode      Skip MCP servers, plugins, hooks and runner services, ~/.baton/services
                   included (env BATON_SAFE_MODE=1)
  --no-mcp         Skip MCP servers (env BATON_NO_MCP=1)
  --no-plugins     Sessions load no plugins: pi extensions (~/.baton/extensions, a project's
                   .pi/extensions) and packages of settings.json (env BATON_NO_PLUGINS=1)
  --no-hooks       Skip hooks (env BATON_NO_HOOKS=1)
  --sandbox <mode> Agent sandbox: none, basic (default) or full (env BATON_SANDBOX;
                   BATON_NO_SANDBOX=1 is none; config sandbox.mode; see docs/sandbox.md).
                   On Linux it needs bwrap and socat: apt-get install bubblewrap socat ripgrep
  --no-relay       Do not connect to a relay (env BATON_NO_RELAY=1; config relayUrl "off");
                   a runner needs one, so with this it exits with a message
  -h, --help       Show this help

Environment (those naming a config key fall back to ~/.baton/config.json):
  BATON_RELAY_URL        Relay address, or several nodes comma-separated (config: relayUrl,
                         or relayUrls as an array)
  BATON_API_KEY          Runner token or API key (config: apiKey, preferred: keep the key
                         in ~/.baton/config.json, mode 0600; given here, the runner
                         restarts itself without it so no process environment holds it)
  BATON_WORKSPACE_ROOTS  Comma-separated folders sessions may use; or
  BATON_WORKSPACE_ROOT   one folder; or BATON_RUNNER_ROOTS (legacy). Unset: any folder
  BATON_RUNNER_API_KEY   Fallback for BATON_API_KEY
  BATON_RUNNER_NAME      Runner name (config: runnerName)
  BATON_WARM_WORKERS     Keep a worker started ahead of spawns: 1 (default) or 0

The runner id is kept in ~/.baton/runner.json. Models: pi's built-in providers
with their API keys, plus custom providers in ~/.baton/models.json.
Skills are ~/.baton/skills/<name>/SKILL.md and agent definitions ~/.baton/agents/<name>.md
(pi's formats; the web app's runner settings and the API edit them there).

${SERVICE_HELP("runner")}`;

/** `baton runner`. */
export async function runnerMain(argv: string[]): Promise<number> {
  if (argv[0] && SERVICE_ACTIONS.has(argv[0])) {
    return await serviceMain("runner", argv, { validate: validateRunnerArgs });
  }
  const { values } = parseFlags(argv, RUNNER_FLAGS);
  // Set when this is the copy of `baton runner` started without the key in
  // its environment (below).
  const handed = await takeSecrets();
  const env = (k: string) => handed && k === "BATON_API_KEY" ? handed.apiKey : Deno.env.get(k);
  let config;
  try {
    config = await loadRunnerConfig(env, runnerFlags(values));
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
  if (config.skip.relay) {
    throw new UsageError(
      'The relay is turned off (--no-relay, BATON_NO_RELAY=1 or relayUrl "off"); a runner needs one',
    );
  }
  if (!config.relayUrl) {
    throw new UsageError("No relay: give --relay, set BATON_RELAY_URL or run 'baton setup'");
  }
  if (!config.apiKey) {
    throw new UsageError("No API key: set BATON_API_KEY or run 'baton setup'");
  }
  // A key given in BATON_API_KEY stays readable in /proc/<pid>/environ for as
  // long as this process lives: replace it by a copy started without it.
  const shed = await shedEnvironmentSecrets("runner", argv, {
    secrets: { apiKey: config.apiKey },
    batonDir: config.batonDir,
  });
  if (shed) {
    console.error(
      `Warning: the API key stays in this process's environment (${shed}); ` +
        "put it in ~/.baton/config.json instead of BATON_API_KEY",
    );
  }
  const runnerId = await ensureRunnerId(config.batonDir);
  const warning = sandboxDependencyWarning();
  if (warning) console.error(`Warning: ${warning}`);
  const stop = new AbortController();
  untilSignal().then(() => stop.abort());
  console.log(
    `baton runner ${runnerId} (${config.name}) connecting to ${config.relayUrls.join(", ")}`,
  );
  return await supervise({
    daemonArgs: argv,
    apiKey: config.apiKey,
    log: (line) => console.error(`[runner] ${line}`),
    signal: stop.signal,
  });
}

/** The checks of `baton runner`'s own flags that an installed service would fail on at start. */
function validateRunnerArgs(argv: string[]): void {
  const { values } = parseFlags(argv, RUNNER_FLAGS);
  if (values.relay === undefined) return;
  try {
    parseRelayUrls(values.relay, "--relay");
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
}
