import { UsageError } from "../shared/mod.ts";

export { type FlagSpec, parseFlags, UsageError } from "../shared/mod.ts";

/** A TCP port from a flag value. */
export function parsePort(value: string, what = "--port"): number {
  if (!/^\d+$/.test(value) || Number(value) > 65535) {
    throw new UsageError(`Invalid ${what}: '${value}' (expected 0-65535)`);
  }
  return Number(value);
}

/** A positive integer from a flag or variable value. */
export function parsePositiveInt(value: string, what: string, max = 10_000_000): number {
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > max) {
    throw new UsageError(`Invalid ${what}: '${value}' (expected an integer from 1 to ${max})`);
  }
  return Number(value);
}

/** An http(s) URL from a flag value, without its trailing slash. */
export function parseHttpUrl(value: string, what: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`Invalid ${what}: '${value}' (expected an http(s) URL)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`Invalid ${what}: '${value}' (expected an http(s) URL)`);
  }
  return url.href.replace(/\/+$/, "");
}

/** `<home>`: `$HOME` (or `%USERPROFILE%`). */
export function homeDir(): string {
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
  if (!home) throw new UsageError("HOME is not set");
  return home;
}
