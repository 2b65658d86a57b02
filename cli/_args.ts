import { join } from "node:path";
import { parseArgs } from "node:util";
import { normalizeRelayUrl, readUserConfig } from "../runner/config.ts";

/** A command-line mistake: printed as one line, exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** One flag of a command. */
export interface FlagSpec {
  type: "string" | "boolean";
  /** Environment variable read when the flag is absent. */
  env?: string;
  short?: string;
}

/**
 * Parses `argv` strictly against `spec` (unknown flags and stray arguments are
 * usage errors); each flag falls back to its environment variable.
 */
export function parseFlags<S extends Record<string, FlagSpec>>(
  argv: string[],
  spec: S,
  options: { positionals?: number } = {},
): {
  values: { [K in keyof S]?: S[K]["type"] extends "boolean" ? boolean : string };
  positionals: string[];
} {
  const parseSpec: Record<string, { type: "string" | "boolean"; short?: string }> = {};
  for (const [name, f] of Object.entries(spec)) {
    parseSpec[name] = f.short ? { type: f.type, short: f.short } : { type: f.type };
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: parseSpec,
      strict: true,
      allowPositionals: (options.positionals ?? 0) > 0,
    });
  } catch (err) {
    throw new UsageError(cleanParseError(err));
  }
  if (parsed.positionals.length > (options.positionals ?? 0)) {
    throw new UsageError(`Unexpected argument: '${parsed.positionals[options.positionals ?? 0]}'`);
  }
  const values: Record<string, string | boolean | undefined> = { ...parsed.values };
  for (const [name, f] of Object.entries(spec)) {
    if (values[name] !== undefined || !f.env) continue;
    const raw = Deno.env.get(f.env);
    if (raw === undefined || raw === "") continue;
    if (f.type === "boolean") {
      if (raw !== "0" && raw !== "1" && raw !== "true" && raw !== "false") {
        throw new UsageError(`Invalid ${f.env}: '${raw}' (expected 1 or 0)`);
      }
      values[name] = raw === "1" || raw === "true";
    } else values[name] = raw;
  }
  // deno-lint-ignore no-explicit-any
  return { values: values as any, positionals: parsed.positionals };
}

function cleanParseError(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  const unknown = msg.match(/Unknown option '([^']+)'/);
  if (unknown) return `Unknown option: '${unknown[1]}'`;
  const missing = msg.match(/Option '([^']+)' argument missing/);
  if (missing) return `Missing value for option: '${missing[1]?.split(",").pop()?.trim()}'`;
  return msg.split("\n")[0]!.replace(/\.$/, "");
}

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
 * The relay a command talks to: its flag (or variable) when given, else
 * `relayUrl` in `~/.baton/config.json`, else the local default.
 */
export async function relayUrlFrom(flag: string | undefined): Promise<string> {
  const saved = await readUserConfig(join(homeDir(), ".baton")).catch(
    () => ({} as Record<string, unknown>),
  );
  const raw = flag ??
    (typeof saved.relayUrl === "string" && saved.relayUrl !== "off" ? saved.relayUrl : undefined) ??
    "http://127.0.0.1:7420";
  try {
    return normalizeRelayUrl(raw);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** `<home>`: `$HOME` (or `%USERPROFILE%`). */
export function homeDir(): string {
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
  if (!home) throw new UsageError("HOME is not set");
  return home;
}
