/**
 * Wire types of the tunnel channel (`/_tunnel`) and of the HTTP tunnel
 * built on its streams (docs/protocol.md, "Tunnel channel").
 *
 * @module
 */

/** Where the runner dials its tunnel channel. */
export const TUNNEL_WS_PATH = "/_tunnel";

/**
 * Largest tunnel message: a frame carries at most 64 KiB of body
 * (shared/streams.ts) or a 64 KiB request head, so 1 MiB leaves room and
 * still refuses a peer that tries to make the relay buffer more.
 */
export const MAX_TUNNEL_MESSAGE_BYTES = 1024 * 1024;

/** Largest register message before the socket authenticated. */
export const MAX_TUNNEL_REGISTER_BYTES = 16 * 1024;

/** The runner's first message on the tunnel channel (text). */
export interface TunnelRegister {
  t: "register";
  apiKey: string;
  runnerId: string;
}

/** The relay's answer to an accepted register (text); binary frames follow. */
export interface TunnelRegistered {
  t: "registered";
}

/** What the relay sends as the open payload of an HTTP stream (JSON). */
export interface TunnelRequestHead {
  /** Always `http` for now (the terminal and services will add kinds). */
  kind: "http";
  method: string;
  /** The loopback port on the runner, 1–65535. */
  port: number;
  /** Path and query on the service, starting with `/`. */
  path: string;
  headers: [string, string][];
}

/**
 * The first bytes the runner writes back on an HTTP stream: a 4-byte
 * big-endian length, then this JSON; the response body follows.
 */
export type TunnelResponseHead =
  | { status: number; headers: [string, string][] }
  | { error: { code: "port_closed" | "bad_target" | "upstream_error"; message: string } };

/** Largest response head the relay accepts. */
export const MAX_TUNNEL_HEAD_BYTES = 64 * 1024;

/** Request headers never forwarded to the service (credentials of the relay, hop-by-hop). */
export const TUNNEL_STRIPPED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  "cookie",
  "authorization",
  "x-api-key",
  "host",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "upgrade",
  "proxy-authorization",
  "proxy-connection",
  "content-length",
  "accept-encoding",
]);

/** Response headers not passed back (hop-by-hop; the relay frames the body itself). */
export const TUNNEL_STRIPPED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "proxy-connection",
]);

/** Encodes a response head as it travels: 4-byte length, then JSON. */
export function encodeResponseHead(head: TunnelResponseHead): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(head));
  const out = new Uint8Array(4 + json.byteLength);
  new DataView(out.buffer).setUint32(0, json.byteLength);
  out.set(json, 4);
  return out;
}
