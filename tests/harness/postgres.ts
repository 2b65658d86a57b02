/**
 * A private PostgreSQL for tests: `initdb` in a temporary folder, `postgres`
 * on a free loopback port with its socket in that folder, a database per
 * test, and everything stopped and removed at the end. No system service is
 * used or needed.
 *
 * PostgreSQL refuses to run as root: as root (CI, this machine) both run as
 * the unprivileged `postgres` user (Debian's package creates it), through
 * `setpriv`, which execs rather than forks, so the child we hold is the
 * server itself. Debian keeps the binaries out of PATH, under
 * /usr/lib/postgresql/<version>/bin.
 *
 * @module
 */
import pg from "pg";
import { readLines } from "../../runner/_lines.ts";

/** The folder holding `initdb` and `postgres`, or null when PostgreSQL is not installed. */
export function postgresBin(): string | null {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (dir && isFile(`${dir}/initdb`) && isFile(`${dir}/postgres`)) return dir;
  }
  let versions: number[] = [];
  try {
    versions = [...Deno.readDirSync("/usr/lib/postgresql")].map((e) => Number(e.name))
      .filter((v) => Number.isFinite(v)).sort((a, b) => b - a);
  } catch {
    return null;
  }
  for (const v of versions) {
    const dir = `/usr/lib/postgresql/${v}/bin`;
    if (isFile(`${dir}/initdb`) && isFile(`${dir}/postgres`)) return dir;
  }
  return null;
}

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/**
 * Says once, on one line, why the PostgreSQL tests of a file do not run;
 * true when they can.
 */
export function postgresAvailable(what: string): boolean {
  if (postgresBin()) return true;
  console.log(
    `PostgreSQL not found (no initdb/postgres in PATH or /usr/lib/postgresql/*/bin): ${what} skipped; install Debian's postgresql to run them`,
  );
  return false;
}

/** The uid and gid to run PostgreSQL as: ours, or the `postgres` user's when we are root. */
async function runAs(): Promise<{ uid: number; gid: number } | null> {
  if (Deno.uid() !== 0) return null;
  const id = async (flag: string) => {
    const out = await new Deno.Command("id", { args: [flag, "postgres"], stdout: "piped" })
      .output();
    if (!out.success) {
      throw new Error("Running as root, and there is no `postgres` user to run PostgreSQL as");
    }
    return Number(new TextDecoder().decode(out.stdout).trim());
  };
  return { uid: await id("-u"), gid: await id("-g") };
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Options of {@linkcode startPostgres}. */
export interface PostgresOptions {
  /** Server settings (`-c name=value`) on top of the test defaults (no fsync). */
  settings?: Record<string, string>;
}

/** A running private PostgreSQL. */
export class PostgresServer {
  #child: Deno.ChildProcess | null = null;
  #databases = 0;
  readonly lines: string[] = [];

  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
    private readonly user: { uid: number; gid: number } | null,
    private readonly settings: Record<string, string>,
  ) {}

  /** Servers still running, killed if the test module ends without stopping them. */
  static readonly #running = new Set<PostgresServer>();

  static {
    globalThis.addEventListener("unload", () => {
      for (const server of PostgresServer.#running) {
        try {
          server.#child?.kill("SIGKILL");
          Deno.removeSync(server.dir, { recursive: true });
        } catch {
          // Already gone.
        }
      }
    });
  }

  static async start(options: PostgresOptions = {}): Promise<PostgresServer> {
    const bin = postgresBin();
    if (!bin) throw new Error("PostgreSQL is not installed (initdb and postgres not found)");
    const user = await runAs();
    // As root, under /tmp: the postgres user must reach the folder (TMPDIR may be root's own).
    const dir = await Deno.realPath(
      await Deno.makeTempDir({ prefix: "baton-pg-", dir: user ? "/tmp" : undefined }),
    );
    if (user) await Deno.chown(dir, user.uid, user.gid);
    const server = new PostgresServer(dir, freePort(), bin, user, {
      fsync: "off",
      synchronous_commit: "off",
      full_page_writes: "off",
      ...options.settings,
    });
    try {
      const init = await server.#command("initdb", [
        "-D",
        `${dir}/data`,
        "-U",
        "baton",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-locale",
        "--no-sync",
      ]).output();
      if (!init.success) {
        throw new Error(`initdb failed: ${new TextDecoder().decode(init.stderr)}`);
      }
      PostgresServer.#running.add(server);
      await server.startServer();
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  #command(name: string, args: string[]): Deno.Command {
    const program = `${this.bin}/${name}`;
    const u = this.user;
    return new Deno.Command(u ? "setpriv" : program, {
      args: u
        ? [`--reuid=${u.uid}`, `--regid=${u.gid}`, "--init-groups", "--", program, ...args]
        : args,
      cwd: this.dir,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    });
  }

  /** Starts the server on its data folder (again, after {@linkcode stopServer}). */
  async startServer(): Promise<void> {
    const args = ["-D", `${this.dir}/data`, "-p", String(this.port), "-k", this.dir];
    args.push("-c", "listen_addresses=127.0.0.1");
    for (const [k, v] of Object.entries(this.settings)) args.push("-c", `${k}=${v}`);
    const child = this.#child = this.#command("postgres", args).spawn();
    const ready = Promise.withResolvers<void>();
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      for await (const line of readLines(stream)) {
        this.lines.push(line);
        if (/ready to accept connections/.test(line)) ready.resolve();
      }
    };
    void pump(child.stdout).catch(() => {});
    void pump(child.stderr).catch(() => {});
    void child.status.then((s) =>
      ready.reject(new Error(`postgres exited (${s.code}):\n${this.lines.join("\n")}`))
    );
    const timer = setTimeout(
      () => ready.reject(new Error("postgres did not start in 30 s")),
      30_000,
    );
    try {
      await ready.promise;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Stops the server, keeping its data: SIGINT is PostgreSQL's fast shutdown
   * (clients are disconnected), SIGKILL a crash.
   */
  async stopServer(signal: "SIGINT" | "SIGKILL" = "SIGINT"): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = null;
    try {
      child.kill(signal);
    } catch {
      // Already gone.
    }
    await child.status;
  }

  /** The URL of database `name` on this server. */
  url(name = "postgres"): string {
    return `postgres://baton@127.0.0.1:${this.port}/${name}`;
  }

  /** Creates a database, empty or as a copy of `template` (which nobody may be connected to); its URL. */
  async createDatabase(
    name = `t${++this.#databases}_${crypto.randomUUID().slice(0, 8)}`,
    { template }: { template?: string } = {},
  ): Promise<string> {
    const quote = (s: string) => `"${s.replaceAll('"', "")}"`;
    const client = new pg.Client({ connectionString: this.url() });
    await client.connect();
    try {
      await client.query(
        `CREATE DATABASE ${quote(name)}${template ? ` TEMPLATE ${quote(template)}` : ""}`,
      );
    } finally {
      await client.end();
    }
    return this.url(name);
  }

  /** Stops the server and removes its folder. */
  async stop(): Promise<void> {
    PostgresServer.#running.delete(this);
    await this.stopServer();
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** Starts a private PostgreSQL (see {@linkcode PostgresServer}). */
export function startPostgres(options?: PostgresOptions): Promise<PostgresServer> {
  return PostgresServer.start(options);
}
