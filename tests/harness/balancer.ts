/**
 * A TCP balancer in front of relay nodes, as a load balancer would stand in
 * front of a cluster: each new connection goes to the first node, in order,
 * that accepts it; connections to a node that dies drop, and their
 * reconnections reach the next live one.
 *
 * @module
 */

/** A balancer on a free loopback port. */
export class Balancer {
  readonly #listener: Deno.TcpListener;
  readonly #open = new Set<Deno.TcpConn>();
  readonly #accepting: Promise<void>;
  /** The nodes' loopback ports, in the order they are tried. */
  targets: readonly number[] = [];

  private constructor(listener: Deno.TcpListener) {
    this.#listener = listener;
    this.#accepting = this.#accept();
  }

  /** A balancer with no nodes yet (see `targets`): its address can be given to them first. */
  static start(): Balancer {
    return new Balancer(Deno.listen({ hostname: "127.0.0.1", port: 0 }));
  }

  /** Its address, as the nodes' `BATON_ALLOWED_HOSTS` names it. */
  get host(): string {
    return `127.0.0.1:${this.#listener.addr.port}`;
  }

  get url(): string {
    return `http://${this.host}`;
  }

  async #accept(): Promise<void> {
    for await (const conn of this.#listener) this.#pipe(conn).catch(() => {});
  }

  async #upstream(): Promise<Deno.TcpConn | null> {
    for (const port of this.targets) {
      try {
        return await Deno.connect({ hostname: "127.0.0.1", port });
      } catch {
        // Down: the next one.
      }
    }
    return null;
  }

  async #pipe(conn: Deno.TcpConn): Promise<void> {
    const upstream = await this.#upstream();
    if (!upstream) {
      conn.close();
      return;
    }
    this.#open.add(conn).add(upstream);
    await Promise.race([
      conn.readable.pipeTo(upstream.writable, { preventClose: true }).catch(() => {}),
      upstream.readable.pipeTo(conn.writable, { preventClose: true }).catch(() => {}),
    ]);
    for (const c of [conn, upstream]) {
      this.#open.delete(c);
      try {
        c.close();
      } catch {
        // Already closed.
      }
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.#listener.close();
    for (const c of [...this.#open]) {
      try {
        c.close();
      } catch {
        // Already closed.
      }
    }
    await this.#accepting.catch(() => {});
  }
}
