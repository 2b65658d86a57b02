/**
 * The approval policy, pure: its checks, which tool call it holds for a
 * person, and the one-line summary of that call the person decides on.
 *
 * @module
 */
import {
  type ApprovalPolicy,
  ASK_USER_TOOL,
  DEFAULT_APPROVAL_POLICY,
  MAX_POLICY_ENTRIES,
  MAX_SUMMARY,
} from "../../shared/questions_api.ts";

/** A policy that is not one (bad mode, a non-string entry, too many entries). */
export class ApprovalPolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ApprovalPolicyError";
  }
}

function strings(v: unknown, what: string, max: number): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new ApprovalPolicyError(`${what} must be an array of strings`);
  if (v.length > MAX_POLICY_ENTRIES) {
    throw new ApprovalPolicyError(`${what} may list at most ${MAX_POLICY_ENTRIES} entries`);
  }
  return v.map((s, i) => {
    if (typeof s !== "string" || s.trim() === "" || s.length > max) {
      throw new ApprovalPolicyError(`${what}[${i}] must be a non-empty string of at most ${max}`);
    }
    return s.trim();
  });
}

/** A checked policy from JSON (config file, request); undefined or null gives the default. */
export function parsePolicy(v: unknown, what = "approvals"): ApprovalPolicy {
  if (v === undefined || v === null) return structuredClone(DEFAULT_APPROVAL_POLICY);
  if (typeof v !== "object" || Array.isArray(v)) {
    throw new ApprovalPolicyError(`${what} must be an object`);
  }
  const o = v as Record<string, unknown>;
  const mode = o.mode ?? "auto";
  if (mode !== "auto" && mode !== "ask") {
    throw new ApprovalPolicyError(`${what}.mode must be 'auto' or 'ask'`);
  }
  return {
    mode,
    tools: strings(o.tools, `${what}.tools`, 200),
    commands: strings(o.commands, `${what}.commands`, 500),
  };
}

/** A glob (`*` any run of characters, `?` one) as an anchored regular expression. */
function globRegex(pattern: string): RegExp {
  const body = pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[\\s\\S]*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`);
}

/**
 * Whether a bash command matches a pattern: the whole command, or any of its
 * simple commands (split at `;`, `&&`, `||`, `|` and new lines), trimmed.
 * A convenience, not a boundary: `eval`, `$(…)` or a script hide a command
 * from any pattern (docs/questions.md says to list `bash` itself for that).
 */
export function commandMatches(pattern: string, command: string): boolean {
  const re = globRegex(pattern.trim());
  const whole = command.trim();
  if (re.test(whole)) return true;
  return whole.split(/\s*(?:&&|\|\||;|\||\n)\s*/).some((part) => re.test(part.trim()));
}

/** Whether a tool call waits for a person under `policy` (ask_user itself never does). */
export function needsApproval(policy: ApprovalPolicy, toolName: string, input: unknown): boolean {
  if (policy.mode !== "ask" || toolName === ASK_USER_TOOL) return false;
  if (policy.tools.length === 0 && policy.commands.length === 0) return true;
  if (policy.tools.some((t) => t === "*" || t === toolName)) return true;
  const command = (input as { command?: unknown } | null)?.command;
  if (toolName === "bash" && typeof command === "string") {
    return policy.commands.some((p) => commandMatches(p, command));
  }
  return false;
}

/** What a held tool call would do, in a line a person can judge (a command, a path, the arguments). */
export function callSummary(toolName: string, input: unknown): string {
  const o = (input ?? {}) as Record<string, unknown>;
  let text: string;
  if (toolName === "bash" && typeof o.command === "string") text = o.command;
  else if (typeof o.path === "string" && Object.keys(o).length === 1) text = o.path;
  else {
    try {
      text = JSON.stringify(input);
    } catch {
      text = String(input);
    }
  }
  return text.length > MAX_SUMMARY ? text.slice(0, MAX_SUMMARY - 1) + "…" : text;
}
