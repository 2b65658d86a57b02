/**
 * Wire types of live previews (docs/protocol.md "Live previews"): the TCP
 * ports a session's processes listen on, announced by the runner as a
 * session event, opened in the browser through the HTTP tunnel.
 *
 * @module
 */

/** The session event a runner sends when the ports of a session change. */
export const PREVIEW_PORTS_EVENT = "preview_ports";

/** Most ports one announcement lists (a process that opens thousands is cut). */
export const MAX_PREVIEW_PORTS = 32;

/** One listening port of a session's process tree. */
export interface PreviewPort {
  port: number;
  /** The listening process's name (`/proc/<pid>/comm`, `lsof`'s COMMAND), when known. */
  process?: string;
}

/** The body of a `preview_ports` event: every port listening now (empty when none). */
export interface PreviewPortsEvent {
  type: typeof PREVIEW_PORTS_EVENT;
  ports: PreviewPort[];
  [key: string]: unknown;
}

/** The tunnel URL that opens `port` on `runnerId` (docs/api.md "Tunnel"). */
export function previewUrl(runnerId: string, port: number): string {
  return `/api/tunnel/runner/${encodeURIComponent(runnerId)}/${port}/`;
}

/** Whether `n` is a TCP port a person may open (1–65535). */
export function isPort(n: unknown): n is number {
  return Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 65535;
}
