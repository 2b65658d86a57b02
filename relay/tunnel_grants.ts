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
 * Tokens are random (32 bytes) and kept only as their SHA-256, in the store
 * (`tunnel_grants`, store/tunnel_grants.ts): every relay node of a cluster
 * answers a grant another node made, and a restart keeps them. A grant
 * expires after an idle hour and at most a day after it was made, dies with
 * the browser session that made it (the routes ask on each use), and each
 * user holds at most {@linkcode MAX_GRANTS_PER_USER} (the least recently
 * used goes first).
 *
 * Per request a node costs the store little: a grant it found live is
 * believed for {@linkcode CHECK_CACHE_MS} (a revoke on this node forgets it
 * at once; one on another node is seen within that), and a use is written
 * at most once per {@linkcode TOUCH_EVERY_MS} (an idle hour measured from a
 * use up to a minute old ends that much early, which the hour tolerates).
 *
 * @module
 */
import { SecretBox } from "./secret_box.ts";
import type { Async } from "./store/contract.ts";
import type { GrantRecord, TunnelGrantsRepo } from "./store/tunnel_grants.ts";

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
/**
 * Tickets one user has waiting to be spent: a flood of opens loses that
 * user's oldest, nobody else's (a ticket is spent within a second of being
 * made when a browser follows the redirect).
 */
export const MAX_TICKETS_PER_USER = 64;
/** Grants one user holds at once: opening the 65th preview forgets the least recently used. */
export const MAX_GRANTS_PER_USER = 64;
/**
 * How long a node believes a grant it found live without asking the store
 * again: a page's burst of sub-requests (a dev server serves each module
 * of the page as its own request) costs one read, and a revoke on another
 * node holds within this.
 */
export const CHECK_CACHE_MS = 3_000;
/** A grant's use is written at most this often (the idle hour is measured from it). */
export const TOUCH_EVERY_MS = 60_000;
/** Grants a node believes at once (a few bytes each); beyond it the oldest are asked again. */
const CACHE_MAX = 4096;
/** How often a node deletes expired grants and tickets (with a mint or a ticket). */
const SWEEP_EVERY_MS = 60_000;
/** The HKDF label of a ticket's sealing key (see {@linkcode TunnelGrants.ticket}). */
const TICKET_KEY_PURPOSE = "baton tunnel ticket";

/** A token's form: 43 characters of base64url (32 bytes). */
export const GRANT_TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Options of {@linkcode TunnelGrants}. */
export interface TunnelGrantsOptions {
  /** The clock (tests). */
  now?: () => number;
}

/** The grants and handoff tickets of every node on the store, by the hash of their token. */
export class TunnelGrants {
  readonly #repo: Async<TunnelGrantsRepo>;
  /** Grants found live lately, by hash, and until when this node believes them. */
  readonly #believed = new Map<string, { grant: TunnelGrant; until: number }>();
  /** Reads of the store under way, by hash. */
  readonly #asking = new Map<string, Promise<GrantRecord | null>>();
  readonly #now: () => number;
  #sweptAt = -Infinity;

  constructor(repo: Async<TunnelGrantsRepo>, options: TunnelGrantsOptions = {}) {
    this.#repo = repo;
    this.#now = options.now ?? Date.now;
  }

  /** Grants held now, over all nodes (for tests and bounds). */
  async size(): Promise<number> {
    return await this.#repo.count();
  }

  /** Makes a grant; returns its token (shown once, kept hashed). */
  async mint(grant: TunnelGrant): Promise<string> {
    const now = this.#now();
    await this.#sweep(now);
    const token = randomToken();
    const rec: GrantRecord = {
      hash: await sha256(token),
      ...binding(grant),
      createdAt: now,
      lastUsed: now,
      expiresAt: expiryOf(now, now),
    };
    await this.#repo.insert(rec, MAX_GRANTS_PER_USER);
    // The navigation that made it is followed by its page's requests: most reach this node.
    this.#believe(rec, now);
    return token;
  }

  /** The grant of `token`, when it is live; using it keeps it alive. */
  async check(token: string): Promise<TunnelGrant | null> {
    if (!GRANT_TOKEN.test(token)) return null;
    const hash = await sha256(token);
    const now = this.#now();
    const held = this.#believed.get(hash);
    if (held && now <= held.until) return { ...held.grant };
    this.#believed.delete(hash);
    // The page's requests that arrive together share one read of the store.
    let asking = this.#asking.get(hash);
    if (!asking) {
      const p: Promise<GrantRecord | null> = this.#lookUp(hash, now).then((g) => {
        // Revoked meanwhile (the entry is gone): not believed.
        if (g && this.#asking.get(hash) === p) this.#believe(g, now);
        return g;
      }).finally(() => {
        if (this.#asking.get(hash) === p) this.#asking.delete(hash);
      });
      this.#asking.set(hash, asking = p);
    }
    const g = await asking;
    return g && binding(g);
  }

  /** The live grant stored under `hash`, its use written when the last is a minute old. */
  async #lookUp(hash: string, now: number): Promise<GrantRecord | null> {
    const g = await this.#repo.get(hash);
    if (!g) return null;
    if (now > g.expiresAt) {
      await this.#repo.delete(hash);
      return null;
    }
    if (now - g.lastUsed >= TOUCH_EVERY_MS) {
      g.lastUsed = now;
      g.expiresAt = expiryOf(g.createdAt, now);
      await this.#repo.touch(hash, { lastUsed: g.lastUsed, expiresAt: g.expiresAt });
    }
    return g;
  }

  /** Forgets a grant (its session ended), on every node (another believes it CHECK_CACHE_MS at most). */
  async revoke(token: string): Promise<void> {
    if (!GRANT_TOKEN.test(token)) return;
    const hash = await sha256(token);
    this.#believed.delete(hash);
    this.#asking.delete(hash);
    await this.#repo.delete(hash);
  }

  /**
   * A one-time ticket that hands `grantToken` (a live grant's; a RangeError
   * otherwise) to the tunnel origin: the origin exchanges it for the grant
   * (as its own cookie) within a minute, on any node.
   *
   * The grant token must come back out of the store, yet no reader of the
   * store may learn it: the row holds it sealed (AES-256-GCM) with a key
   * derived from the ticket token itself (HKDF-SHA256, its own label), and
   * is found by the ticket's SHA-256. The ticket travels only in the
   * redirect's URL, so only its bearer can open the row, once.
   */
  async ticket(grantToken: string, next: string): Promise<string> {
    const grant = await this.check(grantToken);
    if (!grant) throw new RangeError("Not a live preview grant");
    const now = this.#now();
    await this.#sweep(now);
    const t = randomToken();
    const box = await SecretBox.fromSecret(t, TICKET_KEY_PURPOSE);
    await this.#repo.insertTicket({
      hash: await sha256(t),
      userId: grant.userId,
      sealed: await box.seal(JSON.stringify({ grant: grantToken, next })),
      expiresAt: now + TICKET_MS,
    }, MAX_TICKETS_PER_USER);
    return t;
  }

  /** Spends a ticket: its grant token and where to go, once over all nodes. */
  async redeem(ticket: string): Promise<{ grant: string; next: string } | null> {
    if (!GRANT_TOKEN.test(ticket)) return null;
    const spent = await this.#repo.redeemTicket(await sha256(ticket));
    if (!spent || spent.expiresAt < this.#now()) return null;
    const box = await SecretBox.fromSecret(ticket, TICKET_KEY_PURPOSE);
    const { grant, next } = JSON.parse(await box.open(spent.sealed));
    return { grant: String(grant), next: String(next) };
  }

  #believe(g: GrantRecord, now: number): void {
    if (this.#believed.size >= CACHE_MAX) {
      const oldest = this.#believed.keys().next().value;
      if (oldest !== undefined) this.#believed.delete(oldest);
    }
    const until = Math.min(now + CHECK_CACHE_MS, g.expiresAt);
    this.#believed.set(g.hash, { grant: binding(g), until });
  }

  async #sweep(now: number): Promise<void> {
    if (now - this.#sweptAt < SWEEP_EVERY_MS) return;
    this.#sweptAt = now;
    for (const [h, b] of this.#believed) if (b.until < now) this.#believed.delete(h);
    await this.#repo.sweep(now);
  }
}

/** When a grant made at `created` and last used at `used` expires: its idle hour or its day. */
function expiryOf(created: number, used: number): number {
  return Math.min(used + GRANT_IDLE_MS, created + GRANT_MAX_MS);
}

function binding(g: TunnelGrant): TunnelGrant {
  const { userId, runnerId, port, authSessionId } = g;
  return { userId, runnerId, port, authSessionId };
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
