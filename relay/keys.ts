import { encodeBase64Url } from "../shared/bytes.ts";

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
