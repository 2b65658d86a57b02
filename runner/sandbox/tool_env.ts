/**
 * The environment of what runs for a session under its sandbox (the agent's
 * `bash`, hooks, stdio MCP servers): the worker's, without the model
 * providers' keys.
 *
 * The worker keeps those keys: pi reads them from its environment to call
 * the model. The sandbox already hides `~/.baton/auth.json` and
 * `models.json`, where the same keys may be written instead; a key in a
 * variable would otherwise be one `env` away from the agent, and from a
 * cloned repository's `sessionStart` hook under the open network of `basic`.
 * Which variables: the ones pi reads for its built-in providers, and every
 * variable `models.json` names as a key or header value, or `auth.json` as
 * a credential.
 * Other credentials a project's tools need (`GITHUB_TOKEN`, `AWS_*`,
 * `PGPASSWORD`) stay: they are the user's tools' own, not baton's.
 *
 * The person can give some or all back in the global `~/.baton/config.json`
 * (`"exposeProviderKeys": true` or a list of names; a project's file cannot),
 * and an MCP server of the global file may still name one in its own `env`
 * or `headers` (`${OPENAI_API_KEY}`): a project's may not.
 *
 * @module
 */
import { join } from "node:path";
import { readUserConfig } from "../config.ts";
import { isObject } from "../../shared/json.ts";

/**
 * The variables pi's providers read their keys from (pi-ai's
 * `getEnvApiKey`), less the general ones developers' own tools use too
 * (`GH_TOKEN`, `GITHUB_TOKEN`, AWS's credentials).
 */
export const PROVIDER_KEY_VARIABLES: readonly string[] = [
  "AI_GATEWAY_API_KEY",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_OAUTH_TOKEN",
  "AWS_BEARER_TOKEN_BEDROCK",
  "AZURE_OPENAI_API_KEY",
  "CEREBRAS_API_KEY",
  "CLOUDFLARE_API_KEY",
  "COPILOT_GITHUB_TOKEN",
  "DEEPSEEK_API_KEY",
  "FIREWORKS_API_KEY",
  "GEMINI_API_KEY",
  "GOOGLE_CLOUD_API_KEY",
  "GROQ_API_KEY",
  "HF_TOKEN",
  "KIMI_API_KEY",
  "MINIMAX_API_KEY",
  "MINIMAX_CN_API_KEY",
  "MISTRAL_API_KEY",
  "MOONSHOT_API_KEY",
  "OPENAI_API_KEY",
  "OPENCODE_API_KEY",
  "OPENROUTER_API_KEY",
  "XAI_API_KEY",
  "XIAOMI_API_KEY",
  "XIAOMI_TOKEN_PLAN_AMS_API_KEY",
  "XIAOMI_TOKEN_PLAN_CN_API_KEY",
  "XIAOMI_TOKEN_PLAN_SGP_API_KEY",
  "ZAI_API_KEY",
];

/** A value of models.json that pi reads as the name of a variable. */
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The variables `models.json` (parsed) names as a key or header value (a
 * provider's `apiKey` and `headers`, its models' and model overrides'
 * `headers`) and `env` holds: pi resolves such a value from the
 * environment. The same for `auth.json`'s credentials (`key`).
 */
export function modelsJsonVariables(
  models: unknown,
  env: (k: string) => string | undefined,
  auth: unknown = {},
): string[] {
  const out = new Set<string>();
  const take = (v: unknown) => {
    if (typeof v === "string" && VARIABLE_NAME.test(v) && env(v) !== undefined) out.add(v);
  };
  // Every `apiKey`, and every value of every `headers`, however deep in a provider.
  const walk = (v: unknown, depth: number): void => {
    if (depth > 6 || !isObject(v) && !Array.isArray(v)) return;
    for (const [k, child] of Object.entries(v)) {
      if (k === "apiKey") take(child);
      else if (k === "headers" && isObject(child)) Object.values(child).forEach(take);
      else walk(child, depth + 1);
    }
  };
  walk(isObject(models) ? models.providers : undefined, 0);
  if (isObject(auth)) {
    for (const cred of Object.values(auth)) if (isObject(cred)) take(cred.key);
  }
  return [...out];
}

/**
 * The variables kept from a session's sandboxed processes: the providers'
 * and models.json's, less what the global config's `exposeProviderKeys`
 * gives back (`true`: all of them; a list: those).
 */
export function hiddenVariables(o: {
  models: unknown;
  auth?: unknown;
  global: Record<string, unknown>;
  env: (k: string) => string | undefined;
}): Set<string> {
  const expose = o.global.exposeProviderKeys;
  if (expose === true) return new Set();
  const hidden = new Set([
    ...PROVIDER_KEY_VARIABLES,
    ...modelsJsonVariables(o.models, o.env, o.auth),
  ]);
  if (Array.isArray(expose)) {
    for (const k of expose) {
      if (typeof k === "string") hidden.delete(k);
    }
  }
  return hidden;
}

/** Reads `<batonDir>/<name>` as JSON (`models.json`, `auth.json`); anything unreadable is {}. */
export async function readJsonFile(batonDir: string, name: string): Promise<unknown> {
  try {
    return JSON.parse(await Deno.readTextFile(join(batonDir, name)));
  } catch {
    return {};
  }
}

/**
 * The variables hidden from the sandboxed processes of a session of the
 * runner whose folder is `batonDir`. An unreadable global config hides them
 * all (a broken file gives nothing back).
 */
export async function sessionHiddenVariables(
  batonDir: string,
  env: (k: string) => string | undefined,
): Promise<Set<string>> {
  const global = await readUserConfig(batonDir).catch(() => ({}));
  const [models, auth] = await Promise.all([
    readJsonFile(batonDir, "models.json"),
    readJsonFile(batonDir, "auth.json"),
  ]);
  return hiddenVariables({ models, auth, global, env });
}

/** `env` without the `hidden` variables. */
export function withoutHidden(
  env: Record<string, string | undefined>,
  hidden: ReadonlySet<string>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && !hidden.has(k)) out[k] = v;
  return out;
}

/**
 * The environment of a session's hooks and stdio MCP servers: the worker's,
 * less the `hidden` variables while the sandbox is active (without it they
 * run with the user's rights anyway, as `bash` does).
 */
export function toolEnvironment(
  sandbox: { active: boolean },
  hidden: ReadonlySet<string>,
): Record<string, string> {
  const env = Deno.env.toObject();
  return sandbox.active ? withoutHidden(env, hidden) : env;
}
