import assert from "node:assert/strict";
import { sign as githubSign } from "@octokit/webhooks-methods";
import { Webhook } from "standardwebhooks";
import { enhancedPayload, signHex, verifyWebhook } from "./webhook_signing.ts";

const SECRET = "a".repeat(64);
const enc = new TextEncoder();
const body = enc.encode('{"type":"build.failed","ref":"main"}');
const NOW = Date.parse("2026-11-21T12:00:00Z");

async function enhanced(tsOffsetMs = 0, nonce = "n-1", b = body) {
  const ts = new Date(NOW + tsOffsetMs).toISOString();
  return new Headers({
    "x-webhook-timestamp": ts,
    "x-webhook-nonce": nonce,
    "x-webhook-signature": await signHex(SECRET, enhancedPayload(ts, nonce, b)),
  });
}

Deno.test("enhanced signing: valid, skew in both directions, one byte changed, wrong key", async () => {
  assert.deepEqual(await verifyWebhook(SECRET, await enhanced(), body, NOW), {
    ok: true,
    mode: "enhanced",
    nonce: "n-1",
    signedAt: NOW,
  });
  assert.equal((await verifyWebhook(SECRET, await enhanced(-4 * 60_000), body, NOW)).ok, true);
  assert.match(
    JSON.stringify(await verifyWebhook(SECRET, await enhanced(-6 * 60_000), body, NOW)),
    /5 minutes/,
  );
  assert.match(
    JSON.stringify(await verifyWebhook(SECRET, await enhanced(+6 * 60_000), body, NOW)),
    /5 minutes/,
  );
  const changed = body.slice();
  changed[5] = changed[5]! ^ 1;
  assert.match(
    JSON.stringify(await verifyWebhook(SECRET, await enhanced(), changed, NOW)),
    /mismatch/,
  );
  assert.equal((await verifyWebhook("b".repeat(64), await enhanced(), body, NOW)).ok, false);
});

Deno.test("enhanced signing with one of its headers missing is refused", async () => {
  const h = await enhanced();
  h.delete("x-webhook-nonce");
  assert.match(JSON.stringify(await verifyWebhook(SECRET, h, body, NOW)), /Nonce/);
  const h2 = await enhanced();
  h2.delete("x-webhook-timestamp");
  assert.match(JSON.stringify(await verifyWebhook(SECRET, h2, body, NOW)), /Timestamp/);
});

Deno.test("legacy signing covers the raw body only", async () => {
  const h = new Headers({ "x-webhook-signature": await signHex(SECRET, body) });
  assert.deepEqual(await verifyWebhook(SECRET, h, body, NOW), { ok: true, mode: "legacy" });
  assert.equal((await verifyWebhook(SECRET, h, enc.encode("{}"), NOW)).ok, false);
  assert.equal((await verifyWebhook(SECRET, new Headers(), body, NOW)).ok, false, "no signature");
  const bad = new Headers({ "x-webhook-signature": "zz" });
  assert.equal((await verifyWebhook(SECRET, bad, body, NOW)).ok, false);
});

Deno.test("GitHub's signature, made by GitHub's own library, is accepted", async () => {
  const text = '{"action":"opened","number":1}';
  const h = new Headers({
    "x-hub-signature-256": await githubSign(SECRET, text),
    "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
  });
  assert.deepEqual(await verifyWebhook(SECRET, h, enc.encode(text), NOW), {
    ok: true,
    mode: "github",
    deliveryId: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
  });
  assert.equal((await verifyWebhook(SECRET, h, enc.encode(text + " "), NOW)).ok, false);
});

Deno.test("Standard Webhooks signatures, made by the reference library, are accepted", async () => {
  const wh = new Webhook(SECRET, { format: "raw" });
  const id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
  const text = '{"type":"invoice.paid","data":{"amount":12}}';
  const at = new Date(NOW);
  const sig = wh.sign(id, at, text);
  const h = new Headers({
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(NOW / 1000)),
    "webhook-signature": sig,
  });
  assert.deepEqual(await verifyWebhook(SECRET, h, enc.encode(text), NOW), {
    ok: true,
    mode: "standard",
    deliveryId: id,
  });
  assert.equal((await verifyWebhook(SECRET, h, enc.encode(text), NOW + 6 * 60_000)).ok, false);
  h.set("webhook-signature", `v1,AAAA ${sig}`);
  assert.equal(
    (await verifyWebhook(SECRET, h, enc.encode(text), NOW)).ok,
    true,
    "any listed signature",
  );
});
