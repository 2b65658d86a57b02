/**
 * The bus between relay nodes: requests to the node that holds a runner's
 * control socket, committed events and state changes to every node, and who
 * is up. {@linkcode LocalBus} is the one-process default (the embedded relay);
 * `NatsBus` (nats_bus.ts) talks over a nats-server and is imported only when
 * {@linkcode openBus} is given a URL, so a relay without one never loads the
 * NATS client. docs/scaling.md, "The bus between nodes", has the subjects,
 * message shapes, limits and failure behaviour.
 *
 * @module
 */
import { LocalBus } from "./local_bus.ts";
import type { Bus, BusConfig, BusOptions } from "./types.ts";

export { LocalBus } from "./local_bus.ts";
export type * from "./types.ts";

/** A {@linkcode LocalBus} without a config; a `NatsBus` connected to `config.url`. */
export async function openBus(
  config: BusConfig | undefined,
  options: BusOptions = {},
): Promise<Bus> {
  if (!config) return new LocalBus(options);
  const { NatsBus } = await import("./nats_bus.ts");
  return await NatsBus.connect(config, options);
}
