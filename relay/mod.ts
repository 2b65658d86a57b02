/**
 * The relay: HTTP API, runner control channel, viewer channel and the
 * durable session event log. {@linkcode createRelay} builds it as a value;
 * the CLI serves it.
 *
 * @module
 */
export { createRelay, type Relay, type RelayOptions } from "./app.ts";
export { Hub } from "./hub.ts";
