/**
 * The relay: HTTP API, runner control channel, viewer channel and the
 * durable session event log. {@linkcode createRelay} builds it as a value;
 * {@linkcode serveRelay} listens with it; the CLI calls those.
 *
 * @module
 */
export { createRelay, type Relay, type RelayOptions } from "./app.ts";
export { Hub } from "./hub.ts";
export { DEFAULT_RETENTION, type RetentionPolicy } from "./retention.ts";
export { type AttachmentPolicy, DEFAULT_ATTACHMENT_POLICY } from "./attachments.ts";
export {
  CONNECTION_DEFAULTS,
  environmentForChildren,
  type ServedRelay,
  serveRelay,
} from "./serve.ts";
export { createKey, hashKey } from "./keys.ts";
export { DEFAULT_VAPID_SUBJECT, vapidFromEnv, type VapidKeys } from "./push_keys.ts";
export type { AsyncStore, Store } from "./store/mod.ts";
export type { BusConfig } from "./bus/mod.ts";
