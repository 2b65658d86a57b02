import { encodeBase64Url } from "../shared/bytes.ts";
import type { CreatedKey, KeyScope } from "../shared/api.ts";
import type { AsyncStore } from "./store/mod.ts";

/** Prefix of personal API keys. */
export const API_KEY_PREFIX = "bk_";
/** Prefix of runner tokens. */
export const RUNNER_TOKEN_PREFIX = "brt_";

/** A key named `runner`, `runner:*` or `runner-*` is a runner token (the spec's rule). */
export function isRunnerKeyName(name: string): boolean {
  return name === "runner" || name.startsWith("runner:") || name.startsWith("runner-");
}

/** A fresh secret key for `name`: 32 random bytes after the kind's prefix. */
export function generateKey(name: string): { key: string; kind: "api" | "runner" } {
  const kind = isRunnerKeyName(name) ? "runner" : "api";
  const prefix = kind === "runner" ? RUNNER_TOKEN_PREFIX : API_KEY_PREFIX;
  return { key: prefix + encodeBase64Url(crypto.getRandomValues(new Uint8Array(32))), kind };
}

/** The part of a key that is safe to show again: its prefix and first characters. */
export function displayPrefix(key: string): string {
  const cut = key.indexOf("_") + 1;
  return key.slice(0, cut + 6);
}

/**
 * SHA-256 of the key, hex. Keys carry 256 random bits, so a fast hash is
 * enough to make a stolen database useless (no salt or slow hash needed).
 */
export async function hashKey(key: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Whether `value` has the shape of one of our keys (cheap pre-check before hashing). */
export function looksLikeKey(value: string): boolean {
  return (value.startsWith(API_KEY_PREFIX) || value.startsWith(RUNNER_TOKEN_PREFIX)) &&
    value.length < 200;
}

/** Options of {@linkcode createKey}. */
export interface CreateKeyOptions {
  /** `runner`, `runner:*` or `runner-*` makes a runner token; anything else an API key. */
  name: string;
  expiresInDays?: number | null;
  /** Of an API key (default `full`); ignored for a runner token, which is always `runner`. */
  scope?: "full" | "read";
  /** The one runner the key reaches (checked by the caller to be the user's). */
  runnerId?: string | null;
}

/** Creates a key for `userId`, stores its hash and returns the secret once. */
export async function createKey(
  store: Pick<AsyncStore, "keys">,
  userId: string,
  options: CreateKeyOptions,
): Promise<CreatedKey> {
  const { name } = options;
  const { key, kind } = generateKey(name);
  const scope: KeyScope = kind === "runner" ? "runner" : options.scope ?? "full";
  const days = options.expiresInDays ?? null;
  const now = new Date();
  const rec = {
    id: crypto.randomUUID(),
    userId,
    name,
    kind,
    scope,
    runnerId: options.runnerId ?? null,
    prefix: displayPrefix(key),
    hash: await hashKey(key),
    createdAt: now.toISOString(),
    expiresAt: days ? new Date(now.getTime() + days * 86_400_000).toISOString() : null,
    lastUsedAt: null,
  };
  await store.keys.insert(rec);
  return {
    id: rec.id,
    key,
    name,
    kind,
    scope,
    runnerId: rec.runnerId,
    prefix: rec.prefix,
    expiresAt: rec.expiresAt,
  };
}
