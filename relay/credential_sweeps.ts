/**
 * Closing sockets whose credentials no longer hold: a key revoked through
 * the API at once, and every lapsed browser session or key on a sweep.
 *
 * @module
 */
import { CloseCode } from "../shared/protocol.ts";
import { type Clock, systemClock } from "./_clock.ts";
import type { Credential } from "./auth.ts";

/** How often open sockets' credentials are checked for expiry (ms). */
export const CREDENTIAL_SWEEP_MS = 10_000;

/** A runner socket as the sweeps see it. */
export interface SweptLink {
  readonly userId: string;
  readonly keyId: string | null;
  close(code: number, reason: string): void;
}

/** A viewer socket as the sweeps see it. */
export interface SweptViewer {
  /** Replaced when the browser session it was opened with is carried over (see carryOver). */
  principal: Credential & { readonly userId: string };
  close(code: number, reason: string): void;
}

/** Options of {@linkcode CredentialSweeps}. */
export interface CredentialSweepsOptions {
  links: () => Iterable<SweptLink>;
  /** Every viewer, or those of one user. */
  viewers: (userId?: string) => Iterable<SweptViewer>;
  /**
   * Whether what a socket was opened with (browser session, key) still
   * holds; given, `start` closes the sockets whose credentials lapsed every
   * CREDENTIAL_SWEEP_MS.
   */
  principalLive?: (c: Credential) => Promise<boolean>;
  clock?: Clock;
}

/** Closes runner and viewer sockets whose key or browser session is gone. */
export class CredentialSweeps {
  readonly #opts: CredentialSweepsOptions;
  readonly #clock: Clock;
  #timer: number | null = null;

  constructor(options: CredentialSweepsOptions) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** Starts the periodic sweep (when `principalLive` was given). */
  start(): void {
    const live = this.#opts.principalLive;
    if (!live || this.#timer !== null) return;
    // A lookup that failed (the store out of reach) is tried again at the next sweep.
    this.#timer = this.#clock.setInterval(
      () => void this.closeLapsed(live).catch(() => {}),
      CREDENTIAL_SWEEP_MS,
    );
  }

  /** Closes every socket opened with a key that was just revoked. */
  revokeKey(keyId: string): void {
    for (const link of [...this.#opts.links()]) {
      if (link.keyId === keyId) link.close(CloseCode.revoked, "API key revoked");
    }
    for (const v of [...this.#opts.viewers()]) {
      if (v.principal.keyId === keyId) v.close(CloseCode.revoked, "API key revoked");
    }
  }

  /**
   * Moves the viewer sockets of `userId` opened with browser session `from`
   * to session `to`: the same browser was handed `to` in place of `from` (a
   * password change that signs out every session gives the one that made it
   * a new one), so its sockets stay open while the others close.
   */
  carryOver(userId: string, from: string, to: string): void {
    for (const v of this.#opts.viewers(userId)) {
      if (v.principal.via === "cookie" && v.principal.authSessionId === from) {
        v.principal = { ...v.principal, authSessionId: to };
      }
    }
  }

  /**
   * Closes the runner and viewer sockets (all, or those of `userId`) whose
   * browser session or key no longer holds: expired, signed out, revoked by
   * a password change, or removed some way the relay was not told of. Code
   * 4401; each credential is looked up once.
   */
  async closeLapsed(live: (c: Credential) => Promise<boolean>, userId?: string): Promise<void> {
    const seen = new Map<string, Promise<boolean>>();
    const holds = (c: Credential): Promise<boolean> => {
      const id = `${c.via}:${c.via === "key" ? c.keyId : c.authSessionId}`;
      let ok = seen.get(id);
      if (ok === undefined) seen.set(id, ok = live(c));
      return ok;
    };
    const links = [...this.#opts.links()].filter((link) =>
      link.keyId !== null && (userId === undefined || link.userId === userId)
    );
    const viewers = [...this.#opts.viewers(userId)];
    await Promise.all([
      ...links.map(async (link) => {
        if (!await holds({ via: "key", keyId: link.keyId, authSessionId: null })) {
          link.close(CloseCode.revoked, "API key expired or revoked");
        }
      }),
      ...viewers.map(async (v) => {
        if (await holds(v.principal)) return;
        v.close(
          CloseCode.revoked,
          v.principal.via === "cookie"
            ? "Signed out or session expired"
            : "API key expired or revoked",
        );
      }),
    ]);
  }

  /** Stops the periodic sweep. */
  close(): void {
    if (this.#timer !== null) this.#clock.clearInterval(this.#timer);
    this.#timer = null;
  }
}
