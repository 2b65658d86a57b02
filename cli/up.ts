import { join, resolve } from "node:path";
import { createKey, environmentForChildren, hashKey, serveRelay } from "../relay/mod.ts";
import { ensureRunnerId, sandboxDependencyWarning, supervise } from "../runner/mod.ts";
import { encodeBase64Url } from "../shared/mod.ts";
import {
  homeDir,
  parseFlags,
  parseHostList,
  parseHttpUrl,
  parsePort,
  UsageError,
} from "./_args.ts";
import { ask, askSecret, interactive } from "./_prompt.ts";
import { pushFromEnv, retentionFromEnv, tunnelOriginFromEnv, untilSignal } from "./relay.ts";
import { attachmentPolicyFromEnv } from "./_attachment_env.ts";
import { webClient } from "../web/mod.ts";

export const UP_HELP = `Usage: baton up [options]

Start a relay and a runner on this machine, with everything on the embedded
defaults (SQLite in ~/.baton/relay). On the first start it creates the owner
account (asking on a terminal, otherwise generating a password it prints once
and saves, alone, in <data-dir>/initial-password) and a runner token for the
local runner. Then open the printed URL.

Options:
  --port <n>          Port (env BATON_PORT, default 7420)
  --host <addr>       Address to bind (env BATON_HOST, default 127.0.0.1)
  --data-dir <dir>    Relay data (env BATON_DATA_DIR, default ~/.baton/relay)
  --base-url <url>    Public URL (env BATON_BASE_URL)
  --allowed-hosts <list>  Further names browsers use for the relay, comma separated
                      (env BATON_ALLOWED_HOSTS; see baton relay --help)
  --email <email>     Owner email on first start (env BATON_OWNER_EMAIL)
  --no-runner         Start only the relay
  --no-plugins        The local runner's sessions load no plugins (pi extensions and
                      packages); env BATON_NO_PLUGINS=1 does the same
  --no-mcp            ... start no MCP servers (env BATON_NO_MCP=1; see docs/mcp.md)
  --no-hooks          ... run no hooks (env BATON_NO_HOOKS=1)
  --safe-mode         All three, and no runner service (~/.baton/services included;
                      env BATON_SAFE_MODE=1)
  --sandbox <mode>    The local runner's agent sandbox: none, basic (default) or full
                      (env BATON_SANDBOX; BATON_NO_SANDBOX=1 is none; see docs/sandbox.md).
                      On Linux it needs bwrap and socat (apt-get install bubblewrap socat
                      ripgrep). The relay's data folder is hidden from the agents.
  -h, --help          Show this help

Environment:
  BATON_OWNER_PASSWORD   Owner password on first start (else asked or generated)
  BATON_RETENTION_*      Retention of ended sessions, as for 'baton relay'
  BATON_ATTACHMENT_*     Attachment caps and lifetime, as for 'baton relay'
  Runner variables (BATON_WORKSPACE_ROOTS, BATON_NO_*, ...) apply to the local runner,
  which connects to --base-url. Stopping that runner (POST /api/runners/stop)
  ends 'up', relay included.
`;

/** `baton up`. */
export async function upMain(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, {
    port: { type: "string", env: "BATON_PORT" },
    host: { type: "string", env: "BATON_HOST" },
    "data-dir": { type: "string", env: "BATON_DATA_DIR" },
    "base-url": { type: "string", env: "BATON_BASE_URL" },
    "allowed-hosts": { type: "string", env: "BATON_ALLOWED_HOSTS" },
    email: { type: "string", env: "BATON_OWNER_EMAIL" },
    "no-runner": { type: "boolean" },
    "no-plugins": { type: "boolean" },
    "no-mcp": { type: "boolean" },
    "no-hooks": { type: "boolean" },
    "safe-mode": { type: "boolean" },
    sandbox: { type: "string" },
  });
  if (values.sandbox !== undefined && !["none", "basic", "full"].includes(values.sandbox)) {
    throw new UsageError(`Invalid --sandbox: '${values.sandbox}' (expected none, basic or full)`);
  }
  const dataDir = values["data-dir"] ?? join(homeDir(), ".baton", "relay");
  const served = await serveRelay({
    web: await webClient(),
    hostname: values.host ?? "127.0.0.1",
    port: values.port !== undefined ? parsePort(values.port) : 7420,
    dataDir,
    ...(values["base-url"] ? { baseUrl: parseHttpUrl(values["base-url"], "--base-url") } : {}),
    ...(values["allowed-hosts"]
      ? { allowedHosts: parseHostList(values["allowed-hosts"], "--allowed-hosts") }
      : {}),
    retention: retentionFromEnv(),
    attachments: attachmentPolicyFromEnv(),
    ...pushFromEnv(),
    ...tunnelOriginFromEnv(),
    log: (line) => console.error(`[relay] ${line}`),
  });
  const { relay, url } = served;
  console.log(`baton relay listening on ${url}`);

  const passwordFile = join(dataDir, "initial-password");
  let generated = false;
  try {
    if (await relay.store.accounts.count() === 0) {
      generated = await createOwner(url, passwordFile, values.email);
    } else {
      await dropEmailLine(passwordFile, (await relay.store.accounts.first())!.email);
    }
  } catch (err) {
    await served.shutdown();
    throw err;
  }
  const owner = (await relay.store.accounts.first())!;

  const stop = new AbortController();
  let runnerDone: Promise<number> = Promise.resolve(0);
  if (!values["no-runner"]) {
    const runnerId = await ensureRunnerId(join(homeDir(), ".baton"));
    const token = await localRunnerToken(relay.store, { ownerId: owner.id, runnerId, dataDir });
    const warning = sandboxDependencyWarning();
    if (warning) console.error(`Warning: ${warning}`);
    runnerDone = supervise({
      daemonArgs: [
        ...(values["no-plugins"] ? ["--no-plugins"] : []),
        ...(values["no-mcp"] ? ["--no-mcp"] : []),
        ...(values["no-hooks"] ? ["--no-hooks"] : []),
        ...(values["safe-mode"] ? ["--safe-mode"] : []),
        ...(values.sandbox !== undefined ? ["--sandbox", values.sandbox] : []),
      ],
      env: { ...runnerEnv(served.baseUrl), BATON_SANDBOX_PROTECT: await realDir(dataDir) },
      apiKey: token,
      log: (line) => console.error(`[runner] ${line}`),
      signal: stop.signal,
    });
  }
  // Listening before saying so (see untilSignal).
  const signalled = untilSignal();
  const where = generated ? ` with the password in ${passwordFile}` : "";
  console.log(`\nbaton is up: open ${served.baseUrl} and sign in as ${owner.email}${where}\n`);
  // Either Ctrl-C, or the runner stopping on request, ends `up`.
  await (values["no-runner"] ? signalled : Promise.race([signalled, runnerDone]));
  stop.abort();
  const code = await runnerDone;
  await served.shutdown();
  return code;
}

/** A folder's real path (it exists: the relay made it), so the sandbox hides what it is. */
async function realDir(dir: string): Promise<string> {
  try {
    return await Deno.realPath(dir);
  } catch {
    return resolve(dir);
  }
}

/**
 * The local runner's environment: the one `up` was given, minus the owner's
 * password, plus its relay (its token goes on the daemon's stdin).
 */
function runnerEnv(relayUrl: string): Record<string, string> {
  const env = environmentForChildren();
  delete env.BATON_OWNER_PASSWORD;
  return { ...env, BATON_RELAY_URL: relayUrl };
}

/**
 * Creates the first account through the relay's own API; returns whether
 * its password was generated (and saved, alone, in `passwordFile`).
 */
async function createOwner(
  url: string,
  passwordFile: string,
  emailFlag?: string,
): Promise<boolean> {
  let email = emailFlag ?? "";
  let password = Deno.env.get("BATON_OWNER_PASSWORD") ?? "";
  let name = "Owner";
  let generated = false;
  if (interactive() && (!email || !password)) {
    console.log("First start: create the owner account of this relay.");
    email ||= ask("Email:");
    name = ask("Name:", "Owner");
    while (!password) {
      const first = await askSecret("Password (8+ characters):");
      if (first.length < 8) {
        console.log("Too short.");
        continue;
      }
      if (await askSecret("Repeat password:") !== first) console.log("They differ.");
      else password = first;
    }
  }
  if (!email) email = "owner@baton.local";
  if (!password) {
    password = encodeBase64Url(crypto.getRandomValues(new Uint8Array(12)));
    generated = true;
  }
  const res = await fetch(`${url}/api/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name, email, password }),
  });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new UsageError(`Cannot create the owner account: ${body?.error?.message ?? res.status}`);
  }
  await res.body?.cancel();
  if (generated) {
    // The password alone, so that the file's content can be pasted as it is.
    await Deno.writeTextFile(passwordFile, `${password}\n`, { mode: 0o600 });
    console.log(`Created the owner account ${email} with password: ${password}`);
    console.log(`(also saved in ${passwordFile}; change it after signing in)`);
  } else {
    console.log(`Created the owner account ${email}.`);
  }
  return generated;
}

/**
 * Earlier versions saved the owner's email above the password in
 * `initial-password`; pasting that file into the password field failed.
 * Such a file (two lines, the first the owner's email) keeps only its
 * password. Anything else is left as it is.
 */
async function dropEmailLine(passwordFile: string, ownerEmail: string): Promise<void> {
  let text: string;
  try {
    text = await Deno.readTextFile(passwordFile);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  const lines = text.replace(/\r?\n$/, "").split(/\r?\n/);
  if (lines.length !== 2 || lines[0]!.trim().toLowerCase() !== ownerEmail.toLowerCase()) return;
  const password = lines[1]!;
  if (!password) return;
  const next = `${passwordFile}.new`;
  await Deno.writeTextFile(next, `${password}\n`, { mode: 0o600 });
  await Deno.rename(next, passwordFile);
}

/**
 * The runner token of the local runner, bound to it: reused while it is valid
 * and bound to this runner (or not yet bound), else created.
 */
async function localRunnerToken(
  store: Parameters<typeof createKey>[0],
  { ownerId, runnerId, dataDir }: { ownerId: string; runnerId: string; dataDir: string },
): Promise<string> {
  const path = join(dataDir, "local-runner.json");
  try {
    const saved = JSON.parse(await Deno.readTextFile(path));
    if (typeof saved.apiKey === "string") {
      const rec = await store.keys.byHash(await hashKey(saved.apiKey));
      const mine = rec && rec.userId === ownerId &&
        (rec.runnerId === null || rec.runnerId === runnerId);
      if (mine) return saved.apiKey;
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound) && !(err instanceof SyntaxError)) throw err;
  }
  const created = await createKey(store, ownerId, { name: "runner-local" });
  await Deno.writeTextFile(path, JSON.stringify({ apiKey: created.key }, null, 2) + "\n", {
    mode: 0o600,
  });
  return created.key;
}
