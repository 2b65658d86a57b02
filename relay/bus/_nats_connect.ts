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
 * The upgrade to TLS is this module's own for the same reason: the client's
 * upgrade throws from a `secureConnect` listener when the session is not
 * authorized, and leaves the TLS socket without listeners once it is up, so a
 * server's alert refusing this node's certificate (TLS 1.3 sends it after the
 * handshake) ended the process now and then instead of failing the connect.
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
import {
  checkServerIdentity as nodeCheckServerIdentity,
  connect as tlsConnect,
  type ConnectionOptions as TlsConnectionOptions,
  type PeerCertificate,
  type TLSSocket,
} from "node:tls";

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

  /**
   * Upgrades the dialled socket to TLS (checked against the CAs given, or the
   * system's), with this node's certificate when it has one. The TLS socket
   * is guarded from the start, and a failed handshake rejects (its error, or
   * the close) instead of throwing.
   */
  override async startTLS(): Promise<TLSSocket> {
    const given = typeof this.options.tls === "object" ? this.options.tls : null;
    const files = given ? await this.loadClientCerts() ?? {} : {};
    const options: TlsConnectionOptions = {
      ...given as TlsConnectionOptions | null,
      ...files as TlsConnectionOptions,
      socket: this.socket,
      servername: this.tlsName,
      rejectUnauthorized: true,
    };
    return await new Promise<TLSSocket>((resolve, reject) => {
      let failure: Error | undefined;
      const socket = guardSocket(tlsConnect(options, () => {
        if (!socket.authorized) {
          failure = socket.authorizationError ?? new Error("TLS: the server is not authorized");
          return void socket.destroy();
        }
        socket.off("error", onError);
        socket.off("close", onClose);
        resolve(socket);
      }));
      const onError = (err: Error) => failure ??= err;
      const onClose = () =>
        reject(failure ?? new Error("TLS: the connection closed in its handshake"));
      socket.on("error", onError);
      socket.once("close", onClose);
    });
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
