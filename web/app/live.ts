/**
 * The viewer socket: one WebSocket per tab that carries the runner and
 * session feed and the streams of the sessions on screen. It reconnects by
 * itself and resubscribes each stream from the last seq it holds, so a lost
 * network or a sleeping phone costs no event and repeats none.
 *
 * @module
 */
import { signal } from "@preact/signals";
import {
  CloseCode,
  type InputKind,
  type RelayToViewer,
  type RunnerInfo,
  type SessionEvent,
  type SessionInfo,
} from "../../shared/protocol.ts";
import { servicesChanged } from "./runner_services.ts";

/** What a subscriber of a session stream receives. */
export interface StreamHandler {
  /** The highest seq held (sent as `since` on every (re)subscribe). */
  since(): number;
  events(events: SessionEvent[]): void;
  reset(): void;
  caughtUp(seq: number): void;
  info(session: SessionInfo): void;
  error(code: string, message: string): void;
}

/** Callbacks for the feed of runners and sessions. */
export interface FeedHandler {
  runners(list: RunnerInfo[]): void;
  runner(r: RunnerInfo): void;
  sessions(list: SessionInfo[]): void;
  session(s: SessionInfo): void;
  /** A session was deleted (here or anywhere else): it is gone for good. */
  sessionDeleted(sessionId: string): void;
  /** The socket was closed because the sign-in ended (sign-out, revoked). */
  signedOut(): void;
}

type Pending = { resolve: () => void; reject: (e: Error) => void };

/** A service (git) request that failed, with the runner's or relay's code. */
export class ServiceError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = "ServiceError";
  }
}

type ServiceMsg = Extract<RelayToViewer, { t: "service_message" }>;
interface PendingService {
  resolve: (data: unknown) => void;
  reject: (e: Error) => void;
  progress?: (data: unknown) => void;
}

/** Connection state shown in the UI. */
export const linkState = signal<"connecting" | "open" | "offline">("connecting");

export class LiveLink {
  #ws: WebSocket | null = null;
  #streams = new Map<string, StreamHandler>();
  #pending = new Map<string, Pending>();
  #services = new Map<string, PendingService>();
  /** Listeners of a session's unsolicited service messages (git's `status_changed`). */
  readonly serviceListeners = new Map<string, Set<(msg: ServiceMsg) => void>>();
  #nextId = 1;
  #retry = 0;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #heartbeat: ReturnType<typeof setInterval> | null = null;
  #lastHeard = 0;
  #closed = false;
  /** The session this tab shows on a visible page (see setOnScreen). */
  #onScreen: string | null = null;

  constructor(readonly feed: FeedHandler) {
    addEventListener("online", () => this.#reconnectNow());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.#reconnectNow();
    });
  }

  connect(): void {
    this.#closed = false;
    if (this.#ws && this.#ws.readyState <= WebSocket.OPEN) return;
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/_viewer`;
    linkState.value = "connecting";
    const ws = new WebSocket(url);
    this.#ws = ws;
    ws.onopen = () => {
      this.#retry = 0;
      this.#lastHeard = Date.now();
    };
    ws.onmessage = (ev) => {
      this.#lastHeard = Date.now();
      let msg: RelayToViewer;
      try {
        msg = JSON.parse(ev.data as string);
      } catch {
        return;
      }
      this.#handle(msg);
    };
    ws.onclose = (ev) => {
      if (this.#ws !== ws) return;
      this.#ws = null;
      if (this.#heartbeat) clearInterval(this.#heartbeat);
      for (const p of this.#pending.values()) p.reject(new Error("Connection lost; try again"));
      this.#pending.clear();
      for (const p of this.#services.values()) p.reject(new Error("Connection lost; try again"));
      this.#services.clear();
      if (ev.code === CloseCode.revoked || ev.code === CloseCode.unauthorized) {
        linkState.value = "offline";
        this.feed.signedOut();
        return;
      }
      if (this.#closed) return;
      linkState.value = "offline";
      const wait = Math.min(10_000, 500 * 2 ** this.#retry++) * (0.5 + Math.random() / 2);
      this.#timer = setTimeout(() => this.connect(), wait);
    };
  }

  /** Closes the socket for good and forgets every stream (sign-out). */
  close(): void {
    this.#closed = true;
    this.#streams.clear();
    if (this.#timer) clearTimeout(this.#timer);
    this.#ws?.close();
  }

  #reconnectNow(): void {
    if (this.#closed || this.#ws) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#retry = 0;
    this.connect();
  }

  #send(msg: unknown): boolean {
    if (this.#ws?.readyState !== WebSocket.OPEN) return false;
    this.#ws.send(JSON.stringify(msg));
    return true;
  }

  #handle(msg: RelayToViewer): void {
    switch (msg.t) {
      case "hello":
        linkState.value = "open";
        this.#send({ t: "watch" });
        for (const [sessionId, h] of this.#streams) {
          this.#send({ t: "subscribe", sessionId, since: h.since() });
        }
        if (this.#heartbeat) clearInterval(this.#heartbeat);
        this.#heartbeat = setInterval(() => {
          // A phone that slept or changed networks may hold a dead socket.
          if (Date.now() - this.#lastHeard > 45_000) this.#ws?.close();
          else this.#send({ t: "ping" });
        }, 20_000);
        return;
      case "runners":
        return this.feed.runners(msg.runners);
      case "runner":
        return this.feed.runner(msg.runner);
      case "sessions":
        return this.feed.sessions(msg.sessions);
      case "session":
        return this.feed.session(msg.session);
      case "session_deleted":
        // The relay ended the subscription: do not ask for it again on a reconnect.
        this.#streams.delete(msg.sessionId);
        return this.feed.sessionDeleted(msg.sessionId);
      case "subscribed":
        // A new socket's subscription starts out "not on screen".
        if (msg.sessionId === this.#onScreen) {
          this.#send({ t: "visibility", sessionId: msg.sessionId, visible: true });
        }
        return this.#streams.get(msg.sessionId)?.info(msg.session);
      case "events":
        return this.#streams.get(msg.sessionId)?.events(msg.events);
      case "caught_up":
        return this.#streams.get(msg.sessionId)?.caughtUp(msg.seq);
      case "reset":
        return this.#streams.get(msg.sessionId)?.reset();
      case "input_ok": {
        const p = msg.id ? this.#pending.get(msg.id) : undefined;
        if (p && msg.id) {
          this.#pending.delete(msg.id);
          p.resolve();
        }
        return;
      }
      case "service_message":
        return this.#service(msg);
      case "services":
        return servicesChanged(msg);
      case "error": {
        const id = typeof msg.id === "string" ? msg.id : undefined;
        const p = id ? this.#pending.get(id) : undefined;
        if (p && id) {
          this.#pending.delete(id);
          p.reject(new Error(msg.message));
        } else if (msg.sessionId) {
          this.#streams.get(msg.sessionId)?.error(msg.code, msg.message);
        }
        return;
      }
    }
  }

  #service(msg: ServiceMsg): void {
    const p = msg.requestId ? this.#services.get(msg.requestId) : undefined;
    if (!("ok" in msg)) {
      if (p) p.progress?.(msg.data);
      else for (const l of this.serviceListeners.get(msg.sessionId) ?? []) l(msg);
      return;
    }
    if (!p || !msg.requestId) return;
    this.#services.delete(msg.requestId);
    if (msg.ok) p.resolve(msg.data);
    else p.reject(new ServiceError(msg.code, msg.message));
  }

  /**
   * Asks a service of a session's runner (`git`); resolves with its answer,
   * rejects with a {@linkcode ServiceError}. `progress` gets what arrives meanwhile.
   */
  service<T>(
    sessionId: string,
    op: string,
    data: Record<string, unknown> = {},
    progress?: (data: unknown) => void,
    serviceId = "git",
  ): Promise<T> {
    const requestId = `sv${this.#nextId++}`;
    return new Promise((resolve, reject) => {
      if (!this.#send({ t: "service_message", serviceId, requestId, sessionId, op, data })) {
        reject(new Error("Not connected to the relay; try again in a moment"));
        return;
      }
      this.#services.set(requestId, {
        resolve: resolve as (d: unknown) => void,
        reject,
        ...(progress ? { progress } : {}),
      });
    });
  }

  /** Streams a session to `handler` until {@linkcode unsubscribe}. */
  subscribe(sessionId: string, handler: StreamHandler): void {
    this.#streams.set(sessionId, handler);
    this.#send({ t: "subscribe", sessionId, since: handler.since() });
  }

  /**
   * Tells the relay which subscribed session this tab has on screen (page
   * visible, session open), or none: no push notification of it is sent
   * meanwhile (docs/push.md).
   */
  setOnScreen(sessionId: string | null): void {
    const before = this.#onScreen;
    if (before === sessionId) return;
    this.#onScreen = sessionId;
    if (before && this.#streams.has(before)) {
      this.#send({ t: "visibility", sessionId: before, visible: false });
    }
    if (sessionId && this.#streams.has(sessionId)) {
      this.#send({ t: "visibility", sessionId, visible: true });
    }
  }

  unsubscribe(sessionId: string): void {
    this.#streams.delete(sessionId);
    this.#send({ t: "unsubscribe", sessionId });
  }

  /** Sends input into a session; resolves once the runner took it. */
  input(sessionId: string, kind: InputKind, text = "", attachments: string[] = []): Promise<void> {
    const id = `in${this.#nextId++}`;
    return new Promise((resolve, reject) => {
      const msg = { t: "input" as const, id, sessionId, kind, text };
      if (!this.#send(attachments.length ? { ...msg, attachments } : msg)) {
        reject(new Error("Not connected to the relay; try again in a moment"));
        return;
      }
      this.#pending.set(id, { resolve, reject });
    });
  }
}
