/**
 * Keeping the runner's credentials out of every process environment.
 *
 * `/proc/<pid>/environ` shows the environment a process was started with,
 * to any process of the same user (and `Deno.env.delete` does not change
 * it). An agent's bash tool runs as that user, so a key in the environment
 * of any long-lived baton process is a key the agent can read. Hence:
 *
 * - `baton runner` given its key in `BATON_API_KEY` replaces itself
 *   (execve, same pid, same terminal) with a copy started without it; the
 *   key crosses in a file only the user can read, deleted once read;
 * - the supervisor hands the key to each daemon on its stdin, and starts it
 *   without any credential variable;
 * - workers, their tools and pi are started without them (daemon.ts).
 *
 * @module
 */
import { join } from "node:path";
import { selfCommand } from "./_self.ts";

/**
 * Variables that carry credentials: never passed on to a child process.
 * Besides the runner's own, the relay's: `baton up` gives its local runner
 * the environment it was started with, and a runner started from the same
 * shell as a relay would carry them too, down to every agent's `bash`.
 */
export const SECRET_VARIABLES = [
  "BATON_API_KEY",
  "BATON_RUNNER_API_KEY",
  "BATON_PASSWORD",
  "BATON_OWNER_PASSWORD",
  "BATON_AUTH_SECRET",
  "BATON_DATABASE_URL",
  "BATON_BUS_PASSWORD",
  "BATON_BUS_TOKEN",
  "BATON_METRICS_TOKEN",
  "BATON_WEBHOOK_SECRET",
  "VAPID_PRIVATE_KEY",
] as const;

/** Names the one-time file that holds the credentials of a re-executed `baton runner`. */
export const SECRETS_FILE_VARIABLE = "BATON_SECRETS_FILE";
/** Set (to `1`) on a daemon whose credentials come as one JSON line on its stdin. */
export const SECRETS_STDIN_VARIABLE = "BATON_SECRETS_STDIN";

/** What crosses from one baton process to the next. */
export interface RunnerSecrets {
  apiKey: string;
}

/** `env` (default: ours) without the credential variables nor the hand-over markers. */
export function withoutSecrets(env: Record<string, string> = Deno.env.toObject()) {
  const clean = { ...env };
  for (const k of SECRET_VARIABLES) delete clean[k];
  delete clean[SECRETS_FILE_VARIABLE];
  delete clean[SECRETS_STDIN_VARIABLE];
  return clean;
}

/** Whether this process was started with a credential in its environment. */
export function secretsInEnvironment(): boolean {
  return SECRET_VARIABLES.some((k) => Deno.env.get(k) !== undefined);
}

/**
 * Replaces this process (same pid) by `cmd args` started with `env` and
 * `secrets` in a 0600 file named by {@linkcode SECRETS_FILE_VARIABLE}.
 * Returns only when that cannot be done (no execve here: Windows, or no C
 * library to call it from); the reason is returned.
 */
export async function execWithSecrets(
  cmd: string,
  args: string[],
  options: { env: Record<string, string>; secrets: RunnerSecrets; dir: string },
): Promise<string> {
  let execve;
  try {
    execve = loadExecve();
  } catch (err) {
    return `execve is not available (${err instanceof Error ? err.message : err})`;
  }
  await Deno.mkdir(options.dir, { recursive: true, mode: 0o700 });
  await Deno.chmod(options.dir, 0o700);
  const path = join(options.dir, `.handover-${crypto.randomUUID()}`);
  await Deno.writeTextFile(path, JSON.stringify(options.secrets), { mode: 0o600, createNew: true });
  const env = { ...options.env, [SECRETS_FILE_VARIABLE]: path };
  const rc = execve(cmd, args, env);
  await Deno.remove(path).catch(() => {});
  return `execve failed (${rc})`;
}

/**
 * The secrets handed to this process (by the file of a re-exec, or on stdin
 * from the supervisor), or null when none were. The file is deleted and the
 * markers are removed from our environment.
 */
export async function takeSecrets(): Promise<RunnerSecrets | null> {
  const path = Deno.env.get(SECRETS_FILE_VARIABLE);
  const onStdin = Deno.env.get(SECRETS_STDIN_VARIABLE) === "1";
  Deno.env.delete(SECRETS_FILE_VARIABLE);
  Deno.env.delete(SECRETS_STDIN_VARIABLE);
  let text: string | null = null;
  if (path) {
    try {
      text = await Deno.readTextFile(path);
    } finally {
      await Deno.remove(path).catch(() => {});
    }
  } else if (onStdin) {
    text = await firstLine(Deno.stdin.readable);
  }
  if (text === null) return null;
  const parsed = JSON.parse(text) as Partial<RunnerSecrets>;
  if (typeof parsed.apiKey !== "string") throw new Error("Handed-over secrets have no apiKey");
  return { apiKey: parsed.apiKey };
}

/** Writes `secrets` as one JSON line to a child's stdin and closes it. */
export async function handSecrets(stdin: WritableStream<Uint8Array>, secrets: RunnerSecrets) {
  const writer = stdin.getWriter();
  try {
    await writer.write(new TextEncoder().encode(JSON.stringify(secrets) + "\n"));
    await writer.close();
  } catch {
    // The child is already gone; the supervisor sees it exit.
  }
}

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of stream) {
    text += decoder.decode(chunk, { stream: true });
    const nl = text.indexOf("\n");
    if (nl >= 0) return text.slice(0, nl);
  }
  return text;
}

/** The C library's execve, through FFI. */
function loadExecve(): (cmd: string, args: string[], env: Record<string, string>) => number {
  const os = Deno.build.os;
  const names = os === "linux"
    ? ["libc.so.6", "libc.so"]
    : os === "darwin"
    ? ["/usr/lib/libSystem.B.dylib"]
    : [];
  let lib: Deno.DynamicLibrary<typeof SYMBOLS> | null = null;
  let last: unknown = new Error(`no C library known on ${os}`);
  for (const name of names) {
    try {
      lib = Deno.dlopen(name, SYMBOLS);
      break;
    } catch (err) {
      last = err;
    }
  }
  if (!lib) throw last;
  const { execve } = lib.symbols;
  return (cmd, args, env) => {
    const keep: Uint8Array[] = [];
    const cstr = (s: string) => {
      const b = new TextEncoder().encode(s + "\0");
      keep.push(b);
      return b;
    };
    const array = (items: string[]) => {
      const ptrs = new BigUint64Array(items.length + 1);
      items.forEach((s, i) => {
        ptrs[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(cstr(s))));
      });
      return ptrs;
    };
    const argv = array([cmd, ...args]);
    const envp = array(Object.entries(env).map(([k, v]) => `${k}=${v}`));
    // Only returns on failure (-1).
    const rc = execve(cstr(cmd), argv, envp);
    keep.length = 0;
    return rc;
  };
}

const SYMBOLS = {
  execve: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
} as const;

/**
 * When this process was given a credential in its environment, replaces it
 * by `baton <sub> <argv>` started without one, handing `secrets` over (see
 * the module's comment). Returns only when that is not possible, with the
 * reason; then our own environment is at least cleared of them for what we
 * start.
 */
export async function shedEnvironmentSecrets(
  sub: string,
  argv: string[],
  options: { secrets: RunnerSecrets; batonDir: string },
): Promise<string | null> {
  if (!secretsInEnvironment()) return null;
  const { cmd, args } = selfCommand(sub, argv);
  const reason = await execWithSecrets(cmd, args, {
    env: withoutSecrets(),
    secrets: options.secrets,
    dir: join(options.batonDir, "runner"),
  });
  for (const k of SECRET_VARIABLES) Deno.env.delete(k);
  return reason;
}
