/**
 * HTTP and WebSocket clients for tests, talking to the relay as the web UI
 * and the CLI do.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { RegisterRequest, RegisterResponse, SessionEventsResponse } from "../../shared/api.ts";
import type { RelayToViewer, SessionEvent } from "../../shared/protocol.ts";
import { Conditions } from "./wait.ts";

/** A signed-in user of a relay: cookie, API key and helpers. */
export interface User {
  email: string;
  password: string;
  cookie: string;
  apiKey: string;
  /** fetch() against the relay with the API key. */
  api: (path: string, init?: RequestInit) => Promise<Response>;
  /** fetch() against the relay with the session cookie (as the browser does). */
  web: (path: string, init?: RequestInit) => Promise<Response>;
}

/** Sends a JSON request body. */
export function json(
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): RequestInit {
  return {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  };
}

/** Registers (or signs in) an account through `/api/register`, then signs in for a cookie. */
export async function signUp(
  baseUrl: string,
  who: { email?: string; password?: string; name?: string } = {},
): Promise<User> {
  const email = who.email ?? `user-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const password = who.password ?? "correct horse battery";
  const reg = await fetch(
    `${baseUrl}/api/register`,
    json("POST", { email, password, name: who.name ?? "Test User" } satisfies RegisterRequest),
  );
  if (!reg.ok) throw new Error(`register failed: ${reg.status} ${await reg.text()}`);
  const { key }: RegisterResponse = await reg.json();
  const cookie = await signIn(baseUrl, email, password);
  const withHeaders = (extra: Record<string, string>) => (path: string, init: RequestInit = {}) =>
    fetch(`${baseUrl}${path}`, {
      ...init,
      headers: { ...extra, ...(init.headers as Record<string, string> | undefined) },
    });
  return {
    email,
    password,
    cookie,
    apiKey: key,
    api: withHeaders({ "x-api-key": key }),
    web: withHeaders({ cookie }),
  };
}

/** Signs in with email and password; returns the `Cookie` header value. */
export async function signIn(baseUrl: string, email: string, password: string): Promise<string> {
  const res = await fetch(`${baseUrl}/api/auth/sign-in/email`, json("POST", { email, password }));
  if (!res.ok) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`);
  await res.body?.cancel();
  return res.headers.getSetCookie().map((c) => c.split(";")[0]).join("; ");
}

/** A viewer WebSocket that records everything it receives. */
export class Viewer {
  readonly messages: RelayToViewer[] = [];
  /** Events per session, in arrival order. */
  readonly events = new Map<string, SessionEvent[]>();
  readonly #conditions = new Conditions((what) => `viewer: timed out waiting for ${what}`);
  closeEvent: CloseEvent | null = null;
  readonly opened: Promise<void>;
  readonly closed: Promise<CloseEvent>;

  constructor(readonly ws: WebSocket) {
    this.opened = new Promise((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error("viewer socket failed")), { once: true });
    });
    this.closed = new Promise((resolve) => {
      ws.addEventListener("close", (ev) => {
        this.closeEvent = ev;
        this.#conditions.check();
        resolve(ev);
      });
    });
    ws.addEventListener("message", (ev) => {
      const msg = JSON.parse(ev.data as string) as RelayToViewer;
      this.messages.push(msg);
      if (msg.t === "events") {
        const list = this.events.get(msg.sessionId) ?? [];
        list.push(...msg.events);
        this.events.set(msg.sessionId, list);
      } else if (msg.t === "reset") {
        this.events.set(msg.sessionId, []);
      }
      this.#conditions.check();
    });
  }

  /** Opens a viewer socket with an API key header or a cookie. */
  static async connect(
    baseUrl: string,
    auth: { apiKey?: string; cookie?: string; origin?: string },
  ): Promise<Viewer> {
    const headers: Record<string, string> = {};
    if (auth.apiKey) headers["x-api-key"] = auth.apiKey;
    if (auth.cookie) headers.cookie = auth.cookie;
    if (auth.origin) headers.origin = auth.origin;
    // deno-lint-ignore no-explicit-any
    const ws = new (WebSocket as any)(baseUrl.replace(/^http/, "ws") + "/_viewer", { headers });
    const v = new Viewer(ws);
    await v.opened;
    await v.waitFor((m) => m.t === "hello");
    return v;
  }

  send(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }

  subscribe(sessionId: string, since = 0): void {
    this.send({ t: "subscribe", sessionId, since });
  }

  /** The events of a session received so far. */
  eventsOf(sessionId: string): SessionEvent[] {
    return this.events.get(sessionId) ?? [];
  }

  /** Resolves when `pred` holds for the state (checked on every message). */
  until(pred: () => boolean, what = "condition", timeoutMs = 30_000): Promise<void> {
    return this.#conditions.until(pred, what, timeoutMs);
  }

  /** Resolves with the first message (past or future) matching `pred`. */
  async waitFor<T extends RelayToViewer>(
    pred: (m: RelayToViewer) => boolean,
    timeoutMs = 30_000,
  ): Promise<T> {
    await this.until(() => this.messages.some(pred), "a matching message", timeoutMs);
    return this.messages.find(pred) as T;
  }

  /** Resolves once an event of `type` arrived for the session; returns it. */
  async waitForEvent(sessionId: string, type: string, timeoutMs = 30_000): Promise<SessionEvent> {
    await this.until(
      () => this.eventsOf(sessionId).some((e) => e.e.type === type),
      `event ${type}`,
      timeoutMs,
    );
    return this.eventsOf(sessionId).find((e) => e.e.type === type)!;
  }

  close(): Promise<CloseEvent> {
    if (this.ws.readyState < WebSocket.CLOSING) this.ws.close();
    return this.closed;
  }
}

/**
 * A session's whole stored log through `GET /api/sessions/{id}/events`,
 * following `next` from page to page until `hasMore` is false.
 */
export async function storedEvents(
  user: User,
  sessionId: string,
  options: { since?: number; limit?: number } = {},
): Promise<SessionEvent[]> {
  const all: SessionEvent[] = [];
  let since = options.since ?? 0;
  while (true) {
    const res = await user.api(
      `/api/sessions/${sessionId}/events?since=${since}&limit=${options.limit ?? 5000}`,
    );
    const text = await res.text();
    assert.equal(res.status, 200, text.slice(0, 300));
    const page = JSON.parse(text) as SessionEventsResponse;
    assert.equal(page.t, "events");
    assert.equal(page.sessionId, sessionId);
    all.push(...page.events);
    if (!page.hasMore) return all;
    assert.ok(page.next > since, `next ${page.next} moves past since ${since}`);
    since = page.next;
  }
}

/** Asserts a list of events has seqs 1..n with no gap and no duplicate. */
export function assertContiguous(events: SessionEvent[], from = 1): void {
  events.forEach((e, i) => {
    if (e.seq !== from + i) {
      throw new Error(
        `events are not contiguous at index ${i}: seq ${e.seq}, expected ${from + i} (seqs: ${
          events.map((x) => x.seq).join(",")
        })`,
      );
    }
  });
}

/** Reads a JSON error response, checks its shape and status, and returns its code. */
export async function errorCode(res: Response, status: number, what = ""): Promise<string> {
  const text = await res.text();
  assert.equal(res.status, status, `${what}: ${text}`);
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/, what);
  const body = JSON.parse(text);
  assert.deepEqual(Object.keys(body), ["error"], `${what}: ${text}`);
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "message"], `${what}: ${text}`);
  assert.equal(typeof body.error.code, "string", what);
  assert.equal(typeof body.error.message, "string", what);
  assert.ok(body.error.message.length > 0, what);
  return body.error.code;
}
