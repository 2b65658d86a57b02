import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import {
  MAX_RUNNER_HELLO_BYTES,
  MAX_VIEWER_AUTH_BYTES,
  MAX_VIEWER_MESSAGE_BYTES,
  MAX_WS_MESSAGE_BYTES,
} from "../shared/protocol.ts";
import { MAX_TUNNEL_MESSAGE_BYTES, MAX_TUNNEL_REGISTER_BYTES } from "../shared/tunnel_api.ts";
import { MAX_TERMINAL_MESSAGE_BYTES } from "../shared/terminal_api.ts";
import { MAX_TUNNEL_WS_MESSAGE_BYTES } from "../shared/tunnel_ws_api.ts";
import { AddressCounter } from "./address_limits.ts";
import { createRelay, type Relay, type RelayOptions } from "./app.ts";
import {
  connectionInfo,
  peerAddress,
  toRequest,
  writeRawResponse,
  writeResponse,
} from "./_node_http.ts";
import { WsTransport } from "./ws_transport.ts";

/** Options of {@linkcode serveRelay}. */
export interface ServeRelayOptions extends Omit<RelayOptions, "baseUrl" | "upgrade"> {
  hostname: string;
  port: number;
  /** Public address; default `http://<host>:<port>` after the port is known. */
  baseUrl?: string;
  /** Time a client has to send a request's headers; default 15 s. */
  headersTimeoutMs?: number;
  /** Open TCP connections per client address (0: no limit); default 4096. */
  maxConnectionsPerAddress?: number;
  /** WebSockets not yet authenticated per client address (0: no limit); default 256. */
  maxUnauthenticatedSocketsPerAddress?: number;
  /**
   * How long {@linkcode ServedRelay.shutdown} keeps serving with `GET /ready`
   * at 503 before it closes anything, so a load balancer moves traffic to
   * the other nodes first (`BATON_SHUTDOWN_DRAIN_MS`); default 0.
   */
  shutdownDrainMs?: number;
}

/** Defaults of the connection limits (docs/configuration.md). */
export const CONNECTION_DEFAULTS = {
  headersTimeoutMs: 15_000,
  maxConnectionsPerAddress: 4096,
  maxUnauthenticatedSocketsPerAddress: 256,
} as const;

/** A relay listening on a socket. */
export interface ServedRelay {
  relay: Relay;
  /** Where it listens, e.g. `http://127.0.0.1:7420`. */
  url: string;
  baseUrl: string;
  port: number;
  /**
   * Turns `GET /ready` to 503 (draining), keeps serving for the drain period
   * (`shutdownDrainMs`, cut short when `cut` settles), then closes sockets,
   * stops accepting requests and closes the database, within ~5 s more.
   * Called again, it answers the first call's promise (its `cut` counts).
   */
  shutdown(cut?: Promise<unknown>): Promise<void>;
}

/**
 * This process's environment, for child processes (the local runner of
 * `baton up`). The relay sets no variable for itself (it did set
 * `DENO_USE_WRITEV` while it served WebSockets with Deno's own server).
 */
export function environmentForChildren(): Record<string, string> {
  return Deno.env.toObject();
}

/**
 * Listens first (so port 0 resolves to a real port), then builds the relay
 * with a base URL that names that port.
 *
 * The relay is served by node:http, not Deno.serve: only there does a
 * WebSocket upgrade come with its raw socket, which npm:ws needs to refuse
 * a message over the limit from its frame header (see ws_transport.ts; the
 * cost in HTTP throughput is measured in docs/performance.md). node:http
 * also gives the header timeout and the per-address connection count.
 */
export async function serveRelay(options: ServeRelayOptions): Promise<ServedRelay> {
  const log = options.log ?? (() => {});
  const transport = new WsTransport({
    maxMessageBytes: {
      viewer: MAX_VIEWER_MESSAGE_BYTES,
      runner: MAX_WS_MESSAGE_BYTES,
      tunnel: MAX_TUNNEL_MESSAGE_BYTES,
      terminal: MAX_TERMINAL_MESSAGE_BYTES,
      preview: MAX_TUNNEL_WS_MESSAGE_BYTES,
    },
    idleSeconds: { viewer: 60, runner: 30, tunnel: 30, terminal: 60, preview: 60 },
    firstMessageBytes: {
      viewer: MAX_VIEWER_AUTH_BYTES,
      runner: MAX_RUNNER_HELLO_BYTES,
      tunnel: MAX_TUNNEL_REGISTER_BYTES,
      // Authenticated by its cookie at the handshake, or refused there.
      terminal: MAX_TERMINAL_MESSAGE_BYTES,
      // A tunnelled WebSocket is authorised at its handshake (cookie or preview grant).
      preview: MAX_TUNNEL_WS_MESSAGE_BYTES,
    },
    unauthenticatedPerAddress: options.maxUnauthenticatedSocketsPerAddress ??
      CONNECTION_DEFAULTS.maxUnauthenticatedSocketsPerAddress,
  });
  let relay: Relay | null = null;
  const server = listenHttp({
    headersTimeoutMs: options.headersTimeoutMs ?? CONNECTION_DEFAULTS.headersTimeoutMs,
    perAddress: new AddressCounter(
      options.maxConnectionsPerAddress ?? CONNECTION_DEFAULTS.maxConnectionsPerAddress,
    ),
    log,
    fetch: (req, info) =>
      relay ? relay.fetch(req, info) : new Response("Starting", { status: 503 }),
    transport,
  });
  const port = await listen(server, options.hostname, options.port);
  const shownHost = options.hostname.includes(":") ? `[${options.hostname}]` : options.hostname;
  const url = `http://${shownHost}:${port}`;
  const wildcard = options.hostname === "0.0.0.0" || options.hostname === "::";
  const baseUrl = options.baseUrl ?? (wildcard ? `http://localhost:${port}` : url);
  try {
    // On a loopback address, only the relay's own names are answered: a
    // browser page cannot reach it under a name of its choosing.
    const loopback = /^(localhost|127\.\d+\.\d+\.\d+|::1|\[::1\])$/i.test(options.hostname);
    relay = await createRelay({
      hostCheck: loopback,
      ...options,
      baseUrl,
      port,
      upgrade: (req, o) => transport.upgrade(req, o),
    });
  } catch (err) {
    transport.close();
    await stopHttp(server, 0);
    throw err;
  }
  const built = relay;
  let done: Promise<void> | null = null;
  return {
    relay: built,
    url,
    baseUrl,
    port,
    shutdown(cut) {
      done ??= (async () => {
        built.readiness.drain();
        const drainMs = options.shutdownDrainMs ?? 0;
        if (drainMs > 0) {
          let timer: ReturnType<typeof setTimeout> | undefined;
          await Promise.race([
            new Promise((resolve) => timer = setTimeout(resolve, drainMs)),
            // Whatever `cut` settles with ends the drain; the shutdown goes on.
            ...(cut ? [cut.then(() => {}, () => {})] : []),
          ]);
          clearTimeout(timer);
        }
        await built.hub.close();
        await stopHttp(server, 5000);
        transport.close();
        await built.close();
      })();
      return done;
    },
  };
}

interface HttpOptions {
  headersTimeoutMs: number;
  perAddress: AddressCounter;
  log: (line: string) => void;
  fetch: (req: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>) => Response | Promise<Response>;
  transport: WsTransport;
}

/** The node:http server: the header timeout, the per-address cap, requests and upgrades. */
function listenHttp(options: HttpOptions): Server {
  const { perAddress, transport } = options;
  const server = createServer({
    headersTimeout: options.headersTimeoutMs,
    // Node's default of 5 minutes for a whole request (an upload included).
    requestTimeout: 300_000,
    // How often node looks for connections past the header timeout (default 30 s).
    connectionsCheckingInterval: Math.min(1000, options.headersTimeoutMs),
  }, (req, res) => serveRequest(req, res, options.fetch));
  const lastLogged = new Map<string, number>();
  server.on("connection", (socket: Socket) => {
    const address = peerAddress(socket);
    if (!perAddress.tryAcquire(address)) {
      socket.destroy();
      const now = Date.now();
      // Many addresses at their limit (a botnet, or IPv6): forget, rather than grow.
      if (lastLogged.size > 1000) lastLogged.clear();
      if ((lastLogged.get(address) ?? 0) < now - 60_000) {
        lastLogged.set(address, now);
        options.log(
          `refused connections from ${address}: ${perAddress.limit} already open ` +
            "(BATON_MAX_CONNECTIONS_PER_ADDRESS)",
        );
      }
      return;
    }
    socket.once("close", () => perAddress.release(address));
  });
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on("error", () => {});
    const request = toRequest(req)?.request;
    if (!request) {
      socket.end(rawJsonError("400 Bad Request", "bad_request", "Bad request target or headers"));
      return;
    }
    transport.ready().then(() => {
      transport.hold(request, { req, socket, head });
      return options.fetch(request, connectionInfo(socket));
    }).then(
      (response) => transport.isUpgraded(request) ? undefined : writeRawResponse(response, socket),
    ).catch((err) => {
      options.log(`upgrade failed: ${err}`);
      socket.destroy();
    });
  });
  server.on("clientError", (err: Error & { code?: string }, socket: Socket) => {
    // A malformed request or a header timeout: answer if the socket still takes it.
    if (!socket.writable) return socket.destroy();
    const [status, code, message] = err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? ["408 Request Timeout", "header_timeout", "Request headers took too long"]
      : err.code === "HPE_HEADER_OVERFLOW"
      ? [
        "431 Request Header Fields Too Large",
        "headers_too_large",
        "Request target and headers are too large",
      ]
      : ["400 Bad Request", "bad_request", "Malformed HTTP request"];
    socket.end(rawJsonError(status, code, message));
  });
  return server;
}

async function serveRequest(
  req: IncomingMessage,
  res: ServerResponse,
  fetch: HttpOptions["fetch"],
): Promise<void> {
  const made = toRequest(req);
  if (!made) {
    const body = errorJson("bad_request", "Bad request target or headers");
    res.writeHead(400, { "content-type": "application/json" }).end(body);
    return;
  }
  let response: Response;
  try {
    response = await fetch(made.request, connectionInfo(req.socket));
  } catch {
    response = new Response("Internal error", { status: 500 });
  }
  try {
    await writeResponse(response, res);
  } finally {
    made.release();
  }
}

/** The relay's `{error: {code, message}}` body, for answers written before Hono sees a request. */
function errorJson(code: string, message: string): string {
  return JSON.stringify({ error: { code, message } });
}

/** A whole HTTP/1.1 error answer with that body, for a socket node:http gave up on. */
function rawJsonError(status: string, code: string, message: string): string {
  const body = errorJson(code, message);
  return `HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-type: application/json\r\n` +
    `content-length: ${new TextEncoder().encode(body).byteLength}\r\n\r\n${body}`;
}

function listen(server: Server, hostname: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error & { code?: string }) => {
      if (err.code === "EADDRINUSE") {
        reject(new Deno.errors.AddrInUse(`Address already in use: '${hostname}:${port}'`));
      } else if (err.code === "EACCES") {
        reject(new Deno.errors.PermissionDenied(`Permission denied: '${hostname}:${port}'`));
      } else reject(err);
    };
    server.once("error", onError);
    server.listen(port, hostname, () => {
      server.off("error", onError);
      const addr = server.address();
      resolve(typeof addr === "object" && addr ? addr.port : port);
    });
  });
}

/** Stops accepting, lets open requests finish for up to `graceMs`, then cuts the rest. */
function stopHttp(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections();
      resolve();
    }, graceMs);
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
