/**
 * The key a runner's socket names in its first message (the control
 * channel's hello, the tunnel's register): who it belongs to, or why it is
 * refused. One check for both channels, so that neither lets through a key
 * the other refuses.
 *
 * @module
 */
import { CloseCode } from "../shared/protocol.ts";
import type { Principal } from "./auth.ts";

/** A runner id as both runner sockets accept it (and as the tunnel looks one up on the bus). */
export const RUNNER_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Why a runner socket's key is refused: its close code, error code and message. */
export interface KeyRefusal {
  close: number;
  code: string;
  message: string;
}

/** What the check needs of the socket's options. */
export interface RunnerKeyOptions {
  /** The key shown in the handshake's headers, if any: the message must carry the same. */
  headerKey?: string | null;
  /** Resolves an API key or runner token to its owner. */
  principalFromKey: (key: string) => Promise<Principal | null>;
}

/**
 * The owner of `apiKey` when it may connect the runner `runnerId`: a key
 * that exists (the same as the handshake's, when that had one), is not
 * read-only, and is not bound to another runner.
 */
export async function runnerKeyOwner(
  apiKey: unknown,
  runnerId: string,
  options: RunnerKeyOptions,
): Promise<Principal | KeyRefusal> {
  const sameKey = !options.headerKey || apiKey === options.headerKey;
  const principal = typeof apiKey === "string" && sameKey
    ? await options.principalFromKey(apiKey)
    : null;
  if (!principal) {
    return {
      close: CloseCode.unauthorized,
      code: "unauthorized",
      message: "Invalid or revoked API key",
    };
  }
  if (principal.scope === "read") {
    return {
      close: CloseCode.forbidden,
      code: "forbidden_scope",
      message: "A read-only key cannot connect a runner",
    };
  }
  if (principal.runnerId !== null && principal.runnerId !== runnerId) {
    return {
      close: CloseCode.forbidden,
      code: "forbidden_scope",
      message: `This key is bound to another runner: '${principal.runnerId}'`,
    };
  }
  return principal;
}

/** Whether the check refused the key. */
export function refused(r: Principal | KeyRefusal): r is KeyRefusal {
  return "close" in r;
}
