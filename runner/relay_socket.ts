/**
 * The runner's WebSocket to the relay, on npm:ws rather than Deno's built-in
 * client. Deno's client turns Nagle's algorithm on (TCP_NODELAY off) and
 * writes a frame's header and its payload in two sends once the payload is
 * over about 1 KB. The relay answers every batch of events with an ack, so
 * its kernel holds back bare TCP ACKs to ride on that answer, and the
 * payload waits for the ACK of the header: up to 40 ms on a tool output or a
 * batch of events (measured: a viewer's p90 of 42 ms at 100 events/s, 2 ms
 * with this client). ws sets TCP_NODELAY on its socket.
 *
 * @module
 */
import WebSocket from "ws";
import { MAX_WS_MESSAGE_BYTES } from "../shared/protocol.ts";

/** An open or opening connection to the relay. */
export type RelaySocket = WebSocket;

/** `readyState` of an open socket. */
export const OPEN = WebSocket.OPEN;

/** Dials `url` (`ws(s)://host/_runner`); a handshake not done within `handshakeMs` fails. */
export function openRelaySocket(
  url: string,
  handshakeMs = 15_000,
  headers: Record<string, string> = {},
): RelaySocket {
  return new WebSocket(url, {
    headers,
    perMessageDeflate: false,
    handshakeTimeout: handshakeMs,
    maxPayload: MAX_WS_MESSAGE_BYTES,
  });
}
