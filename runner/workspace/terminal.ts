/**
 * The runner's web terminals: a PTY (`@lydell/node-pty`, its own child
 * process) running the user's shell in a folder inside the workspace roots,
 * a 64 KiB scrollback replayed to each viewer that attaches, and viewers
 * attached over tunnel streams (shared/streams.ts). A terminal outlives its
 * viewers; it ends when its shell exits, when closed, or when the runner
 * stops. While a viewer's stream has no credit left the PTY is paused, so a
 * viewer that stops reading holds memory at the stream's window.
 *
 * @module
 */
import type { IPty } from "@lydell/node-pty";
import { hostPlatform } from "../platform/platform.ts";
import { terminalShell } from "../platform/shell.ts";
import type { MuxStream } from "../../shared/streams.ts";
import {
  MAX_TERMINAL_DIMENSION,
  MAX_TERMINALS_PER_RUNNER,
  TERMINAL_SCROLLBACK_BYTES,
  type TerminalInfo,
  TerminalMsg,
  TerminalMsgReader,
} from "../../shared/terminal_api.ts";
import { RequestError } from "../control_link.ts";
import { checkCwd, defaultCwd, PathRejectedError } from "../roots.ts";

/** What the terminals need of the runner. */
export interface TerminalOptions {
  /** Resolved workspace roots, or null for any folder. */
  roots: string[] | null;
  home: string;
  log: (line: string) => void;
  /** Terminals at once (default {@linkcode MAX_TERMINALS_PER_RUNNER}). */
  max?: number;
  /** The shell (default runner/platform/shell.ts: `$SHELL`, else bash, else sh; PowerShell or cmd on Windows). */
  shell?: string;
}

const encoder = new TextEncoder();
const TERMINAL_ID = /^t_[A-Za-z0-9]{1,40}$/;

/** Output kept to replay, at most `limit` bytes (the oldest dropped first). */
export class Scrollback {
  #chunks: Uint8Array[] = [];
  #bytes = 0;
  constructor(readonly limit = TERMINAL_SCROLLBACK_BYTES) {}

  push(chunk: Uint8Array): void {
    if (chunk.byteLength >= this.limit) {
      this.#chunks = [chunk.slice(chunk.byteLength - this.limit)];
      this.#bytes = this.limit;
      return;
    }
    this.#chunks.push(chunk);
    this.#bytes += chunk.byteLength;
    while (this.#bytes > this.limit) {
      const head = this.#chunks[0]!;
      const over = this.#bytes - this.limit;
      if (head.byteLength <= over) {
        this.#chunks.shift();
        this.#bytes -= head.byteLength;
      } else {
        this.#chunks[0] = head.slice(over);
        this.#bytes -= over;
      }
    }
  }

  get bytes(): number {
    return this.#bytes;
  }

  snapshot(): Uint8Array {
    const out = new Uint8Array(this.#bytes);
    let at = 0;
    for (const c of this.#chunks) {
      out.set(c, at);
      at += c.byteLength;
    }
    return out;
  }
}

interface Viewer {
  stream: MuxStream;
  writer: WritableStreamDefaultWriter<Uint8Array>;
  /** Writes not yet taken by the stream (each waits on credit). */
  pending: number;
}

/** One terminal. */
export class Terminal {
  readonly scrollback = new Scrollback();
  readonly viewers = new Set<Viewer>();
  readonly createdAt = new Date();
  readonly exited: Promise<void>;
  #paused = false;
  #ended = false;
  #resolveExited!: () => void;

  constructor(
    readonly id: string,
    readonly cwd: string,
    readonly shell: string,
    public cols: number,
    public rows: number,
    readonly proc: IPty,
  ) {
    this.exited = new Promise((r) => this.#resolveExited = r);
    proc.onData((d) => this.#output(encoder.encode(d)));
    proc.onExit(() => this.#end());
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Whether the PTY is paused (a viewer's stream has no credit for its output). */
  get paused(): boolean {
    return this.#paused;
  }

  info(): TerminalInfo {
    return {
      terminalId: this.id,
      cwd: this.cwd,
      shell: this.shell,
      cols: this.cols,
      rows: this.rows,
      createdAt: this.createdAt.toISOString(),
      viewers: this.viewers.size,
    };
  }

  /** Input text (node-pty takes strings; each viewer decodes its bytes as a stream). */
  write(text: string): void {
    if (!this.#ended && text !== "") this.proc.write(text);
  }

  resize(cols: number, rows: number): void {
    if (this.#ended) return;
    this.cols = cols;
    this.rows = rows;
    try {
      this.proc.resize(cols, rows);
    } catch { /* exiting */ }
  }

  /** Kills the shell (SIGHUP, as a closed terminal would). */
  close(): void {
    if (this.#ended) return;
    try {
      this.proc.kill("SIGHUP");
    } catch { /* gone */ }
    // A shell that ignores SIGHUP is ended anyway.
    const t = setTimeout(() => {
      try {
        this.proc.kill("SIGKILL");
      } catch { /* gone */ }
      this.#end();
    }, 2000);
    this.exited.then(() => clearTimeout(t));
  }

  /** Attaches a viewer: the scrollback first, then live output; its messages are input and resizes. */
  attach(stream: MuxStream): void {
    const viewer: Viewer = { stream, writer: stream.writable.getWriter(), pending: 0 };
    this.viewers.add(viewer);
    this.#send(viewer, this.scrollback.snapshot());
    if (this.#ended) {
      viewer.writer.close().catch(() => {});
      this.viewers.delete(viewer);
      return;
    }
    stream.closed.then(() => this.#drop(viewer));
    this.#readInput(viewer).catch(() => {}).finally(() => this.#drop(viewer));
  }

  async #readInput(viewer: Viewer): Promise<void> {
    const reader = new TerminalMsgReader();
    // A character split across two messages stays whole.
    const decoder = new TextDecoder();
    for await (const chunk of viewer.stream.readable) {
      for (const m of reader.push(chunk)) {
        if (m.type === TerminalMsg.input) {
          this.write(decoder.decode(m.payload, { stream: true }));
        } else if (m.type === TerminalMsg.resize && m.payload.byteLength === 4) {
          const v = new DataView(m.payload.buffer, m.payload.byteOffset, 4);
          const cols = v.getUint16(0), rows = v.getUint16(2);
          if (validSize(cols) && validSize(rows)) this.resize(cols, rows);
        }
      }
    }
  }

  #drop(viewer: Viewer): void {
    if (!this.viewers.delete(viewer)) return;
    viewer.stream.reset("detached");
    this.#updatePause();
  }

  #output(bytes: Uint8Array): void {
    this.scrollback.push(bytes);
    for (const v of this.viewers) this.#send(v, bytes);
  }

  #send(viewer: Viewer, bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    viewer.pending++;
    this.#updatePause();
    viewer.writer.write(bytes).then(
      () => {
        viewer.pending--;
        this.#updatePause();
      },
      () => this.#drop(viewer),
    );
  }

  /** Pauses the PTY while any viewer has output waiting for credit. */
  #updatePause(): void {
    if (this.#ended) return;
    const stalled = [...this.viewers].some((v) => v.pending > 1);
    if (stalled && !this.#paused) {
      this.#paused = true;
      this.proc.pause();
    } else if (!stalled && this.#paused) {
      this.#paused = false;
      this.proc.resume();
    }
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    for (const v of [...this.viewers]) {
      // Output already queued still reaches the viewer, then the stream ends.
      v.writer.close().catch(() => {});
      this.viewers.delete(v);
    }
    this.#resolveExited();
  }
}

let ptyModule: Promise<typeof import("@lydell/node-pty")> | null = null;

async function loadPty(): Promise<typeof import("@lydell/node-pty")> {
  ptyModule ??= import("@lydell/node-pty");
  try {
    const m = await ptyModule;
    return (m as unknown as { default?: typeof m }).default ?? m;
  } catch (err) {
    ptyModule = null;
    throw new RequestError("terminal_unavailable", `No PTY on this runner: ${err}`);
  }
}

function validSize(n: unknown): n is number {
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_TERMINAL_DIMENSION;
}

/** The runner's terminals, and the control requests about them. */
export class TerminalManager {
  readonly #opts: TerminalOptions;
  readonly #terminals = new Map<string, Terminal>();

  constructor(options: TerminalOptions) {
    this.#opts = options;
  }

  static readonly OPS: ReadonlySet<string> = new Set([
    "terminal_open",
    "terminal_list",
    "terminal_close",
  ]);

  get size(): number {
    return this.#terminals.size;
  }

  get(id: string): Terminal | undefined {
    return this.#terminals.get(id);
  }

  request(op: string, data: unknown): Promise<unknown> {
    const d = (data ?? {}) as Record<string, unknown>;
    switch (op) {
      case "terminal_open":
        return this.open(d);
      case "terminal_list":
        return Promise.resolve({ terminals: this.list() });
      case "terminal_close": {
        const t = typeof d.terminalId === "string" ? this.#terminals.get(d.terminalId) : undefined;
        if (!t) return Promise.reject(new RequestError("not_found", "Terminal not found"));
        t.close();
        return t.exited.then(() => ({ closed: true }));
      }
      default:
        return Promise.reject(new RequestError("unknown_op", `Unknown request: '${op}'`));
    }
  }

  list(): TerminalInfo[] {
    return [...this.#terminals.values()].map((t) => t.info());
  }

  /** Starts a terminal; rejects a folder outside the roots and a runner at its cap. */
  async open(req: { cwd?: unknown; cols?: unknown; rows?: unknown }): Promise<TerminalInfo> {
    const cols = req.cols ?? 80, rows = req.rows ?? 24;
    if (!validSize(cols) || !validSize(rows)) {
      throw new RequestError("bad_request", `cols and rows must be 1–${MAX_TERMINAL_DIMENSION}`);
    }
    if (req.cwd !== undefined && typeof req.cwd !== "string") {
      throw new RequestError("bad_request", "cwd must be a string");
    }
    const { roots, home } = this.#opts;
    let cwd: string;
    try {
      cwd = await checkCwd(req.cwd || defaultCwd(roots, home), roots, { home });
    } catch (err) {
      if (err instanceof PathRejectedError) throw new RequestError(err.code, err.message);
      throw err;
    }
    // Loaded on the first terminal: a runner nobody opens one on never loads the native module,
    // and a platform without a prebuilt fails this request only.
    const pty = await loadPty();
    // No await from the count to the spawn: concurrent opens cannot pass the cap together.
    const max = this.#opts.max ?? MAX_TERMINALS_PER_RUNNER;
    if (this.#terminals.size >= max) {
      throw new RequestError("too_many_terminals", `At most ${max} terminals per runner`);
    }
    const shell = this.#opts.shell ?? terminalShell(hostPlatform()).program;
    const env = Deno.env.toObject();
    // The runner's key and relay secrets never reach the shell.
    for (const k of Object.keys(env)) {
      if (/^BATON_(API_KEY|RUNNER_API_KEY)$/.test(k)) delete env[k];
    }
    env.TERM = "xterm-256color";
    const proc = pty.spawn(shell, [], { name: "xterm-256color", cols, rows, cwd, env });
    const id = `t_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
    const t = new Terminal(id, cwd, shell, cols, rows, proc);
    this.#terminals.set(id, t);
    t.exited.then(() => {
      this.#terminals.delete(id);
      this.#opts.log(`terminal ${id} ended`);
    });
    this.#opts.log(`terminal ${id} started in ${cwd}`);
    return t.info();
  }

  /** A terminal stream the relay opened; reset when the terminal is unknown. */
  attach(stream: MuxStream, terminalId: unknown): void {
    const t = typeof terminalId === "string" && TERMINAL_ID.test(terminalId)
      ? this.#terminals.get(terminalId)
      : undefined;
    if (!t) return stream.reset("terminal_not_found");
    t.attach(stream);
  }

  /** The runner stops: every terminal ends. */
  async closeAll(): Promise<void> {
    const all = [...this.#terminals.values()];
    for (const t of all) t.close();
    await Promise.all(all.map((t) => t.exited));
  }
}
