/**
 * Preview grants: what lets a previewed page's own sub-requests (scripts,
 * styles, fetch, its WebSocket) through the HTTP tunnel without the
 * person's session cookie, which such a page must never get.
 *
 * A page under a CSP sandbox runs in an opaque origin, and Chromium sends
 * no cookie at all on its sub-requests (measured in Chromium 156: not a
 * `SameSite=Lax` one, nor `SameSite=None; Secure`, nor a `Partitioned` one,
 * the browser treats them as third-party). So the capability travels in the
 * path: opening `/api/tunnel/runner/{runnerId}/{port}/…` with the session
 * cookie mints a grant, and the page is sent to
 * `/api/tunnel/g/{token}/…`, which answers for that user, runner and port
 * only, never anything else of the relay (docs/security.md, "Tunnel
 * isolation"). With a separate tunnel origin the same grant rides in a
 * cookie of that origin instead, set by a one-time ticket (tunnel_origin.ts).
 *
 * Tokens are random (32 bytes) and kept only as their SHA-256; grants live
 * in memory (a relay restart asks the person to open the preview again),
 * expire after an idle hour and at most a day after they were made, die
 * with the browser session that made them, and each user holds at most
 * {@linkcode MAX_GRANTS_PER_USER} (the oldest goes first).
 *
 * @module
 */

/** A grant's binding: who opened which port of which runner. */
export interface TunnelGrant {
  userId: string;
  runnerId: string;
  port: number;
  /** The better-auth session that made it: signing out ends the grant. */
  authSessionId: string | null;
}

/** Unused for this long, a grant expires (a preview tab left open over lunch survives). */
export const GRANT_IDLE_MS = 60 * 60 * 1000;
/** However used, a grant ends this long after it was made. */
export const GRANT_MAX_MS = 24 * 60 * 60 * 1000;
/** A handoff ticket is spent within this long (one redirect). */
export const TICKET_MS = 60 * 1000;
/** Tickets waiting to be spent, over all users. */
export const MAX_TICKETS = 10_000;
/** Grants one user holds at once: opening the 65th preview forgets the oldest. */
export const MAX_GRANTS_PER_USER = 64;

interface Held extends TunnelGrant {
  created: number;
  lastUsed: number;
}

/** A token's form: 43 characters of base64url (32 bytes). */
export const GRANT_TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Options of {@linkcode TunnelGrants}. */
export interface TunnelGrantsOptions {
  /** The clock (tests). */
  now?: () => number;
}

/** The live grants and handoff tickets, by the hash of their token. */
export class TunnelGrants {
  readonly #grants = new Map<string, Held>();
  readonly #tickets = new Map<string, { grant: string; until: number; next: string }>();
  readonly #now: () => number;

  constructor(options: TunnelGrantsOptions = {}) {
    this.#now = options.now ?? Date.now;
  }

  /** Grants held now (for tests and bounds). */
  get size(): number {
    return this.#grants.size;
  }

  /** Makes a grant; returns its token (shown once, kept hashed). */
  async mint(grant: TunnelGrant): Promise<string> {
    this.#sweep();
    const mine = [...this.#grants].filter(([, g]) => g.userId === grant.userId);
    if (mine.length >= MAX_GRANTS_PER_USER) {
      mine.sort((a, b) => a[1].lastUsed - b[1].lastUsed);
      for (const [h] of mine.slice(0, mine.length - MAX_GRANTS_PER_USER + 1)) {
        this.#grants.delete(h);
      }
    }
    const token = randomToken();
    const now = this.#now();
    this.#grants.set(await sha256(token), { ...grant, created: now, lastUsed: now });
    return token;
  }

  /** The grant of `token`, when it is live; using it keeps it alive. */
  async check(token: string): Promise<TunnelGrant | null> {
    if (!GRANT_TOKEN.test(token)) return null;
    const hash = await sha256(token);
    const g = this.#grants.get(hash);
    if (!g) return null;
    const now = this.#now();
    if (now - g.lastUsed > GRANT_IDLE_MS || now - g.created > GRANT_MAX_MS) {
      this.#grants.delete(hash);
      return null;
    }
    g.lastUsed = now;
    const { userId, runnerId, port, authSessionId } = g;
    return { userId, runnerId, port, authSessionId };
  }

  /** Forgets a grant (its session ended). */
  async revoke(token: string): Promise<void> {
    if (GRANT_TOKEN.test(token)) this.#grants.delete(await sha256(token));
  }

  /**
   * A one-time ticket that hands `grantToken` to the tunnel origin: the
   * origin exchanges it for the grant (as its own cookie) within a minute.
   */
  async ticket(grantToken: string, next: string): Promise<string> {
    this.#sweep();
    // Bounded whatever a client does: a flood of opens loses the oldest tickets.
    if (this.#tickets.size >= MAX_TICKETS) {
      const oldest = this.#tickets.keys().next().value;
      if (oldest !== undefined) this.#tickets.delete(oldest);
    }
    const t = randomToken();
    this.#tickets.set(await sha256(t), { grant: grantToken, until: this.#now() + TICKET_MS, next });
    return t;
  }

  /** Spends a ticket: its grant token and where to go, once. */
  async redeem(ticket: string): Promise<{ grant: string; next: string } | null> {
    if (!GRANT_TOKEN.test(ticket)) return null;
    const hash = await sha256(ticket);
    const t = this.#tickets.get(hash);
    this.#tickets.delete(hash);
    if (!t || t.until < this.#now()) return null;
    return { grant: t.grant, next: t.next };
  }

  #sweep(): void {
    const now = this.#now();
    for (const [h, g] of this.#grants) {
      if (now - g.lastUsed > GRANT_IDLE_MS || now - g.created > GRANT_MAX_MS) {
        this.#grants.delete(h);
      }
    }
    for (const [h, t] of this.#tickets) if (t.until < now) this.#tickets.delete(h);
  }
}

/** `path` with every preview grant token replaced by `…`, for logs (a token is a credential). */
export function redactGrants(path: string): string {
  return path.replace(/\/api\/tunnel\/g\/[^/?#]+/g, "/api/tunnel/g/…");
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(
    /=+$/,
    "",
  );
}

async function sha256(text: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return btoa(String.fromCharCode(...new Uint8Array(d)));
}
