import { createRelay, type Relay, type RelayOptions } from "./app.ts";

/** Options of {@linkcode serveRelay}. */
export interface ServeRelayOptions extends Omit<RelayOptions, "baseUrl"> {
  hostname: string;
  port: number;
  /** Public address; default `http://<host>:<port>` after the port is known. */
  baseUrl?: string;
}

/** A relay listening on a socket. */
export interface ServedRelay {
  relay: Relay;
  /** Where it listens, e.g. `http://127.0.0.1:7420`. */
  url: string;
  baseUrl: string;
  port: number;
  /** Closes sockets, stops accepting requests and closes the database, within ~5 s. */
  shutdown(): Promise<void>;
}

/** Variables serveRelay set for the relay itself, not for the processes it starts. */
const setForThisProcess = new Set<string>();

/**
 * Deno's WebSocket server copies each frame into a per-socket write buffer
 * that keeps the size of the largest frame it ever sent for as long as the
 * socket lives: ~60 KB per viewer after one catch-up, so 1,000 viewers
 * opening a session at once left the relay 180 MB larger. With
 * `DENO_USE_WRITEV` set, it sends header and payload with one `writev`
 * instead and keeps nothing (+66 MB for the same 1,000). Deno reads the
 * variable when the process accepts its first WebSocket, so it is set before
 * listening; a value the operator set (an empty one turns it off) is kept.
 */
function preferVectoredWebSocketWrites(): void {
  try {
    if (Deno.env.get("DENO_USE_WRITEV") !== undefined) return;
    Deno.env.set("DENO_USE_WRITEV", "1");
    setForThisProcess.add("DENO_USE_WRITEV");
  } catch {
    // No env permission: Deno's default (copying) writes.
  }
}

/**
 * This process's environment without the variables serveRelay set for its
 * own use, for child processes (the local runner of `baton up`), which must
 * see the environment the operator gave.
 */
export function environmentForChildren(): Record<string, string> {
  const env = Deno.env.toObject();
  for (const name of setForThisProcess) delete env[name];
  return env;
}

/**
 * Listens first (so port 0 resolves to a real port), then builds the relay
 * with a base URL that names that port.
 */
export async function serveRelay(options: ServeRelayOptions): Promise<ServedRelay> {
  preferVectoredWebSocketWrites();
  let relay: Relay | null = null;
  const server = Deno.serve({
    hostname: options.hostname,
    port: options.port,
    onListen: () => {},
  }, (req, info) => relay ? relay.fetch(req, info) : new Response("Starting", { status: 503 }));
  const port = server.addr.port;
  const shownHost = options.hostname.includes(":") ? `[${options.hostname}]` : options.hostname;
  const url = `http://${shownHost}:${port}`;
  const wildcard = options.hostname === "0.0.0.0" || options.hostname === "::";
  const baseUrl = options.baseUrl ?? (wildcard ? `http://localhost:${port}` : url);
  try {
    // On a loopback address, only the relay's own names are answered: a
    // browser page cannot reach it under a name of its choosing.
    const loopback = /^(localhost|127\.\d+\.\d+\.\d+|::1|\[::1\])$/i.test(options.hostname);
    relay = await createRelay({ hostCheck: loopback, ...options, baseUrl, port });
  } catch (err) {
    await server.shutdown();
    throw err;
  }
  const built = relay;
  let done: Promise<void> | null = null;
  return {
    relay: built,
    url,
    baseUrl,
    port,
    shutdown() {
      done ??= (async () => {
        await built.hub.close();
        const deadline = new Promise<void>((r) => setTimeout(r, 5000));
        await Promise.race([server.shutdown(), deadline]);
        await built.close();
      })();
      return done;
    },
  };
}
