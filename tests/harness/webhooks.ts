/**
 * A webhook's sender and owner as the webhook tests play them: a webhook
 * created over the API (with its secret), deliveries signed the enhanced way
 * (timestamp, nonce, HMAC) and POSTed to any relay or relay node.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { sign as signGitHub } from "@octokit/webhooks-methods";
import type { Webhook } from "../../shared/api.ts";
import type { SpawnRequest } from "../../shared/protocol.ts";
import { defaultAnswer, FakeRunner } from "./fake_runner.ts";
import { json, type User } from "./client.ts";

/** A webhook as its creation answers it: with the secret shown once. */
export type Hook = Webhook & { secret: string };

/** The hex HMAC-SHA256 of the parts, in order, under `secret`. */
export function hmacHex(secret: string, ...parts: string[]): string {
  const h = createHmac("sha256", secret);
  for (const p of parts) h.update(p);
  return h.digest("hex");
}

/** Enhanced signing headers for `body`: a fresh timestamp and nonce, signed with the body. */
export function enhanced(secret: string, body: string): Record<string, string> {
  const timestamp = new Date().toISOString();
  const nonce = crypto.randomUUID();
  return {
    "x-webhook-timestamp": timestamp,
    "x-webhook-nonce": nonce,
    "x-webhook-signature": hmacHex(secret, `${timestamp}.${nonce}.`, body),
  };
}

/** GitHub's headers for a push delivery of `body` (it signs the body only), with `delivery` as its id. */
export async function github(
  secret: string,
  body: string,
  delivery?: string,
): Promise<Record<string, string>> {
  return {
    "x-hub-signature-256": await signGitHub(secret, body),
    "x-github-event": "push",
    ...(delivery ? { "x-github-delivery": delivery } : {}),
  };
}

/** What a fire answered: its status, headers and parsed JSON body. */
export interface Fired {
  status: number;
  headers: Headers;
  // deno-lint-ignore no-explicit-any
  body: any;
}

/** POSTs a delivery to a relay (or one node) as a sender does (no cookie, no key). */
export async function fire(
  relay: { url: string },
  id: string,
  body: string,
  headers: Record<string, string>,
): Promise<Fired> {
  const res = await fetch(`${relay.url}/api/webhooks/${id}/fire`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** Asserts a fire refused by its webhook's rate limit: 429 `rate_limited`, Retry-After 1–60 s. */
export function assertRateLimited(res: Fired): void {
  assert.equal(res.status, 429, JSON.stringify(res.body));
  assert.equal(res.body.error.code, "rate_limited");
  const retry = Number(res.headers.get("retry-after"));
  assert.ok(retry >= 1 && retry <= 60, `Retry-After: ${retry}`);
}

/**
 * Sends a captured GitHub delivery to `relay` again and asserts what an
 * attacker replaying it gets: as it was, a redelivery answered with the
 * first delivery's session (`sessionId`); under a delivery id of the
 * attacker's choosing (GitHub signs the body only), 409 `replayed`.
 */
export async function assertGitHubReplays(
  relay: { url: string },
  hookId: string,
  body: string,
  captured: Record<string, string>,
  sessionId: string,
): Promise<void> {
  const again = await fire(relay, hookId, body, captured);
  assert.equal(again.status, 200, JSON.stringify(again.body));
  assert.equal(again.body.duplicate, true);
  assert.equal(again.body.sessionId, sessionId);
  const renamed = await fire(relay, hookId, body, {
    ...captured,
    "x-github-delivery": crypto.randomUUID(),
  });
  assert.equal(renamed.status, 409, JSON.stringify(renamed.body));
  assert.equal(renamed.body.error.code, "replayed");
}

/** Creates a webhook as `user`; asserts the 201. */
export async function createHook(user: User, body: Record<string, unknown>): Promise<Hook> {
  const res = await user.web("/api/webhooks", json("POST", body));
  const got = await res.json();
  assert.equal(res.status, 201, JSON.stringify(got));
  return got.webhook;
}

/**
 * A fake runner that starts every session it is asked to spawn; the ids, in
 * order. With `held`, it answers each spawn only once `held` resolves (a
 * session slow to start).
 */
export async function startingRunner(
  relay: { url: string },
  user: User,
  runnerId?: string,
  held?: Promise<void>,
): Promise<{ runner: FakeRunner; spawned: string[] }> {
  const spawned: string[] = [];
  const runner = await FakeRunner.connect(relay.url, {
    apiKey: user.apiKey,
    ...(runnerId ? { runnerId } : {}),
    answer: async (req) => {
      if (req.op === "spawn") {
        const { sessionId } = req.data as SpawnRequest;
        spawned.push(sessionId);
        await held;
        setTimeout(() =>
          runner.sendEvents(sessionId, [{
            seq: 1,
            ts: Date.now(),
            e: { type: "session_start", cwd: "/fake", model: null, resumed: false, tools: [] },
          }]), 10);
      }
      return defaultAnswer(req);
    },
  });
  return { runner, spawned };
}
