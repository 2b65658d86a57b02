/**
 * Two relay nodes' buses for the bus tests: the same suite registered once
 * for LocalBus (one node, so A and B are the same bus) and once for NatsBus
 * (two nodes on a private nats-server, ignored where it is not installed),
 * and a pair of NatsBus nodes for the tests only a real server can show.
 *
 * @module
 */
import { type Bus, type BusOptions, LocalBus } from "../../relay/bus/mod.ts";
import { NatsBus } from "../../relay/bus/nats_bus.ts";
import { NATS_SERVER, NatsServer } from "./nats.ts";

/** Two nodes' buses (the same one for LocalBus: it is one node). */
export interface BusNodes {
  a: Bus;
  b: Bus;
  /** The nats-server of NatsBus; null for LocalBus. */
  server: NatsServer | null;
  close(): Promise<void>;
}

/** Two NatsBus nodes on one server; disposing closes both. */
export interface NatsNodes extends AsyncDisposable {
  a: NatsBus;
  b: NatsBus;
}

/** Options of {@linkcode natsNodes}. */
export interface NatsNodesOptions extends BusOptions {
  /** Where node A connects instead of the server (e.g. a CutProxy's URL, to cut A off). */
  aUrl?: string | undefined;
}

/** Connects nodes A and B to `server` with the same bus options. */
export async function natsNodes(
  server: NatsServer,
  options: NatsNodesOptions = {},
): Promise<NatsNodes> {
  const { aUrl, ...busOptions } = options;
  const a = await NatsBus.connect(aUrl ?? server.url, busOptions);
  let b: NatsBus;
  try {
    b = await NatsBus.connect(server.url, busOptions);
  } catch (err) {
    await a.close();
    throw err;
  }
  return {
    a,
    b,
    async [Symbol.asyncDispose]() {
      await a.close();
      await b.close();
    },
  };
}

/**
 * Registers `name` once per bus: "LocalBus: name" and "NatsBus: name" (a
 * private server and two nodes with `options`), each closed after `fn`.
 */
export function eachBus(
  name: string,
  fn: (nodes: BusNodes) => Promise<void>,
  options: BusOptions = {},
): void {
  const implementations = [
    {
      name: "LocalBus",
      ignore: false,
      open(): Promise<BusNodes> {
        const bus = new LocalBus();
        return Promise.resolve({ a: bus, b: bus, server: null, close: () => bus.close() });
      },
    },
    {
      name: "NatsBus",
      ignore: !NATS_SERVER,
      async open(): Promise<BusNodes> {
        const server = await NatsServer.start();
        const { a, b } = await natsNodes(server, options);
        return {
          a,
          b,
          server,
          async close() {
            await a.close();
            await b.close();
            await server.stop();
          },
        };
      },
    },
  ];
  for (const impl of implementations) {
    Deno.test({
      name: `${impl.name}: ${name}`,
      ignore: impl.ignore,
      async fn() {
        const nodes = await impl.open();
        try {
          await fn(nodes);
        } finally {
          await nodes.close();
        }
      },
    });
  }
}
