/**
 * The runner control socket: hello, request/response by id (answers may come
 * in pieces: chunked_reply.ts), events in, acks out. Over 400 lines: the
 * request bookkeeping and the socket's message switch share the link's
 * private state, and splitting them would expose it.
 *
 * @module
 */
import {
  CloseCode,
  type ControlResponse,
  type EventsMessage,
  MAX_WS_MESSAGE_BYTES,
  PROTOCOL_VERSION,
  type RunnerHello,
  type SessionEvent,
  type WireError,
} from "../shared/protocol.ts";
import { MAX_LINK_DEPTH } from "../shared/json.ts";
import { closeReason, parseMessage, shown } from "./_message.ts";
import type { Principal } from "./auth.ts";
import type { ChunkSink } from "./chunked_reply.ts";
import { type ErrorKind, offline, rejected, RelayError, timeout } from "./errors.ts";
import type { RunnerConnection } from "./runner_registry.ts";
import type { AsyncStore } from "./store/mod.ts";
import { InOrder } from "./_in_order.ts";
import type { ChannelSocket } from "./ws_transport.ts";

/** How long a new runner socket may stay silent before its hello (default). */
export const HELLO_TIMEOUT_MS = 10_000;

const RUNNER_ID = /^[A-Za-z0-9_-]{1,64}$/;

interface Pending {
  resolve: (data: unknown) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
  /** Takes the pieces of a chunked answer; each one (and each ack) restarts the timer. */
  sink?: ChunkSink;
  rearm: () => void;
}

/** The relay's end of one runner's control connection, after its hello was accepted. */
export class RunnerLink implements RunnerConnection {
  /** Sessions whose spawn request is in flight (not yet confirmed by the runner). */
  readonly pendingSpawns = new Set<string>();
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed = false;

  constructor(
    readonly socket: ChannelSocket,
    readonly runnerId: string,
    readonly userId: string,
    readonly keyId: string | null,
  ) {}

  send(msg: unknown): void {
    if (this.#closed || this.socket.readyState !== WebSocket.OPEN) return;
    this.socket.send(JSON.stringify(msg));
  }

  /**
   * Sends a request and resolves with the runner's answer; rejects with a
   * RelayError. With a `sink`, the answer may come in pieces first.
   */
  request(op: string, data: unknown, timeoutMs: number, sink?: ChunkSink): Promise<unknown> {
    // A socket already closing (its close frame came in) is offline: a request sent
    // now would only wait for the close (502) instead of answering 503 at once.
    if (this.#closed || this.socket.readyState !== WebSocket.OPEN) {
      return Promise.reject(offline());
    }
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const expire = () => {
        this.#pending.delete(id);
        reject(timeout("runner_timeout", `Runner did not answer '${op}' in time`));
      };
      const p: Pending = {
        resolve,
        reject,
        timer: setTimeout(expire, timeoutMs),
        rearm: () => (clearTimeout(p.timer), p.timer = setTimeout(expire, timeoutMs)),
      };
      if (sink) {
        p.sink = sink;
        sink.bind({
          ack: () => (p.rearm(), this.send({ t: "chunk_ack", id })),
          cancel: (reason) => this.#abandon(id, reason),
        });
      }
      this.#pending.set(id, p);
      try {
        this.send({ t: "req", id, op, data });
      } catch (err) {
        // Not serialisable (e.g. nested past what JSON.stringify's stack takes):
        // fail now rather than wait for the timeout.
        this.#pending.delete(id);
        clearTimeout(p.timer);
        reject(err);
      }
    });
  }

  /** A piece of a chunked answer; a malformed one (or one past the window) fails the request. */
  chunk(id: number, data: unknown): void {
    const p = this.#pending.get(id);
    if (!p?.sink) return;
    p.rearm();
    if (!p.sink.push(data)) {
      this.#abandon(id, rejected("bad_runner_answer", "Runner sent a malformed chunked answer"));
    }
  }

  /** Stops waiting for a request, tells the runner to stop answering it, fails it with `reason`. */
  #abandon(id: number, reason: Error): void {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    this.send({ t: "cancel", id });
    p.reject(reason);
  }

  /** Settles the request a response answers. */
  resolve(msg: ControlResponse): void {
    const p = this.#pending.get(msg.id);
    if (!p) return;
    this.#pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.ok) p.resolve(msg.data);
    else p.reject(runnerError(msg.error));
  }

  /** Fails every pending request (the socket is gone). */
  failPending(): void {
    this.#closed = true;
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(new RelayError("unreachable", "runner_unreachable", "Runner disconnected"));
    }
    this.#pending.clear();
  }

  close(code: number, reason: string): void {
    try {
      this.socket.close(code, reason);
    } catch {
      // Already closing.
    }
    this.failPending();
  }
}

/** What a runner's error code means to the relay's callers (any other code: it failed). */
const RUNNER_ERROR_KINDS: Record<string, ErrorKind> = {
  cwd_outside_roots: "invalid",
  bad_request: "invalid",
  cwd_not_found: "invalid",
  unknown_model: "invalid",
  not_found: "not_found",
  busy: "conflict",
  session_ended: "conflict",
  not_ready: "conflict",
  not_queued: "conflict",
  runner_timeout: "timeout",
};

/** The RelayError for an error the runner reported, keeping its code and message. */
function runnerError(e: WireError | undefined): RelayError {
  const code = typeof e?.code === "string" ? e.code : "runner_error";
  const message = typeof e?.message === "string" && e.message.trim() !== ""
    ? e.message
    : "Runner failed the request";
  return new RelayError(
    Object.hasOwn(RUNNER_ERROR_KINDS, code) ? RUNNER_ERROR_KINDS[code]! : "rejected",
    code,
    message,
  );
}

/** What a runner socket needs of the relay (the hub). */
export interface RunnerHub {
  /** Registers a link whose hello was accepted; answers what its welcome carries. */
  attachRunner(link: RunnerLink, sessions: string[]): Promise<{
    acked: Record<string, number>;
    ended: string[];
  }>;
  /** Forgets a link whose socket closed. */
  detachRunner(link: RunnerLink): void;
  /**
   * Takes a checked `events` message; a promise when it is not taken yet
   * (the link's next message waits for it).
   */
  ingest(link: RunnerLink, msg: EventsMessage): void | Promise<void>;
  /** A runner's `service_message` (progress, live git status). */
  serviceFromRunner(link: RunnerLink, msg: Record<string, unknown>): void;
  log(line: string): void;
  readonly store: {
    readonly runners: Pick<AsyncStore["runners"], "get" | "upsert">;
    readonly keys: Pick<AsyncStore["keys"], "bindRunner">;
  };
}

/** The calls a runner makes for its agents' trigger tools, and its trigger announcements. */
export interface RunnerCalls {
  /** Answers a call (its result, or a RelayError the runner hears as `{code, message}`). */
  call(link: RunnerLink, op: string, data: Record<string, unknown>): unknown;
  /** Stores the trigger definitions a runner announced; returns the problems found. */
  announce(runnerId: string, defs: unknown): string[] | Promise<string[]>;
  /** Keeps the panels, sigils and services a runner announced; returns the problems found. */
  announceServices?(
    link: RunnerLink,
    msg: Record<string, unknown>,
  ): string[];
}

/** Options of {@linkcode acceptRunnerSocket}. */
export interface AcceptRunnerOptions {
  hub: RunnerHub;
  /** Serves the runner's calls for its agents' trigger tools and its announcements. */
  calls: RunnerCalls;
  /** Resolves an API key or runner token to its owner. */
  principalFromKey: (key: string) => Promise<Principal | null>;
  /** The key shown in the handshake's headers, if any: the hello must carry the same. */
  headerKey?: string | null;
  /** Called once the hello is accepted (lifts the transport's first-message limit). */
  authenticated?: () => void;
  /** How long the socket may stay without an accepted hello; default HELLO_TIMEOUT_MS. */
  helloTimeoutMs?: number;
}

/**
 * Drives one runner control socket: waits for the hello, authenticates it,
 * then routes events, responses and pings until the socket closes. Once the
 * hello is accepted, the link's messages are handled in the order they came,
 * each one after the store work of the one before (InOrder).
 */
export function acceptRunnerSocket(socket: ChannelSocket, options: AcceptRunnerOptions): void {
  const { hub } = options;
  let link: RunnerLink | null = null;
  let greeting = false;
  const inOrder = new InOrder((err) => {
    hub.log(`runner message failed: ${err}`);
    link?.close(CloseCode.internalError, "Relay failed to handle a message");
  }, {
    // Messages waiting for a slow store hold the socket's reading, not the relay's memory.
    pause: () => socket.pause?.(),
    resume: () => socket.resume?.(),
  });
  const helloTimeoutMs = options.helloTimeoutMs ?? HELLO_TIMEOUT_MS;
  const helloTimer = setTimeout(() => {
    if (!link) {
      reject(CloseCode.badHello, "hello_timeout", `No hello within ${helloTimeoutMs / 1000} s`);
    }
  }, helloTimeoutMs);

  function reject(code: number, errCode: string, message: string): void {
    clearTimeout(helloTimer);
    try {
      socket.send(JSON.stringify({ t: "error", code: errCode, message }));
      socket.close(code, closeReason(message));
    } catch {
      // The socket is already gone.
    }
  }

  async function onHello(hello: Partial<RunnerHello>): Promise<void> {
    if (hello.t !== "hello") {
      return reject(CloseCode.badHello, "bad_hello", "First message must be a hello");
    }
    if (hello.v !== PROTOCOL_VERSION) {
      return reject(
        CloseCode.badHello,
        "protocol_version",
        `Unsupported protocol version: ${shown(hello.v)} (relay speaks ${PROTOCOL_VERSION})`,
      );
    }
    if (typeof hello.runnerId !== "string" || !RUNNER_ID.test(hello.runnerId)) {
      return reject(CloseCode.badHello, "bad_hello", "Invalid runnerId");
    }
    const sameKey = !options.headerKey || hello.apiKey === options.headerKey;
    const principal = typeof hello.apiKey === "string" && sameKey
      ? await options.principalFromKey(hello.apiKey)
      : null;
    if (!principal) {
      return reject(CloseCode.unauthorized, "unauthorized", "Invalid or revoked API key");
    }
    if (principal.scope === "read") {
      return reject(
        CloseCode.forbidden,
        "forbidden_scope",
        "A read-only key cannot connect a runner",
      );
    }
    if (principal.runnerId !== null && principal.runnerId !== hello.runnerId) {
      return reject(
        CloseCode.forbidden,
        "forbidden_scope",
        `This key is bound to another runner: '${principal.runnerId}'`,
      );
    }
    const existing = await hub.store.runners.get(hello.runnerId);
    if (existing && existing.userId !== principal.userId) {
      return reject(CloseCode.forbidden, "forbidden", "This runner id belongs to another account");
    }
    // A runner token reaches one runner: the first to say hello with it.
    if (principal.scope === "runner" && principal.runnerId === null && principal.keyId) {
      const bound = await hub.store.keys.bindRunner(principal.keyId, hello.runnerId);
      if (bound !== hello.runnerId) {
        return reject(
          CloseCode.forbidden,
          "forbidden_scope",
          `This key is bound to another runner: '${bound}'`,
        );
      }
    }
    if (socket.readyState !== WebSocket.OPEN) return;
    clearTimeout(helloTimer);
    options.authenticated?.();
    const now = new Date().toISOString();
    await hub.store.runners.upsert({
      id: hello.runnerId,
      userId: principal.userId,
      name: str(hello.name, 100) || hello.runnerId,
      platform: str(hello.platform, 40),
      version: str(hello.version, 40),
      roots: Array.isArray(hello.roots)
        ? hello.roots.filter((r) => typeof r === "string").slice(0, 100).map((r) =>
          r.slice(0, 4096)
        )
        : [],
      createdAt: existing?.createdAt ?? now,
      lastSeenAt: now,
    });
    if (socket.readyState !== WebSocket.OPEN) return;
    const accepted = new RunnerLink(socket, hello.runnerId, principal.userId, principal.keyId);
    link = accepted;
    const reported = Array.isArray(hello.sessions)
      ? hello.sessions.map((s) => s?.sessionId).filter((id): id is string => typeof id === "string")
      : [];
    // The link's messages from now on wait for the welcome's answer (InOrder).
    inOrder.run(async () => {
      const { acked, ended } = await hub.attachRunner(accepted, reported);
      accepted.send({
        t: "welcome",
        v: PROTOCOL_VERSION,
        runnerId: accepted.runnerId,
        acked,
        ended,
      });
    });
  }

  socket.onmessage = (ev) => {
    if (typeof ev.data !== "string") {
      return link
        ? link.close(CloseCode.unsupportedData, "Binary frames are not used on this channel")
        : undefined;
    }
    if (ev.data.length > MAX_WS_MESSAGE_BYTES) {
      if (link) link.close(CloseCode.tooBig, "Message too big");
      else reject(CloseCode.tooBig, "too_big", "Message too big");
      return;
    }
    const parsed = parseMessage(ev.data, MAX_LINK_DEPTH);
    if (!parsed.ok) {
      if (!link) {
        return parsed.code === "too_deep"
          ? reject(CloseCode.badHello, parsed.code, parsed.message)
          : reject(CloseCode.badHello, "bad_hello", "Hello is not a JSON object");
      }
      link.send({ t: "error", code: parsed.code, message: parsed.message });
      return;
    }
    const msg: { t?: unknown; [k: string]: unknown } = parsed.msg;
    if (!link) {
      if (greeting) return;
      greeting = true;
      onHello(msg as Partial<RunnerHello>).catch((err) => {
        hub.log(`runner hello failed: ${err}`);
        reject(CloseCode.internalError, "internal", "Relay failed to accept the runner");
      }).finally(() => {
        greeting = false;
      });
      return;
    }
    const from = link;
    inOrder.run(() => onMessage(from, msg), ev.data.length);
  };

  /** One message of an accepted link; a promise when the next one must wait for it. */
  function onMessage(link: RunnerLink, msg: { t?: unknown; [k: string]: unknown }) {
    switch (msg.t) {
      case "events": {
        const bad = invalidEvents(msg as Partial<EventsMessage>);
        if (bad) {
          link.send({ t: "error", code: "bad_events", message: `Invalid events: ${bad}` });
          return;
        }
        return hub.ingest(link, msg as unknown as EventsMessage);
      }
      case "res":
        if (typeof msg.id === "number") link.resolve(msg as unknown as ControlResponse);
        return;
      case "chunk":
        if (typeof msg.id === "number") link.chunk(msg.id, msg.data);
        return;
      case "ping":
        link.send({ t: "pong" });
        return;
      case "service_message":
        return hub.serviceFromRunner(link, msg);
      case "call": {
        const id = msg.id;
        if (typeof id !== "number" || typeof msg.op !== "string") {
          link.send({
            t: "error",
            code: "bad_call",
            message: "A call needs a numeric id and an op",
          });
          return;
        }
        const data = typeof msg.data === "object" && msg.data !== null && !Array.isArray(msg.data)
          ? msg.data as Record<string, unknown>
          : {};
        const from = link;
        // Calls run side by side (a subagent's wait holds one for minutes): not in order.
        Promise.resolve().then(() => options.calls.call(from, msg.op as string, data))
          .then(
            (result) => from.send({ t: "result", id, ok: true, data: result ?? {} }),
            (err) => {
              const e = err instanceof RelayError ? err : null;
              if (!e) hub.log(`runner call '${String(msg.op)}' failed: ${err}`);
              from.send({
                t: "result",
                id,
                ok: false,
                error: { code: e?.code ?? "internal", message: e?.message ?? "Internal error" },
              });
            },
          );
        return;
      }
      case "service_announce":
        return announce(link, msg);
      default:
        link.send({
          t: "error",
          code: "unknown_type",
          message: `Unknown message type: '${shown(msg.t)}'`,
        });
    }
  }

  async function announce(link: RunnerLink, msg: Record<string, unknown>): Promise<void> {
    const problems = (await options.calls.announce(link.runnerId, msg.triggerDefs))
      .concat(options.calls.announceServices?.(link, msg) ?? []);
    for (const p of problems.slice(0, 5)) {
      link.send({ t: "error", code: "bad_trigger_def", message: `Trigger ignored: ${p}` });
    }
  }
  socket.onclose = () => {
    clearTimeout(helloTimer);
    if (link) {
      link.failPending();
      hub.detachRunner(link);
    }
  };
  socket.onerror = () => {};
}

function str(v: unknown, max: number): string {
  return typeof v === "string" ? v.slice(0, max) : "";
}

/** Checks the shape of a runner's `events` message; returns a reason when it is wrong. */
export function invalidEvents(msg: Partial<EventsMessage>): string | null {
  if (typeof msg.sessionId !== "string" || msg.sessionId.length > 100) return "bad sessionId";
  if (!Array.isArray(msg.events)) return "events must be an array";
  for (const ev of msg.events as Partial<SessionEvent>[]) {
    if (!ev || !Number.isSafeInteger(ev.seq) || (ev.seq as number) < 1) return "bad seq";
    if (typeof ev.ts !== "number") return "bad ts";
    if (!ev.e || typeof ev.e !== "object" || typeof ev.e.type !== "string") return "bad event";
  }
  return null;
}
