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

/**
 * A comma-separated list of host names (`host[:port]`) or http(s) origins,
 * e.g. `BATON_ALLOWED_HOSTS=relay.lan:7420,https://baton.example.com`.
 */
export function parseHostList(value: string, what: string): string[] {
  return value.split(",").map((e) => e.trim()).filter((e) => e !== "").map((entry) => {
    if (/^https?:\/\//i.test(entry)) return new URL(parseHttpUrl(entry, what)).origin;
    let url: URL | null = null;
    try {
      url = new URL(`http://${entry}`);
    } catch {
      // Reported below.
    }
    if (!url || entry.includes("/") || entry.includes("@") || url.pathname !== "/") {
      throw new UsageError(`Invalid ${what}: '${entry}' (expected host[:port] or an http(s) URL)`);
    }
    return url.host;
  });
}

/** `<home>`: `$HOME` (or `%USERPROFILE%`). */
export function homeDir(): string {
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
  if (!home) throw new UsageError("HOME is not set");
  return home;
}
