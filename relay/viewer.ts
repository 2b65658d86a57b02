import { FORBIDDEN_SCOPE, isUnrestricted } from "./scopes.ts";
import {
  CloseCode,
  INPUT_KINDS,
  type InputKind,
  MAX_VIEWER_MESSAGE_BYTES,
  PROTOCOL_VERSION,
  type RelayToViewer,
  type RunnerInfo,
  type SessionInfo,
} from "../shared/protocol.ts";
import { parseMessage, shown } from "./_message.ts";
import type { Principal } from "./auth.ts";
import { invalid, RelayError } from "./errors.ts";
import { inputAttachments, type InputOptions } from "./input_attachments.ts";
import type { FanoutViewer, Subscription } from "./fanout.ts";
import type { ChannelSocket } from "./ws_transport.ts";
import { InOrder } from "./_in_order.ts";
/**
 * Unread bytes past which a viewer is closed (4429) instead of sent another
 * reply or notice. Event frames never get here (the hub stops sending them
 * at the viewer's high water); this bounds what a client that sends requests
 * and never reads the answers can make the relay hold.
 */
export const VIEWER_MAX_UNREAD = 8 * 1024 * 1024;

/** One browser tab or CLI client connected to the viewer socket. */
export class Viewer implements FanoutViewer {
  readonly subs = new Map<string, Subscription>();
  watching = false;
  closed = false;

  constructor(
    readonly socket: ChannelSocket,
    /** Replaced only when its browser session is carried over to a new one. */
    public principal: Principal,
    /** Called once when the relay gives up on this viewer (see VIEWER_MAX_UNREAD). */
    readonly onDropped: (v: Viewer) => void = () => {},
  ) {}

  get bufferedAmount(): number {
    return this.socket.bufferedAmount;
  }

  /** Sends a reply or notice; closes the socket instead when too much is unread. */
  send(msg: RelayToViewer): void {
    if (!this.closed && this.socket.bufferedAmount > VIEWER_MAX_UNREAD) {
      this.closed = true;
      this.close(CloseCode.tooSlow, "Too slow: more than 8 MB unread");
      this.onDropped(this);
      return;
    }
    this.sendRaw(JSON.stringify(msg));
  }

  sendRaw(frame: string): void {
    if (this.closed || this.socket.readyState !== WebSocket.OPEN) return;
    this.socket.send(frame);
  }

  close(code: number, reason: string): void {
    try {
      this.socket.close(code, reason);
    } catch {
      // Already closing.
    }
  }
}

/** What a viewer socket needs of the relay (the hub). */
export interface ViewerHub {
  addViewer(v: Viewer): void;
  removeViewer(v: Viewer): void;
  /** Subscribes from `since`; rejects with a RelayError (404) for a foreign or unknown session. */
  subscribe(v: Viewer, sessionId: string, since: number): Promise<Subscription>;
  unsubscribe(sub: Subscription): void;
  /** A subscription's `visible` changed (no push while a session is on a screen). */
  screenChanged(v: Viewer, sessionId: string): void;
  input(
    userId: string,
    sessionId: string,
    kind: InputKind,
    text: string,
    options?: InputOptions,
  ): Promise<void>;
  /** A `service_message` request (git), answered to this viewer alone; resolves once sent on. */
  serviceFromViewer(v: Viewer, msg: Record<string, unknown>): Promise<void>;
  listRunners(userId: string): Promise<RunnerInfo[]>;
  listSessions(userId: string): Promise<SessionInfo[]>;
  log(line: string): void;
}

/** Options of {@linkcode acceptViewerSocket}. */
export interface AcceptViewerOptions {
  hub: ViewerHub;
  /** The principal from the upgrade request's cookie or key headers, if any. */
  principal: Principal | null;
  /** Resolves a key sent in an `auth` message (clients that cannot set headers). */
  principalFromKey: (key: string) => Promise<Principal | null>;
  /**
   * Whether the principal's session or key still holds when the socket opens
   * (a sign-out or a revocation may have finished since the upgrade).
   */
  principalLive: (p: Principal) => Promise<boolean>;
  /** Called once the socket has a principal (lifts the transport's first-message limit). */
  authenticated?: () => void;
  /** How long a socket without a principal may take to send its auth; default 10 s. */
  authTimeoutMs?: number;
}

/** Why a read-only key, a key bound to a runner or a runner token cannot open a viewer. */
export const VIEWER_SCOPE_MESSAGE =
  "The viewer channel needs a browser session or a full API key (this key's scope is narrower)";

/**
 * Drives one viewer socket: authentication, subscriptions, input and the
 * feed. Its messages are handled in the order they came: an `unsubscribe` or
 * `visibility` after a `subscribe` waits for the subscription (InOrder).
 */
export function acceptViewerSocket(socket: ChannelSocket, options: AcceptViewerOptions): void {
  const { hub } = options;
  let viewer: Viewer | null = null;
  // Messages waiting for a slow store hold the socket's reading, not the relay's memory.
  const inOrder = new InOrder((err) => hub.log(`viewer message failed: ${err}`), {
    pause: () => socket.pause?.(),
    resume: () => socket.resume?.(),
  });
  let authTimer: ReturnType<typeof setTimeout> | undefined;

  function start(principal: Principal): void {
    clearTimeout(authTimer);
    options.authenticated?.();
    viewer = new Viewer(socket, principal, (v) => hub.removeViewer(v));
    hub.addViewer(viewer);
    viewer.send({
      t: "hello",
      v: PROTOCOL_VERSION,
      user: { id: principal.userId, email: principal.email, name: principal.name },
    });
  }

  // The socket is open: the transport hands it over after the handshake.
  // Messages that arrive while the principal is checked wait for the check, in
  // order: the check is the queue's first task, so they count against its cap.
  let checking: Promise<void> | null = null;
  if (options.principal) {
    const p = options.principal;
    checking = options.principalLive(p).then((live) => {
      checking = null;
      if (socket.readyState !== WebSocket.OPEN) return;
      if (live) start(p);
      else socket.close(CloseCode.revoked, "Signed out or key revoked");
    }, () => {
      checking = null;
      socket.close(CloseCode.internalError, "Authentication failed");
    });
    const check = checking;
    inOrder.run(() => check);
  } else {
    authTimer = setTimeout(() => {
      if (!viewer) socket.close(CloseCode.unauthorized, "Not authenticated");
    }, options.authTimeoutMs ?? 10_000);
  }

  let authenticating = false;
  socket.onmessage = function onMessage(ev) {
    if (checking) {
      const size = typeof ev.data === "string" ? ev.data.length : 0;
      inOrder.run(() => {
        if (socket.readyState === WebSocket.OPEN) onMessage(ev);
      }, size);
      return;
    }
    if (
      typeof ev.data !== "string" ||
      ev.data.length > MAX_VIEWER_MESSAGE_BYTES
    ) {
      socket.close(CloseCode.tooBig, "Message too big or binary");
      return;
    }
    const parsed = parseMessage(ev.data);
    if (!parsed.ok) {
      sendError(socket, parsed.code, parsed.message);
      return;
    }
    const msg = parsed.msg;
    if (!viewer) {
      if (authenticating) return;
      if (msg.t !== "auth" || typeof msg.apiKey !== "string") {
        sendError(socket, "unauthorized", "Authenticate first: {t:'auth', apiKey}");
        socket.close(CloseCode.unauthorized, "Not authenticated");
        return;
      }
      authenticating = true;
      options.principalFromKey(msg.apiKey).then((p) => {
        authenticating = false;
        if (socket.readyState !== WebSocket.OPEN) return;
        if (!p) {
          sendError(socket, "unauthorized", "Invalid or revoked API key");
          socket.close(CloseCode.unauthorized, "Invalid API key");
          return;
        }
        if (!isUnrestricted(p)) {
          sendError(socket, FORBIDDEN_SCOPE, VIEWER_SCOPE_MESSAGE);
          socket.close(CloseCode.forbidden, "Key scope too narrow");
          return;
        }
        start(p);
      }, () => socket.close(CloseCode.internalError, "Authentication failed"));
      return;
    }
    const v = viewer;
    inOrder.run(() => v.closed ? undefined : handle(hub, v, msg), ev.data.length);
  };

  socket.onclose = () => {
    clearTimeout(authTimer);
    if (viewer) {
      viewer.closed = true;
      hub.removeViewer(viewer);
    }
  };
  socket.onerror = () => {};
}

function sendError(socket: ChannelSocket, code: string, message: string): void {
  if (socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify({ t: "error", code, message }));
  }
}

/**
 * The error frame for what a viewer's message failed with: a RelayError's
 * code and message, anything else `internal` (and logged). The one place
 * the viewer socket turns errors into frames.
 */
function errorFrame(
  hub: ViewerHub,
  err: unknown,
): { code: string; message: string } {
  if (err instanceof RelayError) return { code: err.code, message: err.message };
  hub.log(`viewer message failed: ${err}`);
  return { code: "internal", message: "Internal error" };
}

/** One message of an authenticated viewer; a promise when the next one must wait for it. */
function handle(
  hub: ViewerHub,
  v: Viewer,
  msg: Record<string, unknown>,
): void | Promise<void> {
  const sessionId = typeof msg.sessionId === "string" ? msg.sessionId : undefined;
  const fail = (err: unknown, id?: string) => {
    v.send({
      t: "error",
      ...errorFrame(hub, err),
      ...(id !== undefined ? { id } : {}),
      ...(sessionId !== undefined ? { sessionId } : {}),
    });
  };
  try {
    switch (msg.t) {
      case "subscribe": {
        if (!sessionId) throw invalid("sessionId is required");
        const since = msg.since ?? 0;
        if (typeof since !== "number" || !Number.isSafeInteger(since) || since < 0) {
          throw invalid("since must be a non-negative integer");
        }
        return hub.subscribe(v, sessionId, since).then(() => {}, (err) => fail(err));
      }
      case "unsubscribe": {
        const sub = sessionId ? v.subs.get(sessionId) : undefined;
        if (sub) hub.unsubscribe(sub);
        return;
      }
      case "input": {
        const id = typeof msg.id === "string" ? msg.id.slice(0, 100) : undefined;
        if (!sessionId) return fail(invalid("sessionId is required"), id);
        const kind = msg.kind as InputKind;
        if (!INPUT_KINDS.includes(kind)) {
          return fail(invalid(`kind must be one of: ${INPUT_KINDS.join(", ")}`), id);
        }
        const text = typeof msg.text === "string" ? msg.text : "";
        const attachments = inputAttachments(msg.attachments);
        if (attachments === null) {
          return fail(invalid("attachments must be a list of at most 10 attachment ids"), id);
        }
        hub.input(v.principal.userId, sessionId, kind, text, { attachments }).then(
          () => v.send({ t: "input_ok", sessionId, ...(id !== undefined ? { id } : {}) }),
          (err) => fail(err, id),
        );
        return;
      }
      case "visibility": {
        // The session is (not) on this viewer's screen: pushes wait while it is.
        if (!sessionId) throw invalid("sessionId is required");
        if (typeof msg.visible !== "boolean") throw invalid("visible must be a boolean");
        const sub = v.subs.get(sessionId);
        if (!sub) throw invalid("Subscribe to the session first", "not_subscribed");
        sub.visible = msg.visible;
        hub.screenChanged(v, sessionId);
        return;
      }
      case "watch":
        return watch(hub, v).catch((err) => fail(err));
      case "service_message":
        return hub.serviceFromViewer(v, msg);
      case "ping":
        v.send({ t: "pong" });
        return;
      case "auth":
        return;
      default:
        throw invalid(`Unknown message type: '${shown(msg.t)}'`, "unknown_type");
    }
  } catch (err) {
    fail(err);
  }
}

/**
 * `watch`: the lists as they are, and the feed from now on. The feed starts
 * before the lists are read, so no change falls between them (one that
 * comes before a list says the same again).
 */
async function watch(hub: ViewerHub, v: Viewer): Promise<void> {
  v.watching = true;
  const userId = v.principal.userId;
  const [runners, sessions] = await Promise.all([
    hub.listRunners(userId),
    hub.listSessions(userId),
  ]);
  v.send({ t: "runners", runners });
  v.send({ t: "sessions", sessions });
}
