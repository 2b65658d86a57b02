import { enhancedPayload, signHex } from "../shared/mod.ts";
import { parseFlags, UsageError } from "./_args.ts";
import { relayUrlFrom } from "./_relay_url.ts";
import { readStdin } from "./_prompt.ts";

export const WEBHOOK_HELP = `Usage: baton webhook fire <webhook-id> [options]

Send a signed test delivery to a webhook, as a sender would: the body is
signed in enhanced mode (X-Webhook-Timestamp, X-Webhook-Nonce and the hex
HMAC-SHA256 of "<timestamp>.<nonce>.<body>" in X-Webhook-Signature).

Options:
  --secret <hex>     The webhook's secret (env BATON_WEBHOOK_SECRET)
  --data <body>      JSON text, @file.json, or @- to read stdin (default {})
  --relay <url>      Relay address (env BATON_RELAY_URL; default: relayUrl in
                     ~/.baton/config.json, else http://127.0.0.1:7420)
  --legacy           Sign the raw body only (no timestamp or nonce)
  -h, --help         Show this help

Prints the relay's answer; exits 0 when it accepted the delivery, 1 otherwise.
See docs/webhooks.md for calling webhooks from GitHub, curl and scripts.
`;

/** `baton webhook ...`. */
export async function webhookMain(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, {
    secret: { type: "string", env: "BATON_WEBHOOK_SECRET" },
    data: { type: "string" },
    relay: { type: "string", env: "BATON_RELAY_URL" },
    legacy: { type: "boolean" },
  }, { positionals: 2 });
  const [action, id] = positionals;
  if (action !== "fire") {
    throw new UsageError(
      action ? `Unknown webhook action: '${action}' (try 'fire')` : "Missing action: fire",
    );
  }
  if (!id) throw new UsageError("Missing the webhook id");
  if (!/^[A-Za-z0-9-]{1,100}$/.test(id)) throw new UsageError(`Invalid webhook id: '${id}'`);
  const secret = values.secret;
  if (!secret) throw new UsageError("Missing --secret (or BATON_WEBHOOK_SECRET)");

  const raw = values.data ?? "{}";
  let text: string;
  if (raw === "@-") text = await readStdin();
  else if (raw.startsWith("@")) {
    try {
      text = await Deno.readTextFile(raw.slice(1));
    } catch (err) {
      throw new UsageError(`Cannot read '${raw.slice(1)}': ${(err as Error).message}`);
    }
  } else text = raw;
  try {
    JSON.parse(text);
  } catch {
    throw new UsageError("The body is not valid JSON");
  }

  const relay = await relayUrlFrom(values.relay);

  const body = new TextEncoder().encode(text);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (values.legacy) headers["x-webhook-signature"] = await signHex(secret, body);
  else {
    const ts = new Date().toISOString();
    const nonce = crypto.randomUUID();
    headers["x-webhook-timestamp"] = ts;
    headers["x-webhook-nonce"] = nonce;
    headers["x-webhook-signature"] = await signHex(secret, enhancedPayload(ts, nonce, body));
  }
  let res: Response;
  try {
    res = await fetch(`${relay}/api/webhooks/${id}/fire`, { method: "POST", headers, body });
  } catch (err) {
    console.error(`baton webhook: cannot reach the relay at ${relay}: ${(err as Error).message}`);
    return 1;
  }
  const answer = await res.text();
  console.log(`${res.status} ${answer}`);
  return res.ok ? 0 : 1;
}
