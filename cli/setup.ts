import { join } from "node:path";
import { updateUserConfig } from "../runner/mod.ts";
import { homeDir, parseFlags, UsageError } from "./_args.ts";
import { relayUrlFrom } from "./_relay_url.ts";
import { ask, askSecret, interactive, readStdin } from "./_prompt.ts";

export const SETUP_HELP = `Usage: baton setup [options]

Sign in to a relay with email and password (or create the account when a
name is given and the relay allows it), and save a new API key with the
relay URL in ~/.baton/config.json for 'baton runner' and the CLI.

Options:
  --relay <url>       Relay address (env BATON_RELAY_URL; default: the saved one,
                      else http://127.0.0.1:7420)
  --email <email>     Account email (asked on a terminal when missing)
  --name <name>       Create the account with this name if it does not exist
  --password-stdin    Read the password from stdin (else env BATON_PASSWORD,
                      else asked on a terminal)
  -h, --help          Show this help
`;

/** `baton setup`. */
export async function setupMain(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, {
    relay: { type: "string", env: "BATON_RELAY_URL" },
    email: { type: "string" },
    name: { type: "string" },
    "password-stdin": { type: "boolean" },
  });
  const batonDir = join(homeDir(), ".baton");
  const relayUrl = await relayUrlFrom(values.relay);
  const tty = interactive();
  const email = values.email ?? (tty ? ask("Email:") : "");
  if (!email) throw new UsageError("Missing --email");
  let password = values["password-stdin"]
    ? await readStdin()
    : Deno.env.get("BATON_PASSWORD") ?? "";
  if (!password && tty) password = await askSecret("Password:");
  if (!password) throw new UsageError("Missing password (--password-stdin or BATON_PASSWORD)");
  const name = values.name;

  let res: Response;
  try {
    res = await fetch(`${relayUrl}/api/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password, ...(name ? { name } : {}) }),
    });
  } catch (err) {
    console.error(`baton setup: cannot reach the relay at ${relayUrl}: ${(err as Error).message}`);
    return 1;
  }
  const body = await res.json().catch(() => ({}));
  if (!res.ok || typeof body.key !== "string") {
    const msg = body?.error?.message ?? `HTTP ${res.status}`;
    console.error(`baton setup: ${msg}`);
    return 1;
  }
  const path = await updateUserConfig(batonDir, { relayUrl, apiKey: body.key });
  console.log(`Signed in to ${relayUrl} as ${email}; API key saved in ${path}`);
  console.log("Start a runner on this machine with: baton runner");
  return 0;
}
