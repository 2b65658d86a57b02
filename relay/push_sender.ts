/**
 * Delivers one push message (RFC 8030) to a browser's push service: the
 * payload encrypted for the browser (RFC 8291, aes128gcm) and signed with
 * the relay's VAPID key (RFC 8292), both by npm:web-push, which is imported
 * on the first send (an idle relay does not carry it). The request goes out
 * through fetch with a time limit, no redirects, and the endpoint's checks
 * (push_endpoint.ts) made again just before.
 *
 * @module
 */
import type { VapidKeys } from "./push_keys.ts";
import { type ResolveHost, resolveHost, sendProblem } from "./push_endpoint.ts";

/** How a push service received a message. */
export type SendOutcome =
  /** Accepted (2xx). */
  | { ok: true; status: number }
  /** The subscription is gone (404 or 410): forget it. */
  | { ok: false; gone: true; status: number }
  /** Anything else: refused, unreachable, too slow, or an endpoint the relay will not call. */
  | { ok: false; gone: false; status: number | null; reason: string };

/** RFC 8030 delivery options of one message. */
export interface PushDelivery {
  /** Seconds the push service keeps it for an offline browser. */
  ttl: number;
  urgency: "very-low" | "low" | "normal" | "high";
  /** A newer message with the same topic replaces an undelivered older one (≤ 32 base64url chars). */
  topic: string;
}

/** A subscription as the sender needs it. */
export interface PushTarget {
  endpoint: string;
  p256dh: string;
  auth: string;
}

/** Options of {@linkcode PushSender}. */
export interface PushSenderOptions {
  keys: VapidKeys;
  /** Origins exempt from the endpoint checks (`BATON_PUSH_ALLOW_ORIGINS`). */
  allowedOrigins?: ReadonlySet<string>;
  /** Time limit of one request, connection included (default 10 s). */
  timeoutMs?: number;
  fetch?: typeof fetch;
  resolve?: ResolveHost;
}

type WebPush = typeof import("web-push");

/** Sends encrypted, VAPID-signed push messages. */
export class PushSender {
  readonly #opts: PushSenderOptions;
  readonly #allowed: ReadonlySet<string>;
  #lib: Promise<WebPush> | null = null;

  constructor(options: PushSenderOptions) {
    this.#opts = options;
    this.#allowed = options.allowedOrigins ?? new Set();
  }

  async send(target: PushTarget, payload: string, delivery: PushDelivery): Promise<SendOutcome> {
    const timeoutMs = this.#opts.timeoutMs ?? 10_000;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const problem = await sendProblem(
        target.endpoint,
        this.#allowed,
        this.#opts.resolve ?? resolveHost,
        signal,
      );
      if (problem) {
        return { ok: false, gone: false, status: null, reason: `Endpoint is ${problem}` };
      }
      const lib = await (this.#lib ??= import("web-push").then((m) => m.default as WebPush));
      const { keys } = this.#opts;
      const details = lib.generateRequestDetails(
        { endpoint: target.endpoint, keys: { p256dh: target.p256dh, auth: target.auth } },
        payload,
        {
          vapidDetails: {
            subject: keys.subject,
            publicKey: keys.publicKey,
            privateKey: keys.privateKey,
          },
          TTL: delivery.ttl,
          urgency: delivery.urgency,
          topic: delivery.topic,
        },
      );
      const headers = new Headers();
      for (const [k, v] of Object.entries(details.headers)) {
        if (k.toLowerCase() !== "content-length") headers.set(k, String(v));
      }
      const res = await (this.#opts.fetch ?? fetch)(details.endpoint, {
        method: details.method,
        headers,
        body: details.body as Uint8Array<ArrayBuffer>,
        redirect: "manual",
        signal,
      });
      // The answer's body is not needed; a push service streaming one forever is cut here.
      await res.body?.cancel().catch(() => {});
      if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status };
      if (res.status === 404 || res.status === 410) {
        return { ok: false, gone: true, status: res.status };
      }
      return {
        ok: false,
        gone: false,
        status: res.status,
        reason: `Push service answered ${res.status}`,
      };
    } catch (err) {
      const reason = signal.aborted
        ? `No answer within ${timeoutMs} ms`
        : `Sending failed: ${(err as Error)?.message ?? err}`;
      return { ok: false, gone: false, status: null, reason };
    }
  }
}
