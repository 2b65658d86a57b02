import { join } from "node:path";
import {
  type BusConfig,
  CONNECTION_DEFAULTS,
  DEFAULT_RETENTION,
  type RetentionPolicy,
  serveRelay,
  vapidFromEnv,
} from "../relay/mod.ts";
import {
  homeDir,
  parseFlags,
  parseHostList,
  parseHttpUrl,
  parsePort,
  parsePositiveInt,
  UsageError,
} from "./_args.ts";
import { webClient } from "../web/mod.ts";
import { ATTACHMENT_ENV_HELP, attachmentPolicyFromEnv } from "./_attachment_env.ts";
import { SERVICE_ACTIONS, SERVICE_HELP, serviceMain } from "./service.ts";

export const RELAY_HELP = `Usage: baton relay [options]

Start the relay: the HTTP API, the web client and the WebSocket channels
that runners and browsers connect to.

Options:
  --port <n>         Port to listen on (env BATON_PORT, default 7420; 0 picks a free one)
  --host <addr>      Address to bind (env BATON_HOST, default 127.0.0.1)
  --data-dir <dir>   Database and secrets (env BATON_DATA_DIR, default ~/.baton/relay)
  --base-url <url>   Public URL for links and cookies (env BATON_BASE_URL,
                     default http://<host>:<port>, or http://localhost:<port> when
                     the host is 0.0.0.0 or ::)
  --allow-signup     Let accounts beyond the first sign up (env BATON_ALLOW_SIGNUP=1)
  --trust-proxy      Take client IPs from X-Forwarded-For (env BATON_TRUST_PROXY=1)
  --allowed-hosts <list>  Further names browsers use for the relay, comma separated
                     host[:port] or http(s) origins (env BATON_ALLOWED_HOSTS); the
                     base URL's host and localhost, 127.0.0.1, [::1] always are
  --store <url>      Keep the relay's data in PostgreSQL, postgres://user@host:port/db,
                     shared by every relay node on it (env BATON_DATABASE_URL, which
                     may carry the password; else PGPASSWORD; default: SQLite in
                     <data-dir>/relay.db; see docs/scaling.md)
  --bus <url>        The bus between relay nodes, nats://host:port or tls://host:port
                     (env BATON_BUS_URL; default: none, one relay alone; credentials in
                     BATON_BUS_TOKEN or BATON_BUS_USER and BATON_BUS_PASSWORD; TLS files
                     in BATON_BUS_CA, BATON_BUS_CERT and BATON_BUS_KEY; see
                     docs/scaling.md)
  -h, --help         Show this help

Environment:
  BATON_RELAY_EVENT_BUFFER_SIZE   Events kept in memory per session (default 1000)
  BATON_TRUSTED_ORIGINS           Extra browser origins allowed, comma separated
  BATON_WEBHOOK_CONNECT_TIMEOUT_MS  How long a webhook fire waits for its session (15000)
  BATON_WEBHOOK_RATE_LIMIT        Signed fires each webhook takes per minute (60)
  BATON_RETENTION_MAX_AGE_DAYS    Delete ended, unpinned sessions this many days after
                                  they ended (default 90; 0 keeps them)
  BATON_RETENTION_USER_MAX_MB     Most event-log MB per user; oldest ended, unpinned
                                  sessions go first (default 0: no limit)
  BATON_RETENTION_MAX_MB          The same for all users together (default 0: no limit)
${ATTACHMENT_ENV_HELP}
  BATON_HEADERS_TIMEOUT_MS        Time a client has to send request headers (15000)
  BATON_WS_AUTH_TIMEOUT_MS        Time a WebSocket has to authenticate (10000)
  BATON_SHUTDOWN_DRAIN_MS         On SIGTERM, keep serving this long with GET /ready
                                  at 503 before closing, for a load balancer to
                                  move traffic away (default 0; a second signal
                                  ends it early)
  VAPID_PUBLIC_KEY                Push notifications' public key (base64url, 65 bytes)
  VAPID_PRIVATE_KEY               Its private key (base64url, exactly 32 bytes); without
                                  both, a pair is made once in <data-dir>/vapid.json
  VAPID_SUBJECT                   Contact given to push services (mailto: or https:;
                                  default mailto:baton@example.com)
  BATON_PUSH_ALLOW_ORIGINS        Push endpoint origins allowed although http or on a
                                  private address, comma separated (tests, a LAN service)
  BATON_TUNNEL_ORIGIN             Serve tunnel previews from this origin instead of the
                                  relay's, e.g. https://*.tunnel.example.com (one host
                                  per preview) or https://tunnel.example.com
  BATON_METRICS_TOKEN             Bearer token GET /metrics requires of every scraper
                                  (16+ characters); without it, loopback callers only
  BATON_MAX_CONNECTIONS_PER_ADDRESS         Open connections per client address
                                            (4096; 0: no limit)
  BATON_MAX_UNAUTHENTICATED_WS_PER_ADDRESS  WebSockets not yet authenticated per
                                            client address (256; 0: no limit)

${SERVICE_HELP("relay")}`;

/** Resolved relay settings from flags and environment. */
export function relaySettings(argv: string[]) {
  const { values } = parseFlags(argv, {
    port: { type: "string", env: "BATON_PORT" },
    host: { type: "string", env: "BATON_HOST" },
    "data-dir": { type: "string", env: "BATON_DATA_DIR" },
    "base-url": { type: "string", env: "BATON_BASE_URL" },
    "allow-signup": { type: "boolean", env: "BATON_ALLOW_SIGNUP" },
    "trust-proxy": { type: "boolean", env: "BATON_TRUST_PROXY" },
    "allowed-hosts": { type: "string", env: "BATON_ALLOWED_HOSTS" },
    bus: { type: "string", env: "BATON_BUS_URL" },
    store: { type: "string" },
  });
  const buffer = Deno.env.get("BATON_RELAY_EVENT_BUFFER_SIZE");
  const connect = Deno.env.get("BATON_WEBHOOK_CONNECT_TIMEOUT_MS");
  const fires = Deno.env.get("BATON_WEBHOOK_RATE_LIMIT");
  const origins = Deno.env.get("BATON_TRUSTED_ORIGINS");
  const ms = (name: string, fallback: number) => {
    const v = Deno.env.get(name);
    return v ? parsePositiveInt(v, name, 600_000) : fallback;
  };
  const limit = (name: string, fallback: number) => {
    const v = Deno.env.get(name);
    return v === "0" ? 0 : v ? parsePositiveInt(v, name, 1_000_000) : fallback;
  };
  return {
    port: values.port !== undefined ? parsePort(values.port) : 7420,
    hostname: values.host ?? "127.0.0.1",
    dataDir: values["data-dir"] ?? join(homeDir(), ".baton", "relay"),
    ...(values["base-url"] ? { baseUrl: parseHttpUrl(values["base-url"], "--base-url") } : {}),
    allowSignup: values["allow-signup"] ?? false,
    trustProxy: values["trust-proxy"] ?? false,
    allowedHosts: values["allowed-hosts"]
      ? parseHostList(values["allowed-hosts"], "--allowed-hosts")
      : [],
    eventBufferSize: buffer
      ? parsePositiveInt(buffer, "BATON_RELAY_EVENT_BUFFER_SIZE", 1_000_000)
      : 1000,
    webhookConnectTimeoutMs: connect
      ? parsePositiveInt(connect, "BATON_WEBHOOK_CONNECT_TIMEOUT_MS", 600_000)
      : 15_000,
    ...(fires
      ? { webhookFiresPerMinute: parsePositiveInt(fires, "BATON_WEBHOOK_RATE_LIMIT", 1_000_000) }
      : {}),
    headersTimeoutMs: ms("BATON_HEADERS_TIMEOUT_MS", CONNECTION_DEFAULTS.headersTimeoutMs),
    wsAuthTimeoutMs: ms("BATON_WS_AUTH_TIMEOUT_MS", 10_000),
    shutdownDrainMs: limit("BATON_SHUTDOWN_DRAIN_MS", 0),
    maxConnectionsPerAddress: limit(
      "BATON_MAX_CONNECTIONS_PER_ADDRESS",
      CONNECTION_DEFAULTS.maxConnectionsPerAddress,
    ),
    maxUnauthenticatedSocketsPerAddress: limit(
      "BATON_MAX_UNAUTHENTICATED_WS_PER_ADDRESS",
      CONNECTION_DEFAULTS.maxUnauthenticatedSocketsPerAddress,
    ),
    trustedOrigins: origins
      ? origins.split(",").map((o) => parseHttpUrl(o.trim(), "BATON_TRUSTED_ORIGINS"))
      : [],
    retention: retentionFromEnv(),
    attachments: attachmentPolicyFromEnv(),
    ...pushFromEnv(),
    ...tunnelOriginFromEnv(),
    ...metricsTokenFromEnv(),
    ...(values.bus ? { bus: busFromEnv(values.bus) } : {}),
    ...storeFromArgs(values.store),
  };
}

/**
 * The PostgreSQL store from `--store` (no password: a flag shows in `ps`;
 * give it in `PGPASSWORD`) or `BATON_DATABASE_URL` (which may carry one).
 * Neither: the embedded SQLite file in the data folder.
 */
export function storeFromArgs(flag: string | undefined): { databaseUrl?: string } {
  const fromEnv = Deno.env.get("BATON_DATABASE_URL")?.trim();
  const value = flag ?? (fromEnv || undefined);
  if (value === undefined) return {};
  const what = flag !== undefined ? "--store" : "BATON_DATABASE_URL";
  let url: URL | null = null;
  try {
    url = new URL(value);
  } catch {
    // Reported below.
  }
  const shown = value.replace(/\/\/([^:@/]*):[^@/]*@/, "//$1:…@");
  if (
    !url || !/^postgres(ql)?:$/.test(url.protocol) || !url.hostname && !url.searchParams.has("host")
  ) {
    throw new UsageError(
      `Invalid ${what}: '${shown}' (expected postgres://user@host:port/database)`,
    );
  }
  if (flag !== undefined && url.password) {
    throw new UsageError(
      "Invalid --store: a password there shows in ps; give it in PGPASSWORD or the whole URL in BATON_DATABASE_URL",
    );
  }
  return { databaseUrl: value };
}

/** `BATON_METRICS_TOKEN`: 16 to 256 visible ASCII characters (what a bearer token may hold). */
export function metricsTokenFromEnv(): { metricsToken?: string } {
  const v = Deno.env.get("BATON_METRICS_TOKEN");
  if (v === undefined || v === "") return {};
  if (!/^[\x21-\x7e]{16,256}$/.test(v)) {
    throw new UsageError(
      "Invalid BATON_METRICS_TOKEN: expected 16 to 256 visible ASCII characters, no spaces",
    );
  }
  return { metricsToken: v };
}

/**
 * The bus from `--bus` / `BATON_BUS_URL` and its credentials, which only
 * variables carry (a flag would show in `ps`): `BATON_BUS_TOKEN`, or
 * `BATON_BUS_USER` and `BATON_BUS_PASSWORD`; and its TLS files
 * (`BATON_BUS_CA`, `BATON_BUS_CERT` with `BATON_BUS_KEY`), which must be
 * readable now.
 */
function busFromEnv(url: string): BusConfig {
  const token = Deno.env.get("BATON_BUS_TOKEN");
  const user = Deno.env.get("BATON_BUS_USER");
  const password = Deno.env.get("BATON_BUS_PASSWORD");
  const [caFile, certFile, keyFile] = ["BATON_BUS_CA", "BATON_BUS_CERT", "BATON_BUS_KEY"].map(
    readablePem,
  );
  if (!certFile !== !keyFile) {
    throw new UsageError("BATON_BUS_CERT and BATON_BUS_KEY go together: set both or neither");
  }
  const tls = { ...(caFile ? { caFile } : {}), ...(certFile ? { certFile, keyFile } : {}) };
  return {
    url: parseBusUrl(url),
    ...(token ? { token } : {}),
    ...(user ? { user, password: password ?? "" } : {}),
    ...(caFile || certFile ? { tls } : {}),
  };
}

/** The PEM file a variable names, checked readable (a usage error otherwise); undefined when unset. */
function readablePem(name: string): string | undefined {
  const path = Deno.env.get(name)?.trim();
  if (!path) return undefined;
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (err) {
    throw new UsageError(`Invalid ${name}: cannot read '${path}' (${(err as Error).message})`);
  }
  if (!text.includes("-----BEGIN ")) {
    throw new UsageError(`Invalid ${name}: '${path}' is not a PEM file`);
  }
  return path;
}

/**
 * `--bus` / `BATON_BUS_URL`: a nats:// or tls:// URL (a comma-separated list
 * names several servers).
 */
export function parseBusUrl(value: string): string {
  const urls = value.split(",").map((u) => u.trim());
  for (const u of urls) {
    let url: URL | null = null;
    try {
      url = new URL(u);
    } catch {
      // Reported below.
    }
    const scheme = url?.protocol;
    if (
      !url || (scheme !== "nats:" && scheme !== "tls:") || !url.hostname || url.username ||
      url.password
    ) {
      const shown = u.replace(/\/\/[^@/]*@/, "//…@");
      throw new UsageError(
        `Invalid --bus: '${shown}' (expected nats://host:port or tls://host:port, no credentials)`,
      );
    }
  }
  // The scheme in lower case, as the bus client matches it (`TLS://` must stay TLS).
  return urls.map((u) => u.replace(/^[a-z]+:/i, (s) => s.toLowerCase())).join(",");
}

/** `BATON_TUNNEL_ORIGIN` (also read by `baton up`): an http(s) origin, `*.` allowed (relay/tunnel_origin.ts). */
export function tunnelOriginFromEnv(): { tunnelOrigin?: string } {
  const v = Deno.env.get("BATON_TUNNEL_ORIGIN")?.trim();
  if (!v) return {};
  if (!/^https?:\/\/(\*\.)?[a-z0-9.-]+(:\d{1,5})?\/?$/i.test(v)) {
    throw new UsageError(
      `Invalid BATON_TUNNEL_ORIGIN: '${v}' (expected an origin such as https://*.tunnel.example.com)`,
    );
  }
  return { tunnelOrigin: v };
}

/**
 * Push settings from `VAPID_PUBLIC_KEY`, `VAPID_PRIVATE_KEY`, `VAPID_SUBJECT`
 * and `BATON_PUSH_ALLOW_ORIGINS` (also read by `baton up`); a wrong key is a
 * UsageError (one line, exit 2) before anything starts.
 */
export function pushFromEnv(): {
  vapidKeys: ReturnType<typeof vapidFromEnv>;
  vapidSubject?: string;
  pushAllowedOrigins: string[];
} {
  let vapidKeys;
  try {
    vapidKeys = vapidFromEnv((name) => Deno.env.get(name));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const subject = Deno.env.get("VAPID_SUBJECT");
  const allow = Deno.env.get("BATON_PUSH_ALLOW_ORIGINS");
  return {
    vapidKeys,
    ...(subject ? { vapidSubject: subject } : {}),
    pushAllowedOrigins: allow
      ? allow.split(",").map((o) =>
        new URL(parseHttpUrl(o.trim(), "BATON_PUSH_ALLOW_ORIGINS")).origin
      )
      : [],
  };
}

/** The retention policy from `BATON_RETENTION_*` (also read by `baton up`). */
export function retentionFromEnv(): RetentionPolicy {
  const read = (name: string, max: number, fallback: number): number => {
    const v = Deno.env.get(name);
    if (v === undefined || v === "") return fallback;
    if (!/^\d+$/.test(v) || Number(v) > max) {
      throw new UsageError(`Invalid ${name}: '${v}' (expected an integer from 0 to ${max})`);
    }
    return Number(v);
  };
  const MB = 1024 * 1024;
  return {
    maxAgeDays: read("BATON_RETENTION_MAX_AGE_DAYS", 36_500, DEFAULT_RETENTION.maxAgeDays),
    userMaxBytes: read("BATON_RETENTION_USER_MAX_MB", 100_000_000, 0) * MB,
    maxBytes: read("BATON_RETENTION_MAX_MB", 100_000_000, 0) * MB,
  };
}

/** `baton relay`. */
export async function relayMain(argv: string[]): Promise<number> {
  if (argv[0] && SERVICE_ACTIONS.has(argv[0])) {
    return await serviceMain("relay", argv, { validate: (a) => void relaySettings(a) });
  }
  const settings = relaySettings(argv);
  const served = await serveRelay({
    web: await webClient(),
    ...settings,
    log: (line) => console.error(`[relay] ${line}`),
  });
  const signalled = untilSignal();
  console.log(`baton relay listening on ${served.url} (base URL ${served.baseUrl})`);
  await signalled;
  const drainMs = settings.shutdownDrainMs ?? 0;
  const again = new AbortController();
  console.log("baton relay shutting down");
  if (drainMs > 0) {
    console.log(
      `baton relay draining for ${drainMs} ms (GET /ready answers 503; a second signal ends it)`,
    );
  }
  await served.shutdown(drainMs > 0 ? untilSignal(again.signal) : undefined);
  again.abort();
  return 0;
}

/**
 * Resolves on the first SIGINT or SIGTERM (its listeners go once `stop`
 * aborts, if it never came). Call it before printing that the
 * process is ready: Deno's first signal listener takes about half a
 * millisecond to put in place, and a signal sent as soon as the line was
 * read would kill the process (exit code 130) instead of stopping it.
 */
export function untilSignal(stop?: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    const signals: Deno.Signal[] = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"];
    const remove = () => signals.forEach((s, i) => Deno.removeSignalListener(s, handlers[i]!));
    const handlers = signals.map((sig) => {
      const h = () => {
        remove();
        stop?.removeEventListener("abort", remove);
        resolve(sig);
      };
      Deno.addSignalListener(sig, h);
      return h;
    });
    // No longer wanted (the wait it could cut short is over): the listeners go.
    stop?.addEventListener("abort", remove, { once: true });
  });
}
