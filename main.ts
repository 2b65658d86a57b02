/**
 * The `baton` command line: one binary, one subcommand per role.
 *
 * @module
 */
import denoJson from "./deno.json" with { type: "json" };
import { UsageError } from "./cli/_args.ts";
import { roleArgs } from "./cli/_binary.ts";
import { isSingleFile, type ThreadEntry, threadEntry } from "./shared/single_file.ts";

/** baton's version, from deno.json. */
export const VERSION: string = denoJson.version;

const HELP = `baton ${VERSION} — run AI coding agents on your machines, drive them from anywhere

Usage: baton <command> [options]

Commands:
  up        Start a relay and a runner on this machine (start here)
  relay     Start the relay server
  runner    Start a runner that connects to a relay
  setup     Sign in to a relay and save an API key for the runner and CLI
  webhook   Send a signed test delivery to a webhook (baton webhook fire <id>)
  key       Create an API key (full, read-only, bound to a runner) or a runner token
  doctor    Check this machine, its relay and its runner; one line per check with a fix

Options:
  -h, --help       Show help (also: baton <command> --help)
  -V, --version    Show the version

Learn more: README.md and docs/ in the source tree.
`;

type Command = {
  help: () => Promise<string>;
  run: (argv: string[]) => Promise<number>;
};

const COMMANDS: Record<string, Command> = {
  relay: {
    help: async () => (await import("./cli/relay.ts")).RELAY_HELP,
    run: async (argv) => (await import("./cli/relay.ts")).relayMain(argv),
  },
  runner: {
    help: async () => (await import("./cli/runner.ts")).RUNNER_HELP,
    run: async (argv) => (await import("./cli/runner.ts")).runnerMain(argv),
  },
  up: {
    help: async () => (await import("./cli/up.ts")).UP_HELP,
    run: async (argv) => (await import("./cli/up.ts")).upMain(argv),
  },
  setup: {
    help: async () => (await import("./cli/setup.ts")).SETUP_HELP,
    run: async (argv) => (await import("./cli/setup.ts")).setupMain(argv),
  },
  webhook: {
    help: async () => (await import("./cli/webhook.ts")).WEBHOOK_HELP,
    run: async (argv) => (await import("./cli/webhook.ts")).webhookMain(argv),
  },
  key: {
    help: async () => (await import("./cli/key.ts")).KEY_HELP,
    run: async (argv) => (await import("./cli/key.ts")).keyMain(argv),
  },
  doctor: {
    help: async () => (await import("./cli/doctor.ts")).DOCTOR_HELP,
    run: async (argv) => (await import("./cli/doctor.ts")).doctorMain(argv),
  },
  // Internal: started by `baton runner`, not by people.
  _daemon: {
    help: () => Promise.resolve("Usage: baton _daemon (started by 'baton runner')\n"),
    run: async (argv) => (await import("./runner/daemon.ts")).daemonMain(argv),
  },
  _worker: {
    help: () => Promise.resolve("Usage: baton _worker (started by the runner daemon)\n"),
    run: async (argv) => (await import("./runner/worker.ts")).workerMain(argv),
  },
  _service: {
    help: () => Promise.resolve("Usage: baton _service (started by the runner daemon)\n"),
    run: async (argv) => (await import("./runner/services/service_main.ts")).serviceMain(argv),
  },
};

/**
 * The module-file Workers, for the single-file bundle, which starts them from
 * itself (shared/single_file.ts); listed here, they are also part of the
 * module graph `deno compile` embeds.
 */
const THREADS: Record<ThreadEntry, () => Promise<unknown>> = {
  "store-thread": () => import("./relay/store/_store_thread_worker.ts"),
  "git-watch": () => import("./runner/workspace/_git_watch_worker.ts"),
};

/** Commands that load pi (the agent), which needs its package.json at hand. */
const LOADS_PI = new Set(["runner", "up", "_daemon", "_worker"]);

/** Runs the CLI and returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (isSingleFile() && name !== undefined && LOADS_PI.has(name)) {
    const { piVersion, providePiPackage } = await import("./runner/_pi_package.ts");
    const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
    if (home) providePiPackage(home, piVersion(denoJson.imports));
  }
  if (name === undefined || name === "-h" || name === "--help" || name === "help") {
    const topic = name === "help" ? rest[0] : undefined;
    if (topic && COMMANDS[topic]) console.log(await COMMANDS[topic].help());
    else console.log(HELP);
    return 0;
  }
  if (name === "-V" || name === "--version" || name === "version") {
    console.log(`baton ${VERSION}`);
    return 0;
  }
  const cmd = COMMANDS[name];
  if (!cmd) {
    console.error(`baton: unknown command: '${name}' (see 'baton --help')`);
    return 2;
  }
  if (rest.includes("-h") || rest.includes("--help")) {
    console.log(await cmd.help());
    return 0;
  }
  if (rest.includes("-V") || rest.includes("--version")) {
    console.log(`baton ${VERSION}`);
    return 0;
  }
  try {
    return await cmd.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`baton ${name}: ${err.message}`);
      return 2;
    }
    // Anything else is a failure to report in one line (the stack with BATON_DEBUG=1).
    if (Deno.env.get("BATON_DEBUG") === "1") throw err;
    console.error(`baton ${name}: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}

const thread = threadEntry();
if (thread) await THREADS[thread]();
else if (import.meta.main) Deno.exit(await main(roleArgs(Deno.execPath(), Deno.args)));
