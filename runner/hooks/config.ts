/**
 * Hooks from `<home>/.baton/config.json` and a project's
 * `.baton/config.json`, in Claude Code's shape with baton's event names:
 *
 * ```json
 * { "hooks": { "preToolUse": [
 *   { "matcher": "bash", "hooks": [{ "type": "command", "command": "./check.sh", "timeout": 10 }] }
 * ] } }
 * ```
 *
 * No I/O: the worker reads the files.
 *
 * @module
 */
import { ConfigError, parseDuration } from "../config.ts";
import { isObject } from "../../shared/json.ts";

/** The moments a hook runs at. */
export const HOOK_EVENTS = ["sessionStart", "preToolUse", "postToolUse", "stop"] as const;
/** One of {@linkcode HOOK_EVENTS}. */
export type HookEvent = typeof HOOK_EVENTS[number];

/** Claude Code's names of the same events, accepted as aliases. */
const ALIASES: Record<string, HookEvent> = {
  SessionStart: "sessionStart",
  PreToolUse: "preToolUse",
  PostToolUse: "postToolUse",
  Stop: "stop",
};

/** A hook's time limit when it sets none (Claude Code's default too). */
export const DEFAULT_HOOK_TIMEOUT_MS = 60_000;
/** The most one hook may be given. */
export const MAX_HOOK_TIMEOUT_MS = 600_000;

/** One hook command. */
export interface Hook {
  event: HookEvent;
  command: string;
  /** Which tools it applies to (tool events); null: every tool. */
  matcher: RegExp | null;
  /** The matcher as written, for messages. */
  matcherText: string;
  timeoutMs: number;
  from: "global" | "project";
}

/**
 * A tool-name matcher: empty or `*` matches every tool; a word with `*` or
 * `?` and nothing else special is a glob (`mcp__github__*`); anything else
 * is a regular expression (`edit|write`, `mcp__.*`). Both must match the
 * whole name, ignoring case (pi's `bash` is Claude Code's `Bash`).
 */
export function compileMatcher(text: string): RegExp | null {
  const t = text.trim();
  if (t === "" || t === "*") return null;
  if (/^[A-Za-z0-9_\-*?]+$/.test(t)) {
    const re = t.replace(/[-]/g, "\\-").replace(/\*/g, ".*").replace(/\?/g, ".");
    return new RegExp(`^(?:${re})$`, "i");
  }
  try {
    return new RegExp(`^(?:${t})$`, "i");
  } catch {
    throw new ConfigError(`Invalid hook matcher: '${t}' (not a glob nor a regular expression)`);
  }
}

/** Whether a hook applies to a tool. */
export function matches(hook: Hook, toolName: string): boolean {
  return hook.matcher === null || hook.matcher.test(toolName);
}

function timeoutOf(v: unknown, where: string): number {
  if (v === undefined) return DEFAULT_HOOK_TIMEOUT_MS;
  if (typeof v !== "number" && typeof v !== "string") {
    throw new ConfigError(`${where}.timeout must be seconds or a duration such as 500ms`);
  }
  const ms = parseDuration(v, `${where}.timeout`);
  if (ms <= 0 || ms > MAX_HOOK_TIMEOUT_MS) {
    throw new ConfigError(`${where}.timeout must be between 1 ms and 10 minutes`);
  }
  return ms;
}

/**
 * The hooks of one config file; bad entries are skipped with a line in
 * `problems` (shown in the session) rather than stopping it.
 */
export function parseHooks(
  raw: unknown,
  from: "global" | "project",
  problems: string[],
): Hook[] {
  if (raw === undefined) return [];
  if (!isObject(raw)) {
    problems.push(`hooks in the ${from} config must be an object: ignored`);
    return [];
  }
  const out: Hook[] = [];
  for (const [key, groups] of Object.entries(raw)) {
    const event = (HOOK_EVENTS as readonly string[]).includes(key)
      ? key as HookEvent
      : ALIASES[key];
    if (!event) {
      problems.push(`hooks.${key} (${from}): unknown event (expected ${HOOK_EVENTS.join(", ")})`);
      continue;
    }
    if (!Array.isArray(groups)) {
      problems.push(`hooks.${key} (${from}) must be an array: ignored`);
      continue;
    }
    groups.forEach((g, i) => {
      const where = `hooks.${key}[${i}]`;
      try {
        if (!isObject(g)) throw new ConfigError(`${where} must be an object`);
        const matcherText = g.matcher === undefined ? "" : g.matcher;
        if (typeof matcherText !== "string") throw new ConfigError(`${where}.matcher: a string`);
        const matcher = compileMatcher(matcherText);
        // Claude Code nests commands under `hooks`; a flat `{command}` is taken too.
        const list = Array.isArray(g.hooks) ? g.hooks : [g];
        list.forEach((h, j) => {
          const w = Array.isArray(g.hooks) ? `${where}.hooks[${j}]` : where;
          if (!isObject(h)) throw new ConfigError(`${w} must be an object`);
          if (h.type !== undefined && h.type !== "command") {
            throw new ConfigError(`${w}.type '${String(h.type)}' is not supported (command)`);
          }
          if (typeof h.command !== "string" || h.command.trim() === "") {
            throw new ConfigError(`${w}.command must be a non-empty string`);
          }
          out.push({
            event,
            command: h.command,
            matcher,
            matcherText: matcherText || "*",
            timeoutMs: timeoutOf(h.timeout, w),
            from,
          });
        });
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        problems.push(`${err.message} (${from} config): skipped`);
      }
    });
  }
  return out;
}
