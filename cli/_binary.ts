/**
 * The released role executables: `baton-relay …` is `baton relay …` and
 * `baton-runner …` is `baton runner …` (scripts/compile.ts builds them).
 * What the runner starts of itself (`_daemon`, `_worker`, named by
 * runner/_self.ts) keeps its own command.
 *
 * @module
 */

/** The role each role executable runs, by file name (without `.exe`). */
export const ROLE_BINARIES: Record<string, string> = {
  "baton-relay": "relay",
  "baton-runner": "runner",
};

/** The other commands a role executable offers as they are (`baton-runner setup`). */
const ALSO: Record<string, string[]> = {
  relay: ["doctor"],
  runner: ["setup", "doctor", "key"],
};

/** The command line `main` sees when the program runs as the executable `execPath`. */
export function roleArgs(execPath: string, argv: string[]): string[] {
  const name = execPath.split(/[\\/]/).pop()!.replace(/\.exe$/i, "").toLowerCase();
  const role = Object.entries(ROLE_BINARIES).find(([bin]) =>
    name === bin || name.startsWith(`${bin}-`)
  )?.[1];
  if (!role) return argv;
  // Its own re-executions: the runner's daemon and workers, and the runner
  // started again without secrets in its environment (cli/runner.ts).
  if (argv[0]?.startsWith("_") || argv[0] === role) return argv;
  if (argv[0] && ALSO[role]?.includes(argv[0])) return argv;
  return [role, ...argv];
}
