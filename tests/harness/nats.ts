/**
 * A private nats-server for tests: on a free loopback port, its config in a
 * temporary folder, stopped and restarted on the same port (outage tests),
 * removed at the end. Tests that need one are ignored where the binary is
 * absent (`NATS_SERVER` is null); CI installs it (.ci/run).
 *
 * @module
 */
import { join } from "node:path";
import { readLines } from "../../runner/_lines.ts";
import { tempDir } from "./procs.ts";

/** The nats-server binary on PATH or in Debian's place; null when not installed. */
export const NATS_SERVER: string | null = (() => {
  const dirs = [...(Deno.env.get("PATH") ?? "").split(":"), "/usr/sbin", "/usr/local/bin"];
  for (const dir of dirs) {
    if (!dir) continue;
    try {
      const path = join(dir, "nats-server");
      if (Deno.statSync(path).isFile) return path;
    } catch {
      // Not there.
    }
  }
  return null;
})();

if (!NATS_SERVER) console.log("nats-server is not installed: the bus tests are ignored");

/** Options of {@linkcode NatsServer.start}. */
export interface NatsServerOptions {
  /** The server's `max_payload` in bytes (default 8 MiB, what baton needs; NATS's own is 1 MB). */
  maxPayload?: number;
  /** Bytes the server queues for one client before it drops it as a slow consumer (64 MiB). */
  maxPending?: number;
  /** Clients must present this token. */
  token?: string;
  /** How long a write to one client may block before the server drops it (e.g. "2s"; 10 s). */
  writeDeadline?: string;
  /**
   * Clients must speak TLS to this certificate and key (PEM files); with
   * `clientCa`, they must also present a certificate that CA signed.
   */
  tls?: { cert: string; key: string; clientCa?: string };
}

/** A nats-server process of a test. */
export class NatsServer {
  port = 0;
  readonly lines: string[] = [];
  #child: Deno.ChildProcess | null = null;
  #status: Promise<Deno.CommandStatus> | null = null;

  private constructor(readonly dir: string, readonly options: NatsServerOptions) {}

  /** Starts a server on a free port and waits until it takes clients. */
  static async start(options: NatsServerOptions = {}): Promise<NatsServer> {
    if (!NATS_SERVER) throw new Error("nats-server is not installed");
    const s = new NatsServer(await tempDir("baton-nats-"), options);
    await s.#launch(-1);
    return s;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get pid(): number {
    if (!this.#child) throw new Error("nats-server is not running");
    return this.#child.pid;
  }

  async #launch(port: number): Promise<void> {
    const conf = join(this.dir, "nats.conf");
    await Deno.writeTextFile(
      conf,
      [
        "host: 127.0.0.1",
        `port: ${port}`,
        `max_payload: ${this.options.maxPayload ?? 8 * 1024 * 1024}`,
        ...(this.options.maxPending ? [`max_pending: ${this.options.maxPending}`] : []),
        ...(this.options.writeDeadline ? [`write_deadline: "${this.options.writeDeadline}"`] : []),
        ...(this.options.token
          ? [`authorization { token: ${JSON.stringify(this.options.token)} }`]
          : []),
        ...(this.options.tls
          ? [
            "tls {",
            `  cert_file: ${JSON.stringify(this.options.tls.cert)}`,
            `  key_file: ${JSON.stringify(this.options.tls.key)}`,
            ...(this.options.tls.clientCa
              ? [`  ca_file: ${JSON.stringify(this.options.tls.clientCa)}`, "  verify: true"]
              : []),
            "}",
          ]
          : []),
        "",
      ].join("\n"),
    );
    const child = new Deno.Command(NATS_SERVER!, {
      args: ["-c", conf],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    let listening!: (port: number) => void;
    const ready = new Promise<number>((resolve) => listening = resolve);
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      for await (const line of readLines(stream)) {
        this.lines.push(line);
        const m = line.match(/Listening for client connections on [^\s]+:(\d+)/);
        if (m) listening(Number(m[1]));
      }
    };
    const pumped = Promise.all([pump(child.stdout), pump(child.stderr)]);
    this.#status = child.status.then(async (st) => (await pumped, st));
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      this.port = await Promise.race([
        ready,
        this.#status.then((st) => {
          throw new Error(`nats-server exited (${st.code}) before listening\n${this.output()}`);
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`nats-server did not listen in time\n${this.output()}`)),
            15_000,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ends the server (SIGKILL by default: an outage, not a goodbye). */
  async stop(signal: Deno.Signal = "SIGKILL"): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = null;
    try {
      child.kill(signal);
    } catch {
      // Already gone.
    }
    await this.#status;
  }

  /** Starts it again on the same port (after a stop). */
  async restart(): Promise<void> {
    await this.stop();
    await this.#launch(this.port);
  }

  /** Lines the server logged that match `re` (e.g. its slow-consumer notices). */
  count(re: RegExp): number {
    return this.lines.filter((l) => re.test(l)).length;
  }

  output(): string {
    return this.lines.map((l) => `    nats| ${l}`).join("\n");
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/**
 * A TCP relay in front of a server, for cutting off one client: `cut()`
 * closes what passes through and turns new connections away until `heal()`.
 */
export class CutProxy {
  readonly #listener: Deno.TcpListener;
  readonly #open = new Set<Deno.TcpConn>();
  #cut = false;
  readonly #accepting: Promise<void>;

  private constructor(listener: Deno.TcpListener, readonly targetPort: number) {
    this.#listener = listener;
    this.#accepting = this.#accept();
  }

  static start(targetPort: number): CutProxy {
    return new CutProxy(Deno.listen({ hostname: "127.0.0.1", port: 0 }), targetPort);
  }

  get url(): string {
    return `nats://127.0.0.1:${this.#listener.addr.port}`;
  }

  async #accept(): Promise<void> {
    for await (const conn of this.#listener) {
      if (this.#cut) {
        conn.close();
        continue;
      }
      this.#pipe(conn).catch(() => {});
    }
  }

  async #pipe(conn: Deno.TcpConn): Promise<void> {
    const upstream = await Deno.connect({ hostname: "127.0.0.1", port: this.targetPort });
    this.#open.add(conn).add(upstream);
    const close = () => {
      for (const c of [conn, upstream]) {
        this.#open.delete(c);
        try {
          c.close();
        } catch {
          // Already closed.
        }
      }
    };
    await Promise.race([
      conn.readable.pipeTo(upstream.writable, { preventClose: true }).catch(() => {}),
      upstream.readable.pipeTo(conn.writable, { preventClose: true }).catch(() => {}),
    ]);
    close();
  }

  /** Drops every connection through it and refuses new ones. */
  cut(): void {
    this.#cut = true;
    for (const c of [...this.#open]) {
      try {
        c.close();
      } catch {
        // Already closed.
      }
    }
    this.#open.clear();
  }

  heal(): void {
    this.#cut = false;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.cut();
    this.#listener.close();
    await this.#accepting.catch(() => {});
  }
}
