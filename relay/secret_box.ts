/**
 * Encryption at rest for secrets the relay must read back (webhook secrets):
 * AES-256-GCM with a key derived by HKDF from the relay's own secret, so a
 * copy of relay.db alone does not reveal them.
 *
 * @module
 */

const enc = new TextEncoder();
const VERSION = "v1";

/** Seals and opens short secrets. */
export class SecretBox {
  private constructor(readonly key: CryptoKey) {}

  /** A box keyed by HKDF-SHA256(relay secret, purpose). */
  static async fromSecret(relaySecret: string, purpose: string): Promise<SecretBox> {
    const base = await crypto.subtle.importKey("raw", enc.encode(relaySecret), "HKDF", false, [
      "deriveKey",
    ]);
    const key = await crypto.subtle.deriveKey(
      { name: "HKDF", hash: "SHA-256", salt: enc.encode("baton"), info: enc.encode(purpose) },
      base,
      { name: "AES-GCM", length: 256 },
      false,
      ["encrypt", "decrypt"],
    );
    return new SecretBox(key);
  }

  /** `v1:<base64 of 12-byte IV + ciphertext>`. */
  async seal(plain: string): Promise<string> {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const ct = new Uint8Array(
      await crypto.subtle.encrypt({ name: "AES-GCM", iv }, this.key, enc.encode(plain)),
    );
    const all = new Uint8Array(iv.length + ct.length);
    all.set(iv);
    all.set(ct, iv.length);
    return `${VERSION}:${btoa(String.fromCharCode(...all))}`;
  }

  /** The plain text; throws when the data was altered or sealed with another key. */
  async open(sealed: string): Promise<string> {
    const [version, b64] = sealed.split(":", 2);
    if (version !== VERSION || !b64) throw new Error("Unknown secret format");
    const all = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const plain = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: all.subarray(0, 12) },
      this.key,
      all.subarray(12),
    );
    return new TextDecoder().decode(plain);
  }
}
