/**
 * What the relay, the runner, the web client and the CLI share: the HTTP API's
 * types, the wire protocol, event and conversation shapes, trigger filters,
 * webhook signing, backoff and command-line flags. Nothing here imports a role.
 *
 * @module
 */
export * from "./api.ts";
export * from "./backoff.ts";
export * from "./bytes.ts";
export * from "./conversation.ts";
export * from "./events.ts";
export * from "./flags.ts";
export * from "./json.ts";
export * from "./protocol.ts";
export * from "./triggers.ts";
export * from "./webhook_signing.ts";
export * from "./single_file.ts";
