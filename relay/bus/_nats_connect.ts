/**
 * Connects to NATS like `connect` of `@nats-io/transport-node`, with one
 * difference: its sockets never raise an `error` that nothing listens to.
 *
 * The client's Node transport removes every listener of its socket at two
 * points of the handshake (after the TCP connect, and after reading the
 * server's INFO) and adds its own again a moment later. A reset that the
 * socket reports in between (a server refusing the node's credentials
 * closes the connection right after its INFO) is an `error` event with no
 * listener, which Node's event emitter throws: an uncaught exception that
 * ended the process (seen in the bus tests). Such an error is dropped here;
 * the `close` event that always follows it tells the transport, which then
 * fails the connection attempt (or reconnects) as it does for any close.
 *
 * @module
 */
import {
  type ConnectionOptions,
  type NatsConnection,
  NatsConnectionImpl,
  setTransportFactory,
} from "@nats-io/transport-node";
import { nodeResolveHost, NodeTransport } from "@nats-io/transport-node/lib/node_transport.js";
import { checkServerIdentity as nodeCheckServerIdentity, type PeerCertificate } from "node:tls";

type Socket = {
  emit(event: string | symbol, ...args: unknown[]): boolean;
  listenerCount(event: string | symbol): number;
};
type HostPort = Parameters<NodeTransport["dial"]>[0];
type ServerAddress = Parameters<NodeTransport["connect"]>[0];

/** Drops an `error` event that no listener would receive (its `close` follows). */
export function guardSocket<S extends Socket>(socket: S): S {
  const emit = socket.emit;
  socket.emit = function (this: S, event: string | symbol, ...args: unknown[]): boolean {
    if (event === "error" && this.listenerCount("error") === 0) return false;
    return emit.call(this, event, ...args);
  };
  return socket;
}

/**
 * The client's Node transport with guarded sockets, and with the server's
 * certificate checked against the host it was asked for: the client names a
 * server given by IP address no TLS server name, and Node then checks the
 * certificate against "localhost" (an IP certificate is refused, any
 * "localhost" one taken).
 */
class GuardedTransport extends NodeTransport {
  override connect(hp: ServerAddress, options: ConnectionOptions): Promise<void> {
    const tls = options.tls;
    if (tls && typeof tls === "object") {
      // A name resolved to addresses keeps the name (tlsName); an address is its own name.
      const host = hp.tlsName || hp.hostname.replace(/^\[(.*)\]$/, "$1");
      const checkServerIdentity = (_name: string, cert: PeerCertificate) =>
        nodeCheckServerIdentity(host, cert);
      options = { ...options, tls: { ...tls, checkServerIdentity } as typeof tls };
    }
    return super.connect(hp, options);
  }

  /** The TLS socket that replaces the dialled one is guarded too (a server refusing this node's certificate). */
  override async startTLS(): ReturnType<NodeTransport["startTLS"]> {
    return guardSocket(await super.startTLS());
  }

  override dial(hp: HostPort): ReturnType<NodeTransport["dial"]> {
    const dialed = super.dial(hp);
    // The connect callback resolves and then removes the dial's listeners: the
    // guard is in place before any later I/O event can be emitted.
    void dialed.then((socket: Socket) => guardSocket(socket), () => {});
    return dialed;
  }
}

/** Opens a connection to NATS whose sockets are guarded (see the module's note). */
export function connectGuarded(options: ConnectionOptions): Promise<NatsConnection> {
  setTransportFactory({ factory: () => new GuardedTransport(), dnsResolveFn: nodeResolveHost });
  return NatsConnectionImpl.connect(options);
}
