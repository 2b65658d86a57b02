/**
 * A webhook's replay protection: which signatures it refuses, and what a
 * GitHub body is remembered under (GitHub signs the body only).
 *
 * @module
 */
import { RelayError } from "./errors.ts";
import type { WebhookRecord } from "./store/mod.ts";

/**
 * With `requireReplayProtection`, refuses legacy (body-only) signatures and GitHub's without a
 * delivery id; for a GitHub delivery, the key its body is remembered under; else null.
 */
export function replayKey(
  w: WebhookRecord,
  v: { mode: string; deliveryId?: string },
  headers: Headers,
): string | null {
  if (!w.requireReplayProtection) return null;
  if (v.mode === "legacy") {
    throw new RelayError(
      "unauthorized",
      "replay_protection_required",
      "This webhook does not take legacy signatures (they can be replayed): sign with " +
        "X-Webhook-Timestamp and X-Webhook-Nonce, or turn off its replay protection",
    );
  }
  if (v.mode !== "github") return null;
  if (!v.deliveryId) {
    throw new RelayError(
      "unauthorized",
      "replay_protection_required",
      "This webhook takes GitHub deliveries only with X-GitHub-Delivery",
    );
  }
  return `github:${headers.get("x-hub-signature-256")!.toLowerCase()}`;
}
