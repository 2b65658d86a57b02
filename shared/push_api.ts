/**
 * Wire types of push notifications (`/api/push/*`) and of the payload the
 * relay sends to a browser's service worker. Plain types only; the web
 * client and its service worker import them.
 *
 * @module
 */

/** The notification kinds a subscription may pick (`enabledEvents`). */
export const PUSH_KINDS = ["agent_finished", "agent_needs_input", "agent_error"] as const;
/** One of {@linkcode PUSH_KINDS}. */
export type PushKind = typeof PUSH_KINDS[number];

/** Subscriptions one account may hold (one per browser and device). */
export const MAX_PUSH_SUBSCRIPTIONS_PER_USER = 20;

/** `GET /api/push/vapid-public-key`: the relay's application server key (base64url, 65 bytes). */
export interface VapidPublicKeyResponse {
  publicKey: string;
}

/** `POST /api/push/subscribe`: a browser's `PushSubscription.toJSON()`, plus the kinds wanted. */
export interface PushSubscribeRequest {
  endpoint: string;
  keys: { p256dh: string; auth: string };
  /** Comma-separated kinds, or `*` (the default) for all. */
  enabledEvents?: string;
}

export interface PushSubscribeResponse {
  ok: true;
  id: string;
}

/** `POST /api/push/unsubscribe`. */
export interface PushUnsubscribeRequest {
  endpoint: string;
}

/** One subscription as listed (its keys stay on the relay). */
export interface PushSubscriptionInfo {
  id: string;
  endpoint: string;
  createdAt: string;
  enabledEvents: string;
  suppressChildNotifications: boolean;
}

/** `GET /api/push/subscriptions`. */
export interface PushSubscriptionsResponse {
  subscriptions: PushSubscriptionInfo[];
}

/** `PUT /api/push/events`. */
export interface PushEventsRequest {
  endpoint: string;
  enabledEvents: string;
}

/** `PUT /api/push/child-notifications`. */
export interface PushChildNotificationsRequest {
  endpoint: string;
  suppress: boolean;
}

/** `{ok: true}`: the answer of unsubscribe, events and child-notifications. */
export interface PushOkResponse {
  ok: true;
}

/** What the service worker receives (the decrypted push message's JSON). */
export interface PushPayload {
  kind: PushKind;
  sessionId: string;
  /** Notification title, e.g. "baton: fix the tests". */
  title: string;
  /** Notification text, as the spec's patterns ("agent in {session} finished its task"). */
  body: string;
  /** Path to open on tap (`/session/<sessionId>`). */
  url: string;
  /** Notifications with the same tag replace each other (one per session). */
  tag: string;
  /** When the relay sent it (ms since the epoch). */
  ts: number;
  /** `agent_needs_input`: the tool call that waits (the answer names it). */
  toolCallId?: string;
  /**
   * `agent_needs_input` only: the question `toolCallId` no longer waits (it
   * was answered in a session view, or the agent was stopped). The service
   * worker quietly replaces that question's notification, if still shown.
   */
  resolved?: "answered" | "cancelled";
  /**
   * `agent_needs_input` in collab mode: the notification's buttons (rule 3),
   * each posting its `answer` to `/api/push/answer`, and an inline reply.
   */
  actions?: PushAction[];
}

/** A notification button (or, `type: "text"`, an inline reply) of an `agent_needs_input`. */
export interface PushAction {
  action: string;
  title: string;
  /** The text a tap on the button answers. */
  answer?: string;
  type?: "text";
  placeholder?: string;
}
