/**
 * A webhook as the relay lists it, the form's draft of one and the body the
 * API takes back, and a shell script that fires it.
 *
 * @module
 */
import type { CreateWebhookRequest, Webhook } from "../../../../shared/api.ts";
import { modelRef, modelValue } from "../../models.ts";
import { runners } from "../../store.ts";

/** The webhook form's fields, as typed. */
export interface WebhookDraft {
  name: string;
  source: string;
  runnerId: string;
  cwd: string;
  model: string;
  prompt: string;
  eventFilter: string;
  /** Refuse legacy signing and GitHub deliveries without a delivery id. */
  requireReplayProtection: boolean;
}

/** The draft that edits `w`, or a new webhook's (on a connected runner when there is one). */
export function draftOf(w?: Webhook): WebhookDraft {
  return {
    name: w?.name ?? "",
    source: w?.source ?? "custom",
    runnerId: w?.runnerId ?? runners.value.find((r) => r.connected)?.id ?? runners.value[0]?.id ??
      "",
    cwd: w?.cwd ?? "",
    model: w?.model ? modelValue(w.model) : "",
    prompt: w?.prompt ?? "",
    eventFilter: (w?.eventFilter ?? []).join(", "),
    requireReplayProtection: w?.requireReplayProtection ?? true,
  };
}

/** The body of a create or an update: blanks become null, the filter a list. */
export function bodyOf(d: WebhookDraft): CreateWebhookRequest {
  return {
    name: d.name.trim(),
    source: d.source.trim(),
    runnerId: d.runnerId || null,
    cwd: d.cwd.trim() || null,
    prompt: d.prompt.trim() || null,
    model: modelRef(d.model),
    eventFilter: d.eventFilter.split(",").map((s) => s.trim()).filter(Boolean),
    requireReplayProtection: d.requireReplayProtection,
  };
}

/** A shell script that fires the webhook, signed in enhanced mode with openssl. */
export function curlExample(w: Webhook, secret: string): string {
  return [
    `secret='${secret}'`,
    `body='{"type":"${w.eventFilter[0] ?? "test"}","message":"hello"}'`,
    `ts=$(date -u +%Y-%m-%dT%H:%M:%SZ); nonce=$(openssl rand -hex 16)`,
    `sig=$(printf '%s.%s.%s' "$ts" "$nonce" "$body" | openssl dgst -sha256 -hmac "$secret" -hex | sed 's/^.* //')`,
    `curl -sS -X POST '${w.url}' -H 'content-type: application/json' \\`,
    `  -H "x-webhook-timestamp: $ts" -H "x-webhook-nonce: $nonce" -H "x-webhook-signature: $sig" \\`,
    `  --data-binary "$body"`,
  ].join("\n");
}
