/**
 * Strict command-line flags with environment fallbacks, shared by the CLI and
 * the runner daemon's own entry point (`baton _daemon`).
 *
 * @module
 */
import { parseArgs } from "node:util";

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
  /** The flag may be given several times; its values come joined with commas. */
  multiple?: boolean;
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
  const parseSpec: Record<
    string,
    { type: "string" | "boolean"; short?: string; multiple?: boolean }
  > = {};
  for (const [name, f] of Object.entries(spec)) {
    parseSpec[name] = {
      type: f.type,
      ...(f.short ? { short: f.short } : {}),
      ...(f.multiple ? { multiple: true } : {}),
    };
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
  const values: Record<string, string | boolean | undefined> = {};
  for (const [name, v] of Object.entries(parsed.values)) {
    values[name] = Array.isArray(v) ? v.join(",") : v;
  }
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
