import { join } from "node:path";
import type { CreateKeyRequest, CreateKeyResponse } from "../shared/mod.ts";
import { readUserConfig } from "../runner/mod.ts";
import { homeDir, parseFlags, parsePositiveInt, UsageError } from "./_args.ts";
import { relayUrlFrom } from "./_relay_url.ts";

export const KEY_HELP = `Usage: baton key create [options]

Create an API key or a runner token with the key of this machine (BATON_API_KEY,
else apiKey in ~/.baton/config.json), which must be a full API key. Prints the
new key, alone, on stdout: it is shown this once.

Options:
  --name <name>      Key name (default "api"); runner, runner:* or runner-*
                     makes a runner token (brt_), anything else an API key (bk_)
  --read             A read-only API key: GET routes only
  --runner <id>      Bind the key to this runner: it reaches that runner and its
                     sessions only (a runner token is bound to the first runner
                     that connects with it otherwise)
  --expires <days>   Expire after this many days (1-3650; default never)
  --relay <url>      Relay address (env BATON_RELAY_URL; default: relayUrl in
                     ~/.baton/config.json, else http://127.0.0.1:7420)
  -h, --help         Show this help

Exits 0 when the key was created, 1 when the relay refused, 2 on bad input.
See docs/security.md ("Credentials and scopes").
`;

/** `baton key ...`. */
export async function keyMain(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, {
    name: { type: "string" },
    read: { type: "boolean" },
    runner: { type: "string" },
    expires: { type: "string" },
    relay: { type: "string", env: "BATON_RELAY_URL" },
  }, { positionals: 1 });
  const [action] = positionals;
  if (action !== "create") {
    throw new UsageError(
      action ? `Unknown key action: '${action}' (try 'create')` : "Missing action: create",
    );
  }
  const name = values.name ?? "api";
  if (!name.trim() || name.length > 100) {
    throw new UsageError(`Invalid --name: '${name}' (1 to 100 characters)`);
  }
  const runnerToken = name === "runner" || /^runner[:-]/.test(name);
  if (values.read && runnerToken) {
    throw new UsageError("--read is for API keys: a runner token's scope is always 'runner'");
  }
  const body: CreateKeyRequest = {
    name,
    ...(values.read ? { scope: "read" } : {}),
    ...(values.runner ? { runnerId: values.runner } : {}),
    ...(values.expires
      ? { expiresInDays: parsePositiveInt(values.expires, "--expires", 3650) }
      : {}),
  };
  const saved = await readUserConfig(join(homeDir(), ".baton")).catch(
    () => ({} as Record<string, unknown>),
  );
  const apiKey = Deno.env.get("BATON_API_KEY") ||
    (typeof saved.apiKey === "string" ? saved.apiKey : "");
  if (!apiKey) throw new UsageError("No API key: set BATON_API_KEY or run 'baton setup'");
  const relay = await relayUrlFrom(values.relay);
  let res: Response;
  try {
    res = await fetch(`${relay}/api/keys`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey },
      body: JSON.stringify(body),
    });
  } catch (err) {
    console.error(`baton key: cannot reach the relay at ${relay}: ${(err as Error).message}`);
    return 1;
  }
  const answer = await res.json().catch(() => null);
  if (res.status !== 201) {
    const message = answer?.error?.message ?? `HTTP ${res.status}`;
    console.error(`baton key: the relay refused (${res.status}): ${message}`);
    return 1;
  }
  const created = answer as CreateKeyResponse;
  const reach = created.runnerId ? ` bound to runner ${created.runnerId}` : "";
  console.error(`Created ${created.name} (${created.kind}, scope ${created.scope}${reach})`);
  console.log(created.key);
  return 0;
}
