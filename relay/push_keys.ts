/**
 * The relay's VAPID key pair (RFC 8292): from `VAPID_PUBLIC_KEY`,
 * `VAPID_PRIVATE_KEY` and `VAPID_SUBJECT`, or generated once and kept in
 * `<dataDir>/vapid.json` (owner-only) so that browsers' subscriptions, which
 * are bound to the public key, survive a restart.
 *
 * @module
 */
import { createECDH } from "node:crypto";
import { join } from "node:path";
import { encodeBase64Url } from "../shared/bytes.ts";

/** A VAPID key pair and the contact the push services are given. */
export interface VapidKeys {
  /** Uncompressed P-256 point, base64url (65 bytes). */
  publicKey: string;
  /** The private scalar, base64url (32 bytes). */
  privateKey: string;
  /** `mailto:` or `https:` contact of the relay's operator. */
  subject: string;
}

/** The contact sent when `VAPID_SUBJECT` is not set (some push services want a real one). */
export const DEFAULT_VAPID_SUBJECT = "mailto:baton@example.com";

/** The key file's name in the data folder. */
export const VAPID_FILE = "vapid.json";

function decodeBase64Url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(text)) return null;
  const b64 = text.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
  try {
    return Uint8Array.from(
      atob(b64 + "=".repeat((4 - b64.length % 4) % 4)),
      (c) => c.charCodeAt(0),
    );
  } catch {
    return null;
  }
}

/** The public key of a private one, base64url; throws on a scalar outside the curve's range. */
function publicOf(privateKey: Uint8Array): string {
  const ecdh = createECDH("prime256v1");
  ecdh.setPrivateKey(privateKey);
  return encodeBase64Url(new Uint8Array(ecdh.getPublicKey()));
}

/**
 * Checks a key pair and subject; throws an Error whose message is one line
 * naming what is wrong (`where` names the source: the environment or a file).
 */
export function checkVapidKeys(
  keys: { publicKey?: string; privateKey?: string; subject?: string },
  where: { publicKey: string; privateKey: string; subject: string },
): VapidKeys {
  const priv = decodeBase64Url(keys.privateKey ?? "");
  if (!priv || priv.length !== 32) {
    throw new Error(
      `Invalid ${where.privateKey}: expected base64url that decodes to exactly 32 bytes` +
        (priv ? ` (got ${priv.length})` : " (not base64url)"),
    );
  }
  let derived: string;
  try {
    derived = publicOf(priv);
  } catch {
    throw new Error(`Invalid ${where.privateKey}: not a P-256 private key`);
  }
  const pub = decodeBase64Url(keys.publicKey ?? "");
  if (!pub || pub.length !== 65 || pub[0] !== 4) {
    throw new Error(
      `Invalid ${where.publicKey}: expected base64url of an uncompressed P-256 point (65 bytes)`,
    );
  }
  if (encodeBase64Url(pub) !== derived) {
    throw new Error(`Invalid ${where.publicKey}: it is not the public key of ${where.privateKey}`);
  }
  const subject = keys.subject ?? DEFAULT_VAPID_SUBJECT;
  if (!/^mailto:\S+@\S+$/.test(subject) && !/^https:\/\/\S+$/.test(subject)) {
    throw new Error(`Invalid ${where.subject}: '${subject}' (expected a mailto: or https: URI)`);
  }
  return { publicKey: derived, privateKey: encodeBase64Url(priv), subject };
}

/**
 * The keys from `VAPID_*` in `env`, or null when neither key is set; throws
 * a one-line Error when they are set but wrong, or only one of them is.
 */
export function vapidFromEnv(env: (name: string) => string | undefined): VapidKeys | null {
  const publicKey = env("VAPID_PUBLIC_KEY") || undefined;
  const privateKey = env("VAPID_PRIVATE_KEY") || undefined;
  const subject = env("VAPID_SUBJECT") || undefined;
  if (!publicKey && !privateKey) {
    if (subject) checkSubject(subject);
    return null;
  }
  if (!publicKey || !privateKey) {
    throw new Error("Set both VAPID_PUBLIC_KEY and VAPID_PRIVATE_KEY, or neither");
  }
  return checkVapidKeys({ publicKey, privateKey, ...(subject ? { subject } : {}) }, ENV_NAMES);
}

const ENV_NAMES = {
  publicKey: "VAPID_PUBLIC_KEY",
  privateKey: "VAPID_PRIVATE_KEY",
  subject: "VAPID_SUBJECT",
};

function checkSubject(subject: string): void {
  if (!/^mailto:\S+@\S+$/.test(subject) && !/^https:\/\/\S+$/.test(subject)) {
    throw new Error(`Invalid VAPID_SUBJECT: '${subject}' (expected a mailto: or https: URI)`);
  }
}

/** A fresh key pair (WebCrypto), base64url. */
export async function generateVapidKeys(): Promise<{ publicKey: string; privateKey: string }> {
  const pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
    "verify",
  ]);
  const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  const jwk = await crypto.subtle.exportKey("jwk", pair.privateKey);
  return { publicKey: encodeBase64Url(raw), privateKey: jwk.d! };
}

/**
 * The relay's keys: `configured` when given, else those of
 * `<dataDir>/vapid.json`, created (0600) on first start. A damaged file is an
 * error, not replaced: every browser's subscription is bound to its key.
 */
export async function loadVapidKeys(
  dataDir: string,
  configured: VapidKeys | null,
  subject?: string,
): Promise<VapidKeys> {
  if (configured) return configured;
  const path = join(dataDir, VAPID_FILE);
  const names = {
    publicKey: `${path} publicKey`,
    privateKey: `${path} privateKey`,
    subject: "VAPID_SUBJECT",
  };
  try {
    const stored = JSON.parse(await Deno.readTextFile(path));
    return checkVapidKeys({ ...stored, ...(subject ? { subject } : {}) }, names);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) {
      throw new Error(`Invalid VAPID key file '${path}': ${(err as Error).message}`);
    }
  }
  const fresh = await generateVapidKeys();
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  await Deno.writeTextFile(tmp, JSON.stringify(fresh) + "\n", { mode: 0o600 });
  await Deno.rename(tmp, path);
  return checkVapidKeys({ ...fresh, ...(subject ? { subject } : {}) }, names);
}
