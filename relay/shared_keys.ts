/**
 * Keys every relay node on one database must share (docs/scaling.md): the
 * signing secret (browser sessions, webhook secrets) and the push key pair.
 * A node that starts with others than those the database has seen would
 * sign its users out on every hop and answer webhooks with 500, so it stops
 * at start instead, saying which file or variable to copy. The database
 * keeps an HMAC of the secret (never the secret) and the public push key,
 * under the empty user id of the settings table (no account has it).
 *
 * @module
 */
import { createHmac } from "node:crypto";
import { join } from "node:path";
import { loadVapidKeys, type VapidKeys } from "./push_keys.ts";
import { loadSecret } from "./relay_secret.ts";
import type { AsyncStore } from "./store/mod.ts";

/** The settings row's user id for what belongs to the relay, not to an account. */
const RELAY_SETTINGS = "";

/** What this node holds, to check against the database. */
export interface NodeKeys {
  secret: string;
  vapidPublicKey: string;
  /** Where the secret is (shown when it differs). */
  secretFile: string;
}

/**
 * Records the keys the first node starts with, and throws when this node's
 * differ from them.
 */
export async function checkSharedKeys(
  store: Pick<AsyncStore, "settings">,
  keys: NodeKeys,
): Promise<void> {
  const mac = createHmac("sha256", keys.secret).update("baton relay nodes share this secret")
    .digest("base64url");
  const checks = [
    {
      key: "relay.secretCheck",
      mine: mac,
      fix: `copy the signing secret '${keys.secretFile}' from a node already running`,
    },
    {
      key: "relay.vapidPublicKey",
      mine: keys.vapidPublicKey,
      fix: "give it the push keys of the nodes already running (vapid.json, or " +
        "VAPID_PUBLIC_KEY and VAPID_PRIVATE_KEY)",
    },
  ];
  for (const c of checks) {
    // The first node's keys win, even against one starting at the same moment.
    if (await store.settings.setIfAbsent(RELAY_SETTINGS, c.key, c.mine)) continue;
    const seen = await store.settings.get<string | null>(RELAY_SETTINGS, c.key, null);
    if (seen !== c.mine) {
      throw new Error(
        `This relay node's keys differ from the other nodes' on this database: ${c.fix} ` +
          `(docs/scaling.md)`,
      );
    }
  }
}

/** Where a node's keys come from (the relay's options). */
export interface NodeKeyOptions {
  dataDir: string;
  authSecret?: string;
  vapidKeys?: VapidKeys | null;
  vapidSubject?: string;
}

/**
 * The node's signing secret and push keys (given, or from its data folder),
 * checked against the other nodes' when the database is shared (`shared`).
 */
export async function nodeKeys(
  o: NodeKeyOptions,
  shared: Pick<AsyncStore, "settings"> | null,
): Promise<{ secret: string; vapid: VapidKeys }> {
  const secret = o.authSecret ?? await loadSecret(o.dataDir);
  const vapid = await loadVapidKeys(o.dataDir, o.vapidKeys ?? null, o.vapidSubject);
  if (shared) {
    const secretFile = join(o.dataDir, "secret");
    await checkSharedKeys(shared, { secret, vapidPublicKey: vapid.publicKey, secretFile });
  }
  return { secret, vapid };
}
