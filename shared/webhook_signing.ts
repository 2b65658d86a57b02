import { timingSafeEqual } from "node:crypto";
import { concatBytes } from "./bytes.ts";

/** How far a signed timestamp may be from the relay's clock. */
export const MAX_SKEW_MS = 5 * 60_000;

/** Which signing scheme a request used. */
export type SigningMode = "enhanced" | "legacy" | "github" | "standard";

/** The outcome of checking a webhook request's signature. */
export type Verification =
  | {
    ok: true;
    mode: SigningMode;
    /** Replay key: the enhanced mode's nonce (5-minute window). */
    nonce?: string;
    /** When the sender signed (the timestamped schemes), in ms since the epoch. */
    signedAt?: number;
    /** Delivery id to deduplicate (GitHub's X-GitHub-Delivery, Standard Webhooks' webhook-id). */
    deliveryId?: string;
  }
  | { ok: false; message: string };

const encoder = new TextEncoder();

async function hmac(secret: string, data: Uint8Array): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, data as BufferSource));
}

function fromHex(hex: string): Uint8Array | null {
  if (!/^[0-9a-fA-F]*$/.test(hex) || hex.length % 2) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

function fromBase64(b64: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** Constant-time comparison (lengths are not secret: a length mismatch is just false). */
export function sameBytes(a: Uint8Array | null, b: Uint8Array): boolean {
  return a !== null && a.length === b.length && timingSafeEqual(a, b);
}

/** Hex HMAC-SHA256, the form of `X-Webhook-Signature`. */
export async function signHex(secret: string, data: Uint8Array): Promise<string> {
  return Array.from(await hmac(secret, data), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The string signed in enhanced mode: `<timestamp>.<nonce>.<raw body>`. */
export function enhancedPayload(timestamp: string, nonce: string, body: Uint8Array): Uint8Array {
  return concatBytes(encoder.encode(`${timestamp}.${nonce}.`), body);
}

const fail = (message: string): Verification => ({ ok: false, message });

/**
 * Checks a webhook request signed with `secret`, in whichever scheme its
 * headers announce: baton's enhanced or legacy `X-Webhook-Signature`,
 * GitHub's `X-Hub-Signature-256`, or Standard Webhooks' `webhook-signature`.
 * Every comparison is constant-time.
 */
export async function verifyWebhook(
  secret: string,
  headers: Headers,
  body: Uint8Array,
  now = Date.now(),
): Promise<Verification> {
  const standard = headers.get("webhook-signature");
  if (standard !== null) {
    const id = headers.get("webhook-id");
    const ts = headers.get("webhook-timestamp");
    if (!id || !ts) {
      return fail("webhook-id and webhook-timestamp are required with webhook-signature");
    }
    if (!/^\d{1,12}$/.test(ts)) return fail("webhook-timestamp must be Unix seconds");
    if (Math.abs(now - Number(ts) * 1000) > MAX_SKEW_MS) {
      return fail("webhook-timestamp is more than 5 minutes from the relay's clock");
    }
    const expected = await hmac(secret, concatBytes(encoder.encode(`${id}.${ts}.`), body));
    // Several space-separated signatures may be sent (key rotation); any v1 match counts.
    const match = standard.split(" ").some((part) => {
      const [version, sig] = part.split(",", 2);
      return version === "v1" && sig !== undefined && sameBytes(fromBase64(sig), expected);
    });
    return match ? { ok: true, mode: "standard", deliveryId: id } : fail("Signature mismatch");
  }

  const github = headers.get("x-hub-signature-256");
  if (github !== null) {
    const m = github.match(/^sha256=([0-9a-fA-F]{64})$/);
    if (!m) return fail("X-Hub-Signature-256 must be 'sha256=<hex>'");
    const ok = sameBytes(fromHex(m[1]!), await hmac(secret, body));
    if (!ok) return fail("Signature mismatch");
    const delivery = headers.get("x-github-delivery");
    return delivery
      ? { ok: true, mode: "github", deliveryId: delivery }
      : { ok: true, mode: "github" };
  }

  const sig = headers.get("x-webhook-signature");
  if (sig === null) return fail("Missing signature header (X-Webhook-Signature)");
  const given = fromHex(sig.trim().replace(/^sha256=/, ""));
  const ts = headers.get("x-webhook-timestamp");
  const nonce = headers.get("x-webhook-nonce");
  if (ts === null && nonce === null) {
    // Legacy mode: the raw body only, no replay protection.
    return sameBytes(given, await hmac(secret, body))
      ? { ok: true, mode: "legacy" }
      : fail("Signature mismatch");
  }
  if (ts === null) return fail("Enhanced signing needs X-Webhook-Timestamp");
  if (nonce === null || nonce === "") return fail("Enhanced signing needs X-Webhook-Nonce");
  if (nonce.length > 200) return fail("X-Webhook-Nonce is too long");
  const at = Date.parse(ts);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(ts) || isNaN(at)) {
    return fail("X-Webhook-Timestamp must be an ISO 8601 / RFC 3339 date-time");
  }
  if (Math.abs(now - at) > MAX_SKEW_MS) {
    return fail("X-Webhook-Timestamp is more than 5 minutes from the relay's clock");
  }
  return sameBytes(given, await hmac(secret, enhancedPayload(ts, nonce, body)))
    ? { ok: true, mode: "enhanced", nonce, signedAt: at }
    : fail("Signature mismatch");
}
