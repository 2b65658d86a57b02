/**
 * A stand-in runner daemon for relay-side fault tests: a plain WebSocket
 * client that speaks the runner control protocol (hello, answers to
 * requests, `events` frames with whatever seqs the test chooses) and records
 * every ack, so faults can be driven fast and deterministically without
 * workers or a model.
 *
 * @module
 */
import type {
  CreateKeyRequest,
  CreateKeyResponse,
  SpawnSessionRequest,
  SpawnSessionResponse,
} from "../../shared/api.ts";
import {
  type AckMessage,
  type ControlRequest,
  type ErrorMessage,
  PROTOCOL_VERSION,
  type RelayWelcome,
  type SessionEvent,
  type SessionEventBody,
} from "../../shared/protocol.ts";
import { json, type User } from "./client.ts";
import { Conditions } from "./wait.ts";

/** What the fake runner answers to a request: `res` fields, or null to stay silent. */
export type FakeAnswer =
  | { ok: true; data: unknown }
  | { ok: false; error: { code: string; message: string } }
  | null;

/** Options of {@linkcode FakeRunner.connect}. */
export interface FakeRunnerOptions {
  /** A runner token (`brt_…`) or an API key. */
  apiKey: string;
  /** Default: a fresh random id. */
  runnerId?: string;
  name?: string;
  roots?: string[];
  /** Sessions the runner says it holds (as a daemon does after a restart). */
  sessions?: string[];
  /** Answers requests from the relay; the default accepts everything (see {@linkcode defaultAnswer}). */
  answer?: (req: ControlRequest) => FakeAnswer | Promise<FakeAnswer>;
  /** Extra or overriding hello fields (for hostile hellos). */
  hello?: Record<string, unknown>;
  /** How long to wait for the welcome. Default 10 s. */
  timeoutMs?: number;
}

/** The answer a well-behaved runner gives, without running anything. */
export function defaultAnswer(req: ControlRequest): FakeAnswer {
  const data = (req.data ?? {}) as Record<string, unknown>;
  switch (req.op) {
    case "spawn":
      return { ok: true, data: { cwd: typeof data.cwd === "string" ? data.cwd : "/fake" } };
    case "models":
      return { ok: true, data: { models: [{ provider: "fake", id: "fake-1", name: "Fake" }] } };
    case "docs": {
      const name = typeof data.name === "string" ? data.name : "fake";
      if (data.action === "get") {
        return {
          ok: true,
          data: { name, content: "", scope: "user", path: "/fake/SKILL.md", editable: true },
        };
      }
      const list = data.action === "list" || data.action === "refresh";
      return { ok: true, data: list ? { names: [], entries: [], folder: "/fake" } : { names: [] } };
    }
    case "plugins":
      return { ok: true, data: { plugins: [], skipped: false } };
    case "usage":
      return { ok: true, data: emptyUsage(data.range === undefined ? "90d" : data.range) };
    case "sandbox_status":
      return {
        ok: true,
        data: {
          mode: "basic",
          active: true,
          platform: "linux",
          violations: 0,
          recentViolations: [],
          config: {},
        },
      };
    case "sandbox_config":
      return {
        ok: true,
        data: { saved: true, resolvedConfig: {}, message: "Saved" },
      };
    case "terminal_open":
      return {
        ok: true,
        data: {
          terminalId: "t_fake",
          cwd: typeof data.cwd === "string" ? data.cwd : "/fake",
          shell: "/bin/sh",
          cols: typeof data.cols === "number" ? data.cols : 80,
          rows: typeof data.rows === "number" ? data.rows : 24,
          createdAt: new Date(0).toISOString(),
          viewers: 0,
        },
      };
    case "terminal_list":
      return { ok: true, data: { terminals: [] } };
    case "approvals": {
      const policy = { mode: "auto", tools: [], commands: [] };
      return {
        ok: true,
        data: data.sessionId === undefined
          ? { policy }
          : { policy: null, runner: policy, effective: policy },
      };
    }
    case "answer":
      return { ok: false, error: { code: "not_pending", message: "Nothing waits" } };
    default:
      return { ok: true, data: {} };
  }
}

/** The usage summary of a runner that never ran a session. */
export function emptyUsage(range: unknown): Record<string, unknown> {
  return {
    ok: true,
    range,
    totalInputTokens: 0,
    totalOutputTokens: 0,
    totalCostUsd: 0,
    totalCacheReadTokens: 0,
    totalCacheWriteTokens: 0,
    sessions: [],
    sessionCount: 0,
    truncated: false,
    days: [],
    models: [],
    filesIndexed: 0,
    skippedLines: 0,
  };
}

/** A runner's hello (with no sessions, roots or name unless `fields` give them). */
export function runnerHello(
  apiKey: string,
  runnerId: string,
  fields: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    t: "hello",
    v: PROTOCOL_VERSION,
    apiKey,
    runnerId,
    name: runnerId,
    roots: [],
    sessions: [],
    ...fields,
  };
}

/** The relay refused the fake runner's hello. */
export class FakeRunnerRejected extends Error {
  constructor(readonly code: number, readonly reason: string, readonly error?: ErrorMessage) {
    super(`Relay refused the fake runner: ${code} ${reason}`);
    this.name = "FakeRunnerRejected";
  }
}

/** A connected fake runner. */
export class FakeRunner {
  /** Highest acked seq per session. */
  readonly acks = new Map<string, number>();
  /** Every ack in arrival order. */
  readonly ackLog: AckMessage[] = [];
  readonly errors: ErrorMessage[] = [];
  readonly requests: ControlRequest[] = [];
  /** Every frame received (parsed), in order. */
  readonly received: Record<string, unknown>[] = [];
  readonly closed: Promise<CloseEvent>;
  closeEvent: CloseEvent | null = null;
  welcome!: RelayWelcome;
  readonly #conditions = new Conditions((what) => `fake runner: timed out waiting for ${what}`);
  #answer: (req: ControlRequest) => FakeAnswer | Promise<FakeAnswer>;

  private constructor(
    readonly ws: WebSocket,
    readonly runnerId: string,
    answer: (req: ControlRequest) => FakeAnswer | Promise<FakeAnswer>,
  ) {
    this.#answer = answer;
    this.closed = new Promise((resolve) => {
      ws.addEventListener("close", (ev) => {
        this.closeEvent = ev;
        this.#conditions.check();
        resolve(ev);
      });
    });
    ws.addEventListener("message", (ev) => this.#onMessage(ev));
  }

  /** Dials the relay's control socket, says hello and resolves on the welcome. */
  static connect(relayUrl: string, options: FakeRunnerOptions): Promise<FakeRunner> {
    const runnerId = options.runnerId ?? `fake-${crypto.randomUUID().slice(0, 8)}`;
    const ws = new WebSocket(relayUrl.replace(/^http/, "ws") + "/_runner");
    const runner = new FakeRunner(ws, runnerId, options.answer ?? defaultAnswer);
    ws.addEventListener("open", () => {
      ws.send(JSON.stringify(runnerHello(options.apiKey, runnerId, {
        name: options.name ?? runnerId,
        roots: options.roots ?? [],
        version: "0.0.0-fake",
        platform: "linux",
        sessions: (options.sessions ?? []).map((sessionId) => ({ sessionId, cwd: "/fake" })),
        ...options.hello,
      })));
    });
    const answered = () => runner.received.some((m) => m.t === "welcome") || !!runner.closeEvent;
    return runner.until(answered, "the welcome", options.timeoutMs ?? 10_000).then(() => {
      const w = runner.received.find((m) => m.t === "welcome");
      if (w) {
        runner.welcome = w as unknown as RelayWelcome;
        return runner;
      }
      const err = runner.received.find((m) => m.t === "error") as ErrorMessage | undefined;
      throw new FakeRunnerRejected(runner.closeEvent!.code, runner.closeEvent!.reason, err);
    }, (err) => {
      ws.close();
      throw err;
    });
  }

  /** Replaces how requests are answered. */
  set answer(fn: (req: ControlRequest) => FakeAnswer | Promise<FakeAnswer>) {
    this.#answer = fn;
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  /** Sends a message as JSON; false when the socket is not open. */
  send(msg: unknown): boolean {
    if (!this.open) return false;
    this.ws.send(JSON.stringify(msg));
    return true;
  }

  /** Sends a raw text or binary frame. */
  sendRaw(data: string | Uint8Array<ArrayBuffer>): boolean {
    if (!this.open) return false;
    this.ws.send(data);
    return true;
  }

  sendEvents(sessionId: string, events: SessionEvent[]): boolean {
    return this.send({ t: "events", sessionId, events });
  }

  /** Highest seq the relay acknowledged for a session (0 when none). */
  acked(sessionId: string): number {
    return this.acks.get(sessionId) ?? 0;
  }

  /** Resolves once the relay acknowledged `seq`; rejects when the socket closes first. */
  async waitForAck(sessionId: string, seq: number, timeoutMs = 30_000): Promise<void> {
    await this.until(
      () => this.acked(sessionId) >= seq || this.closeEvent !== null,
      `ack of ${sessionId} seq ${seq}`,
      timeoutMs,
    );
    if (this.acked(sessionId) < seq) {
      throw new Error(
        `fake runner: socket closed (${this.closeEvent?.code}) before ack ${seq} (have ${
          this.acked(sessionId)
        })`,
      );
    }
  }

  /**
   * Sends a ping and resolves on the pong. The relay handles a socket's
   * messages in order, so everything sent before has been processed.
   */
  async barrier(timeoutMs = 10_000): Promise<void> {
    const n = this.received.filter((m) => m.t === "pong").length;
    if (!this.send({ t: "ping" })) throw new Error("fake runner: socket is not open");
    await this.until(
      () => this.received.filter((m) => m.t === "pong").length > n || this.closeEvent !== null,
      "pong",
      timeoutMs,
    );
    if (this.closeEvent) throw new Error(`fake runner: closed (${this.closeEvent.code})`);
  }

  /**
   * Streams `count` events numbered from `from`, in frames of `frameEvents`,
   * keeping at most `windowEvents` unacknowledged: a fast sender that never
   * lets its own buffers grow without bound.
   */
  async stream(
    sessionId: string,
    count: number,
    body: (seq: number) => SessionEventBody,
    options: { from?: number; frameEvents?: number; windowEvents?: number } = {},
  ): Promise<void> {
    const from = options.from ?? this.acked(sessionId) + 1;
    const frame = options.frameEvents ?? 200;
    const window = options.windowEvents ?? frame * 4;
    const end = from + count - 1;
    for (let seq = from; seq <= end;) {
      const last = Math.min(end, seq + frame - 1);
      const events: SessionEvent[] = [];
      for (let s = seq; s <= last; s++) events.push({ seq: s, ts: Date.now(), e: body(s) });
      if (!this.sendEvents(sessionId, events)) {
        throw new Error(`fake runner: socket closed while streaming (at seq ${seq})`);
      }
      seq = last + 1;
      if (seq - 1 - this.acked(sessionId) > window) {
        await this.waitForAck(sessionId, seq - 1 - window);
      }
    }
    await this.waitForAck(sessionId, end);
  }

  /** Resolves when `pred` holds (checked on every received frame and on close). */
  until(pred: () => boolean, what = "condition", timeoutMs = 30_000): Promise<void> {
    return this.#conditions.until(pred, what, timeoutMs);
  }

  close(code = 1000, reason = ""): Promise<CloseEvent> {
    if (this.ws.readyState < WebSocket.CLOSING) this.ws.close(code, reason);
    return this.closed;
  }

  #onMessage(ev: MessageEvent): void {
    if (typeof ev.data !== "string") return;
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      return;
    }
    this.received.push(msg);
    switch (msg.t) {
      case "welcome":
        // What the relay already holds counts as acknowledged.
        for (const [id, seq] of Object.entries((msg as unknown as RelayWelcome).acked ?? {})) {
          if (typeof seq === "number" && seq > this.acked(id)) this.acks.set(id, seq);
        }
        break;
      case "ack": {
        const ack = msg as unknown as AckMessage;
        this.ackLog.push(ack);
        if (ack.seq > this.acked(ack.sessionId)) this.acks.set(ack.sessionId, ack.seq);
        break;
      }
      case "error":
        this.errors.push(msg as unknown as ErrorMessage);
        break;
      case "req": {
        const req = msg as unknown as ControlRequest;
        this.requests.push(req);
        Promise.resolve(this.#answer(req)).then((a) => {
          if (a) this.send({ t: "res", id: req.id, ...a });
        });
        break;
      }
    }
    this.#conditions.check();
  }
}

/** Creates a runner token (`brt_…`) for `user`. */
export async function runnerToken(user: User): Promise<string> {
  const res = await user.api(
    "/api/keys",
    json("POST", { name: "runner" } satisfies CreateKeyRequest),
  );
  if (res.status !== 201) throw new Error(`runner token: ${res.status} ${await res.text()}`);
  const { key }: CreateKeyResponse = await res.json();
  return key;
}

/** Spawns a session on a (fake) runner through the API; resolves with its id. */
export async function spawnSession(
  user: User,
  runnerId: string,
  body: Omit<SpawnSessionRequest, "runnerId"> = {},
): Promise<string> {
  const res = await user.api(
    "/api/runners/spawn",
    json("POST", { runnerId, prompt: "fake", cwd: "/fake", ...body } satisfies SpawnSessionRequest),
  );
  const text = await res.text();
  if (res.status !== 200) throw new Error(`spawn: ${res.status} ${text}`);
  return (JSON.parse(text) as SpawnSessionResponse).sessionId;
}

/** A streamed text delta of the assistant's first content block. */
export function textDelta(delta: string): SessionEventBody {
  return {
    type: "message_update",
    role: "assistant",
    assistantMessageEvent: { type: "text_delta", contentIndex: 0, delta },
  };
}

/** A tool's partial output, as the worker forwards it. */
export function toolOutput(toolCallId: string, text: string): SessionEventBody {
  return {
    type: "tool_execution_update",
    toolCallId,
    toolName: "bash",
    args: { command: "yes" },
    partialResult: { content: [{ type: "text", text }] },
  };
}
