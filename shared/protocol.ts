/**
 * Wire types of baton's three channels: runner control (runner ↔ relay), viewer
 * (browser ↔ relay) and worker (daemon ↔ worker over stdio). docs/protocol.md
 * describes them in prose; this file is the source of truth.
 *
 * @module
 */
import type { AttachmentRef, ImageInput } from "./attachments_api.ts";

import type { ServiceReplyMessage, ServiceRequestMessage } from "./git_api.ts";
import type { ServicesMessage } from "./services_api.ts";
import type { AnswerVia, ApprovalPolicy } from "./questions_api.ts";

/** Protocol version agreed in the first exchange of every channel. */
export const PROTOCOL_VERSION = 1;

/** Path of the runner control WebSocket on the relay. */
export const RUNNER_WS_PATH = "/_runner";
/** Path of the viewer WebSocket on the relay. */
export const VIEWER_WS_PATH = "/_viewer";

/** A model as the relay and the UI name it. */
export interface ModelRef {
  provider: string;
  id: string;
}

/** A model a runner can use, as listed by `GET /api/runners/{id}/models`. */
export interface ModelInfo extends ModelRef {
  name?: string;
  reasoning?: boolean;
  contextWindow?: number;
}

/** The body of one session event: a (slimmed) pi event or one of baton's own. */
export interface SessionEventBody {
  type: string;
  [key: string]: unknown;
}

/** One numbered session event as stored by the relay and delivered to viewers. */
export interface SessionEvent {
  seq: number;
  /** Milliseconds since the epoch, stamped by the runner. */
  ts: number;
  e: SessionEventBody;
}

/**
 * What a viewer may send into a session. `dequeue` takes back a queued steer
 * or follow-up that the agent has not read yet (its `text` names it).
 */
export type InputKind = "prompt" | "steer" | "followUp" | "abort" | "end" | "dequeue";
export const INPUT_KINDS: readonly InputKind[] = [
  "prompt",
  "steer",
  "followUp",
  "abort",
  "end",
  "dequeue",
];

/**
 * Longest text of one input (a prompt, steer or follow-up) and of a spawn's
 * first prompt, in UTF-16 code units (JavaScript's `length`). The HTTP route
 * and the viewer socket check it with the same {@linkcode inputTextProblem}.
 */
export const MAX_INPUT_TEXT = 200_000;

/** Why an input's text is refused (too long), or null when it is fine. */
export function inputTextProblem(text: string): string | null {
  return text.length > MAX_INPUT_TEXT
    ? `Text must have at most ${MAX_INPUT_TEXT} characters (has ${text.length})`
    : null;
}

/** Lifecycle of a session as the relay lists it. */
export type SessionStatus = "starting" | "running" | "ended" | "error";
/**
 * What the agent of a running session is doing: working on a turn, idle,
 * asleep (its worker stopped after a while without a turn; the next input
 * wakes it) or waking (its worker is starting again).
 */
export type SessionActivity = "working" | "idle" | "asleep" | "waking";

/** A session as the relay lists it. */
export interface SessionInfo {
  sessionId: string;
  runnerId: string;
  status: SessionStatus;
  activity: SessionActivity;
  cwd: string;
  model: ModelRef | null;
  title: string;
  createdAt: string;
  updatedAt: string;
  endedAt: string | null;
  endReason: string | null;
  lastSeq: number;
  isPinned: boolean;
  /**
   * The session whose agent started this one with its `subagent` tool; null
   * for others (the relay always sets it; optional for older peers).
   */
  parentId?: string | null;
  /** The agent definition (from the agents folders) a subagent runs as, if one was named. */
  agent?: string | null;
}

/** Longest title a person may give a session (`PATCH /api/sessions/{id}`). */
export const MAX_SESSION_TITLE = 200;

/** A runner as the relay lists it. */
export interface RunnerInfo {
  id: string;
  name: string;
  connected: boolean;
  sessions: string[];
  platform: string;
  version: string;
  roots: string[];
  lastSeenAt: string | null;
}

/** A structured error carried in replies. */
export interface WireError {
  code: string;
  message: string;
}

// ---------------------------------------------------------------------------
// Runner control channel

/** A session the daemon holds, reported in its hello. */
export interface RunnerSessionReport {
  sessionId: string;
  cwd: string;
}

/** runner → relay, first message after open. */
export interface RunnerHello {
  t: "hello";
  v: number;
  apiKey: string;
  runnerId: string;
  name: string;
  roots: string[];
  version: string;
  platform: string;
  sessions: RunnerSessionReport[];
}

/** relay → runner, answer to a good hello. `acked` is the last stored seq per session. */
export interface RelayWelcome {
  t: "welcome";
  v: number;
  runnerId: string;
  acked: Record<string, number>;
  /** Sessions the relay knows as ended: the daemon forgets them. */
  ended: string[];
}

export interface ControlRequest {
  t: "req";
  id: number;
  op: string;
  data: unknown;
}

export type ControlResponse =
  | { t: "res"; id: number; ok: true; data: unknown }
  | { t: "res"; id: number; ok: false; error: WireError };

/** runner → relay: a request on behalf of a session's agent (its trigger tools). */
export interface CallMessage {
  t: "call";
  id: number;
  op: string;
  data: Record<string, unknown>;
}

/** relay → runner: the answer to a {@linkcode CallMessage}. */
export type ResultMessage =
  | { t: "result"; id: number; ok: true; data: unknown }
  | { t: "result"; id: number; ok: false; error: WireError };

/** runner → relay after each welcome: what its services (and the runner itself) offer. */
export interface ServiceAnnounce {
  t: "service_announce";
  triggerDefs: unknown[];
  panels: unknown[];
  sigils: unknown[];
  /** Every discovered service with its status (shared/services_api.ts `ServiceInfo`). */
  services?: unknown[];
}

/** runner → relay: numbered events of one session, oldest first. */
export interface EventsMessage {
  t: "events";
  sessionId: string;
  events: SessionEvent[];
}

/** relay → runner: every event of the session up to `seq` is stored. */
export interface AckMessage {
  t: "ack";
  sessionId: string;
  seq: number;
}

export interface PingMessage {
  t: "ping";
}
export interface PongMessage {
  t: "pong";
}

export interface ErrorMessage {
  t: "error";
  code: string;
  message: string;
  /** The request or input id the error answers, when there is one. */
  id?: number | string;
  sessionId?: string;
}

/** A trigger as it reaches a session (and its history). */
export interface DeliveredTrigger {
  triggerId: string;
  type: string;
  /** A service name, or `external:<source>` for webhooks. */
  source: string;
  summary?: string;
  payload: Record<string, unknown>;
  deliverAs: "steer" | "followUp";
  expectsResponse: boolean;
}

/** Requests the relay sends to a runner, with their payloads. */
export interface SpawnRequest {
  sessionId: string;
  cwd: string | null;
  prompt: string;
  model: ModelRef | null;
  /** A trigger the new session starts with (listeners, webhooks). */
  trigger?: DeliveredTrigger;
  /** What the agent is asked to do with that trigger (the listener's or webhook's prompt). */
  instruction?: string;
  /** Files for the first prompt; the runner fetches them (see shared/attachments_api.ts). */
  attachments?: AttachmentRef[];
  /** A subagent's role: the agent definition it runs as (docs/subagents.md). */
  agent?: string;
}
export interface TriggerRequest {
  sessionId: string;
  trigger: DeliveredTrigger;
  instruction?: string;
}
export interface SpawnResult {
  cwd: string;
}
export interface InputRequest {
  sessionId: string;
  kind: InputKind;
  text: string;
  /** Files that go with the text; the runner fetches them (see shared/attachments_api.ts). */
  attachments?: AttachmentRef[];
}

/** WebSocket close codes used by baton. */
export const CloseCode = {
  normal: 1000,
  goingAway: 1001,
  /** A binary frame on a channel that only takes text. */
  unsupportedData: 1003,
  policy: 1008,
  /** A message over the channel's limit, or a first message over the unauthenticated one. */
  tooBig: 1009,
  /** The relay failed (storing events, accepting a runner, authenticating). */
  internalError: 1011,
  unauthorized: 4001,
  forbidden: 4003,
  replaced: 4009,
  badHello: 4400,
  revoked: 4401,
  /** A viewer that left more than the relay keeps for it unread. */
  tooSlow: 4429,
} as const;

// ---------------------------------------------------------------------------
// Worker channel (newline-delimited JSON over the worker's stdin/stdout)

export interface WorkerStart {
  t: "start";
  sessionId: string;
  cwd: string;
  model: ModelRef | null;
  prompt: string;
  /** Attached images for the first prompt. */
  images?: ImageInput[];
  trigger?: DeliveredTrigger;
  instruction?: string;
  /** pi session file to resume instead of starting a new conversation. */
  resumeFile: string | null;
  /** True when the daemon brings back a session after a restart, or wakes it. */
  resumed: boolean;
  /** True when the session wakes from sleep (not after a restart). */
  woke?: boolean;
  /** A subagent's role: the agent definition it runs as. */
  agent?: string;
}

export interface WorkerInput {
  t: "input";
  id: number;
  kind: InputKind;
  text: string;
  /** Attached images, for the model to see. */
  images?: ImageInput[];
}

export interface WorkerTrigger {
  t: "trigger";
  id: number;
  trigger: DeliveredTrigger;
  instruction?: string;
}

/** An answer to a question or approval the worker holds (runner/questions.ts). */
export interface WorkerAnswer {
  t: "answer";
  id: number;
  toolCallId: string;
  text: string;
  via: AnswerVia;
}

export type DaemonToWorker =
  | WorkerStart
  | WorkerInput
  | WorkerTrigger
  | WorkerAnswer
  /** The session's approval policy changed. */
  | { t: "approvals"; policy: ApprovalPolicy }
  | { t: "result"; id: number; ok: true; data: unknown }
  | { t: "result"; id: number; ok: false; error: WireError };

export type WorkerToDaemon =
  | { t: "ready" }
  | { t: "started"; piSessionFile: string | null; model: ModelRef | null }
  /** The step of its start a worker is on (named in the error if the start takes too long). */
  | { t: "stage"; stage: string }
  | { t: "event"; e: SessionEventBody }
  | { t: "res"; id: number; ok: true }
  | { t: "res"; id: number; ok: false; error: WireError }
  | { t: "fatal"; message: string }
  /** A request for the relay from the agent's trigger tools. */
  | { t: "call"; id: number; op: string; data: Record<string, unknown> };

/**
 * Largest WebSocket message the relay accepts on the runner channel, and the
 * runner from the relay, in bytes. A larger one closes the socket with 1009
 * as soon as its frame header arrives (nothing of it is buffered).
 */
export const MAX_WS_MESSAGE_BYTES = 8 * 1024 * 1024;
/** Largest message a viewer may send (inputs carry prompts); 1009 beyond it. */
export const MAX_VIEWER_MESSAGE_BYTES = 1024 * 1024;
/**
 * What a viewer socket without a cookie or key header may receive in all
 * before its `auth` message is accepted; 1009 beyond it.
 */
export const MAX_VIEWER_AUTH_BYTES = 16 * 1024;
/**
 * What a runner socket may receive in all before its hello is accepted; 1009
 * beyond it. The hello lists the runner's sessions (~150 bytes each, so
 * about 1,500 of them) and its roots: a runner that shows its key in the
 * upgrade request's headers (the daemon does) may send a hello up to
 * MAX_WS_MESSAGE_BYTES.
 */
export const MAX_RUNNER_HELLO_BYTES = 256 * 1024;

// ---------------------------------------------------------------------------
// Viewer channel (browser or CLI ↔ relay)

export type ViewerToRelay =
  /** Authenticates a client that has no cookie (must be the first message). */
  | { t: "auth"; apiKey: string }
  /** Streams a session: every event after `since` (0 = from the start), then live. */
  | { t: "subscribe"; sessionId: string; since?: number }
  | { t: "unsubscribe"; sessionId: string }
  | {
    t: "input";
    id?: string;
    sessionId: string;
    kind: InputKind;
    text?: string;
    /** Ids of attachments uploaded into the session. */
    attachments?: string[];
  }
  /**
   * Whether a subscribed session is on this client's screen (page visible,
   * session open); the relay sends no push notification of it meanwhile.
   */
  | { t: "visibility"; sessionId: string; visible: boolean }
  /** Starts the feed of the caller's runners and sessions. */
  | { t: "watch" }
  /** A request to a service of the session's runner (git); see shared/git_api.ts. */
  | ServiceRequestMessage
  | { t: "ping" };

export type RelayToViewer =
  | { t: "hello"; v: number; user: { id: string; email: string; name: string } }
  | { t: "subscribed"; sessionId: string; session: SessionInfo }
  | { t: "events"; sessionId: string; events: SessionEvent[] }
  /** Every stored event up to `seq` has been sent; what follows is live. */
  | { t: "caught_up"; sessionId: string; seq: number }
  /** Drop what you hold of this session: it is replayed again from seq 0. */
  | { t: "reset"; sessionId: string; reason: string }
  | { t: "input_ok"; id?: string; sessionId: string }
  | { t: "runners"; runners: RunnerInfo[] }
  | { t: "sessions"; sessions: SessionInfo[] }
  | { t: "runner"; runner: RunnerInfo }
  | { t: "session"; session: SessionInfo }
  /**
   * The session was deleted (by its owner or by retention): drop it from
   * lists, and close it if open; its subscription has ended.
   */
  | { t: "session_deleted"; sessionId: string }
  | { t: "pong" }
  | ServiceReplyMessage
  | ServicesMessage
  | ErrorMessage;
