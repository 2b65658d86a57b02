/**
 * The runner control socket: waits for the hello and authenticates it, then
 * routes events, answers, calls and pings in the order they came until the
 * socket closes. The link it hands the hub (requests by id) is runner_link.ts.
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
} from "../shared/protocol.ts";
import { MAX_LINK_DEPTH } from "../shared/json.ts";
import { closeReason, parseMessage, shown } from "./_message.ts";
import type { Principal } from "./auth.ts";
import { RelayError } from "./errors.ts";
import { RunnerLink } from "./runner_link.ts";
import type { AsyncStore } from "./store/mod.ts";
import { InOrder } from "./_in_order.ts";
import { refused, RUNNER_ID, runnerKeyOwner } from "./_runner_key.ts";
import type { ChannelSocket } from "./ws_transport.ts";

/** How long a new runner socket may stay silent before its hello (default). */
export const HELLO_TIMEOUT_MS = 10_000;

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
    const principal = await runnerKeyOwner(hello.apiKey, hello.runnerId, options);
    if (refused(principal)) return reject(principal.close, principal.code, principal.message);
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
