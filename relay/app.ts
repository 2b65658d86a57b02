import { type ErrorHandler, type Handler, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { join } from "node:path";
import { makePrivate } from "../shared/private_files.ts";
import { RUNNER_WS_PATH, VIEWER_WS_PATH } from "../shared/protocol.ts";
import { TUNNEL_WS_PATH } from "../shared/tunnel_api.ts";
import { TERMINAL_WS_PATH } from "../shared/terminal_api.ts";
import { createAuth } from "./auth.ts";
import type { Database } from "./store/db.ts";
import { RelayError } from "./errors.ts";
import type { HealthResponse } from "../shared/api.ts";
import {
  errorResponse,
  HttpError,
  prefersHtml,
  type RelayEnv,
  relayErrorResponse,
} from "./_http.ts";
import { Hub } from "./hub.ts";
import { browserAccess } from "./principal.ts";
import type { apiRoutes } from "./api.ts";
import type { RetentionPolicy } from "./retention.ts";
import { type AttachmentPolicy, Attachments } from "./attachments.ts";
import type { VapidKeys } from "./push_keys.ts";
import { PushSender } from "./push_sender.ts";
import { TriggerCalls } from "./runner_calls.ts";
import { RunnerServices } from "./runner_services.ts";
import { withSubagentCalls } from "./subagents.ts";
import { SecretBox } from "./secret_box.ts";
import { TriggerListeners } from "./trigger_listeners.ts";
import { Triggers } from "./triggers.ts";
import { Webhooks } from "./webhooks.ts";
import type { AsyncStore, Store } from "./store/mod.ts";
import { openRelayStore } from "./relay_store.ts";
import { socketRoutes, type Upgrader } from "./sockets.ts";
import { redactGrants } from "./tunnel_grants.ts";
import { tunnelOriginMiddleware } from "./tunnel_origin.ts";
import { nodeKeys } from "./shared_keys.ts";
import { type Bus, type BusConfig, openBus } from "./bus/mod.ts";
import { BusMeter } from "./bus_meter.ts";
import { type Readiness, RelayMeter, relayOperations } from "./operations.ts";

/** Options of {@linkcode createRelay}. */
export interface RelayOptions {
  /** Folder of `relay.db` and the auth secret; created when missing. */
  dataDir: string;
  /** Public address of the relay, used for share URLs, cookies and Origin checks. */
  baseUrl: string;
  /** Let accounts beyond the first one sign up. */
  allowSignup?: boolean;
  /** Events kept in memory per session. Default 1000. */
  eventBufferSize?: number;
  /** Take the client IP from X-Forwarded-For (only behind a proxy that sets it). */
  trustProxy?: boolean;
  /** Extra browser origins allowed besides the base URL's. */
  trustedOrigins?: string[];
  /**
   * Further names browsers reach the relay by (`host[:port]` or an http(s)
   * origin), besides the base URL's and the loopback names.
   */
  allowedHosts?: string[];
  /** The port the relay listens on, for its loopback names (default: the base URL's). */
  port?: number;
  /**
   * Refuse (421) requests whose `Host` is none of the relay's names: what a
   * relay on a loopback address does (serveRelay sets it), against DNS rebinding.
   */
  hostCheck?: boolean;
  /** Signing secret of sessions; default: read or create `<dataDir>/secret`. */
  authSecret?: string;
  /** Receives one line per notable incident. */
  log?: (line: string) => void;
  /** The bus between relay nodes (a nats-server); default: this process alone. */
  bus?: BusConfig;
  /** What retention keeps (default: ended sessions 90 days, no size limit). */
  retention?: RetentionPolicy;
  /** How long a webhook fire waits for its session to start (default 15 s). */
  webhookConnectTimeoutMs?: number;
  /** Signed fires each webhook takes per minute (default 60). */
  webhookFiresPerMinute?: number;
  /**
   * Completes WebSocket handshakes (serveRelay's transport); without it the
   * channels refuse every upgrade (400), as when the app is called in-process.
   */
  upgrade?: Upgrader;
  /** How long a WebSocket may stay unauthenticated (runner hello, viewer auth); default 10 s. */
  wsAuthTimeoutMs?: number;
  /**
   * Builds the repositories over the opened database (the bench swaps in one
   * without a durable log); default {@linkcode Store}. A custom store also
   * receives the session events on this thread, instead of the writer thread.
   */
  store?: (db: Database) => Store;
  /**
   * A PostgreSQL URL (`--store`, `BATON_DATABASE_URL`): the relay's data
   * lives there, shared by every relay node on it, instead of in `relay.db`.
   */
  databaseUrl?: string;
  /**
   * The web client, served at every path the API and the channels do not
   * use; without it the relay serves the API alone. The relay does not
   * build it: the CLI passes `webClient()` from `web/mod.ts`.
   */
  web?: WebRoutes;
  /** Attachment caps and lifetime (default DEFAULT_ATTACHMENT_POLICY). */
  attachments?: AttachmentPolicy;
  /**
   * The VAPID key pair (`VAPID_*`); default: generated once and kept in
   * `<dataDir>/vapid.json`.
   */
  vapidKeys?: VapidKeys | null;
  /** The VAPID contact with generated keys (`VAPID_SUBJECT`). */
  vapidSubject?: string;
  /**
   * Push endpoint origins the relay calls although they are http or private
   * (`BATON_PUSH_ALLOW_ORIGINS`: tests, a push service on the LAN).
   */
  pushAllowedOrigins?: string[];
  tunnelOrigin?: string; // BATON_TUNNEL_ORIGIN: previews' own origin (relay/tunnel_origin.ts)
  metricsToken?: string; // BATON_METRICS_TOKEN: scrapers' bearer token (relay/operations.ts)
}

/** A browser client the relay serves beside its API. */
export interface WebRoutes {
  /** Its pages, script, styles and icons. */
  routes: Hono;
  /** What a browser gets for a path no route serves (the app, or its "not found"). */
  page(path: string, search: string): Response;
}

/** A relay built as a value: the Hono app, its live hub and a way to close it. */
export interface Relay {
  app: Hono<RelayEnv>;
  hub: Hub;
  /** The relay's data, as its modules use it. */
  store: AsyncStore;
  /** The SQLite database under it (tests look inside); null on PostgreSQL. */
  db: Database | null;
  /** The bus between relay nodes (a LocalBus without `busUrl`). */
  bus: Bus;
  /**
   * Every route the relay serves, method and path (the API's are loaded for
   * it if no request has loaded them yet).
   */
  routes(): Promise<{ method: string; path: string }[]>;
  /** Uploaded files and their sweep. */
  attachments: Attachments;
  readiness: Readiness; // the checks of GET /ready: the store's, and what the wiring adds (bus)
  /** `Deno.serve` handler (passes connection info through to the app). */
  fetch: (req: Request, info?: Deno.ServeHandlerInfo) => Response | Promise<Response>;
  /** Closes every socket and the database. */
  close(): Promise<void>;
}

/** Every HTTP API route is under this path; nothing under it is a page of the web client. */
const API_PREFIX = "/api";

/** Builds the relay: opens the store, sets up accounts and wires every route. */
export async function createRelay(options: RelayOptions): Promise<Relay> {
  // First: a bus that cannot be reached stops the start before anything is opened.
  const bus = await openBus(options.bus, options.log ? { log: options.log } : {});
  await Deno.mkdir(options.dataDir, { recursive: true, mode: 0o700 }); // its secrets: owner-only
  const opened = await openRelayStore({
    dataDir: options.dataDir,
    ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
    ...(options.store ? { custom: options.store } : {}),
    ...(options.log ? { log: options.log } : {}),
  });
  const { store } = opened;
  const fixed = await makePrivate(options.dataDir); // older versions left files readable by others
  if (fixed > 0) options.log?.(`made ${fixed} files and folders in the data folder owner-only`);
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const access = browserAccess({
    baseUrl,
    ...(options.port ? { port: options.port } : {}),
    allowedHosts: options.allowedHosts ?? [],
    trustedOrigins: options.trustedOrigins ?? [],
  });
  // Nodes on one PostgreSQL must share these keys: a node with others stops here.
  const { secret, vapid } = await nodeKeys(options, opened.pgPool ? store : null);
  const allowSignup = options.allowSignup ?? false;
  const auth = createAuth({
    db: opened.db,
    ...(opened.pgPool ? { pgPool: opened.pgPool } : {}),
    store,
    baseUrl,
    secret,
    allowSignup,
    trustedOrigins: access.origins,
    limits: opened.limits,
  });
  const allowedOrigins = new Set(options.pushAllowedOrigins ?? []);
  const pushSender = new PushSender({ keys: vapid, allowedOrigins });
  const meter = new RelayMeter();
  const busMeter = options.bus ? new BusMeter(bus) : null; // alone, the hub never sees the bus
  const hub = new Hub({
    store,
    commit: meter.metered(opened.commit),
    eventBufferSize: options.eventBufferSize ?? 1000,
    baseUrl,
    principalLive: auth.principalLive,
    ...(options.retention ? { retention: options.retention } : {}),
    ...(opened.reclaimSpace ? { reclaimSpace: opened.reclaimSpace } : {}),
    ...(opened.truncateWal ? { truncateWal: opened.truncateWal } : {}),
    ...(options.log ? { log: options.log } : {}),
    pushSend: (target, payload, delivery) => pushSender.send(target, payload, delivery),
    ...(busMeter ? { bus: busMeter.metered() } : {}),
  });
  await hub.start();
  const triggers = new Triggers({ store, sessions: hub.sessions });
  triggers.start();
  const runnerServices = new RunnerServices({ viewersOf: (u) => hub.fanout.viewersOf(u) });
  const runnerCalls = withSubagentCalls(
    new TriggerCalls(triggers, store, runnerServices),
    hub.subagents,
  );
  const listeners = new TriggerListeners({
    store,
    triggers,
    runners: hub.runners,
    log: hub.log.bind(hub),
  });
  const webhooks = new Webhooks({
    store,
    triggers,
    sessions: hub.sessions,
    runners: hub.runners,
    box: await SecretBox.fromSecret(secret, "baton webhook secrets"),
    baseUrl,
    connectTimeoutMs: options.webhookConnectTimeoutMs ?? 15_000,
    ...(options.webhookFiresPerMinute ? { firesPerMinute: options.webhookFiresPerMinute } : {}),
    limits: opened.limits,
  });
  const attachments = new Attachments({
    store,
    dir: join(options.dataDir, "attachments"),
    ...(options.attachments ? { policy: options.attachments } : {}),
    ...(options.log ? { log: options.log } : {}),
  });
  await attachments.start();
  const { originAllowed } = access;
  const trustProxy = options.trustProxy ?? false;

  const app = new Hono<RelayEnv>();
  const ops = relayOperations(app, { storeAnswers: opened.answers, hub, meter, busMeter, options }); // counts every answer: first

  const onError: ErrorHandler<RelayEnv> = (err, c) => {
    if (err instanceof RelayError) return relayErrorResponse(c, err);
    if (err instanceof HttpError) {
      return errorResponse(c, err.status, err.code, err.message, err.headers);
    }
    // better-auth refusals raised inside our routes (a sign-up racing the
    // first account, a duplicate email) keep their status and code.
    if (auth.isAuthRefusal(err) && err.statusCode >= 400 && err.statusCode < 500) {
      const body = err.body as { code?: string; message?: string } | undefined;
      return errorResponse(
        c,
        err.statusCode as ContentfulStatusCode,
        (body?.code ?? "auth_error").toLowerCase(),
        body?.message ?? err.message,
      );
    }
    const path = redactGrants(c.req.path);
    options.log?.(`internal error on ${c.req.method} ${path}: ${err?.stack ?? err}`);
    return errorResponse(c, 500, "internal", "Internal error");
  };
  app.onError(onError);
  app.notFound((c) => {
    // A browser opening an address of its own (a mistyped one, a bookmark,
    // `/settings/`) gets the app rather than a page of JSON.
    if (options.web && isPageRequest(c.req.raw, c.req.path)) {
      return options.web.page(c.req.path, new URL(c.req.url).search);
    }
    return errorResponse(c, 404, "not_found", `No route: ${c.req.method} ${c.req.path}`);
  });

  // Behind https, browsers are told to use nothing else for a year (the
  // relay's own host only: other names under its domain may serve http).
  const hsts = baseUrl.startsWith("https:");
  app.use("*", async (c, next) => {
    await next();
    c.header("x-content-type-options", "nosniff");
    c.header("referrer-policy", "same-origin");
    if (hsts) c.header("strict-transport-security", "max-age=31536000");
  });
  app.use("*", tunnelOriginMiddleware(hub.tunnels, auth, { ...options, baseUrl, secret })); // before the host check
  // A page on a name that an attacker points at a loopback relay (DNS
  // rebinding) reaches it with its own name as Host: refused before anything.
  if (options.hostCheck) {
    app.use("*", async (c, next) => {
      if (!access.hostAllowed(c.req.raw)) {
        const host = c.req.header("host") ?? "";
        throw new HttpError(
          421,
          "bad_host",
          `This relay does not answer to the host name: '${
            host.slice(0, 200)
          }' (see --allowed-hosts)`,
        );
      }
      await next();
    });
  }

  const health: Handler<RelayEnv> = (c) => c.json({ status: "ok" } satisfies HealthResponse);
  app.get("/health", health);
  app.route("/", ops.routes); // GET /ready, GET /metrics
  // The API is loaded on its first request (see api.ts).
  let api: Promise<ReturnType<typeof apiRoutes>> | null = null;
  const loadApi = () =>
    api ??= import("./api.ts").then((m) =>
      m.apiRoutes({
        auth,
        store,
        hub,
        triggers,
        listeners,
        webhooks,
        runnerServices,
        allowSignup,
        trustProxy,
        originAllowed,
        attachments,
        onError,
        health,
        push: { publicKey: vapid.publicKey, allowedOrigins },
      })
    ).catch((err) => {
      api = null;
      throw err;
    });
  app.all(`${API_PREFIX}/*`, async (c) => (await loadApi()).fetch(c.req.raw, c.env));

  app.route(
    "/",
    socketRoutes({
      auth,
      hub,
      calls: runnerCalls,
      originAllowed,
      trustProxy,
      ...(options.upgrade ? { upgrade: options.upgrade } : {}),
      ...(options.wsAuthTimeoutMs ? { authTimeoutMs: options.wsAuthTimeoutMs } : {}),
    }),
  );
  if (options.web) app.route("/", options.web.routes);

  let closed = false;
  return {
    app,
    hub,
    store,
    db: opened.db,
    bus,
    async routes() {
      const all = [...app.routes, ...(await loadApi()).routes];
      const seen = new Set<string>();
      return all.filter((r) => {
        const key = `${r.method} ${r.path}`;
        if (r.method === "ALL" || seen.has(key)) return false;
        seen.add(key);
        return true;
      }).map(({ method, path }) => ({ method, path }));
    },
    attachments,
    readiness: ops.readiness,
    fetch: (req, info) => app.fetch(req, info),
    async close() {
      if (closed) return;
      closed = true;
      triggers.close();
      ops.close();
      await attachments.close();
      await hub.close();
      await bus.close();
      await opened.close();
    },
  };
}

/**
 * Whether a request no route answered is a browser opening a page: a GET or
 * HEAD preferring HTML, not a WebSocket handshake, outside the API and the
 * channels. API clients (JSON, or anything under /api/) keep the JSON 404.
 */
function isPageRequest(req: Request, path: string): boolean {
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  if (req.headers.has("upgrade")) return false;
  const under = (prefix: string) => path === prefix || path.startsWith(`${prefix}/`);
  if ([API_PREFIX, RUNNER_WS_PATH, VIEWER_WS_PATH, TUNNEL_WS_PATH, TERMINAL_WS_PATH].some(under)) {
    return false;
  }
  return prefersHtml(req.headers.get("accept"));
}
