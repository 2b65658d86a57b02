/**
 * A push service for tests, as a browser vendor runs one (RFC 8030): it
 * takes the relay's POSTs, checks the VAPID JWT (RFC 8292, ES256) against the
 * key in its `Authorization: vapid t=…, k=…` header, and decrypts the payload
 * (RFC 8291 over RFC 8188 aes128gcm) with the subscriber's keys, all with
 * WebCrypto, written here from the RFCs (not with the library the relay uses
 * to encrypt). Also a browser's side of a subscription: its key pair and
 * auth secret.
 *
 * @module
 */
import { Conditions } from "./wait.ts";

const enc = new TextEncoder();

export function b64urlDecode(s: string): Uint8Array<ArrayBuffer> {
  const b64 = s.replace(/=+$/, "").replace(/-/g, "+").replace(/_/g, "/");
  const padded = b64 + "=".repeat((4 - b64.length % 4) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

export function b64urlEncode(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(
    /=+$/,
    "",
  );
}

function concat(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

async function hkdf(
  salt: Uint8Array<ArrayBuffer>,
  ikm: Uint8Array<ArrayBuffer>,
  info: Uint8Array<ArrayBuffer>,
  bytes: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const key = await crypto.subtle.importKey("raw", ikm, "HKDF", false, ["deriveBits"]);
  return new Uint8Array(
    await crypto.subtle.deriveBits({ name: "HKDF", hash: "SHA-256", salt, info }, key, bytes * 8),
  );
}

/** A browser's side of a push subscription: its P-256 key pair and auth secret. */
export interface Subscriber {
  /** Uncompressed public point (65 bytes). */
  publicKey: Uint8Array<ArrayBuffer>;
  privateKey: CryptoKey;
  auth: Uint8Array<ArrayBuffer>;
}

/** A fresh subscriber, as a browser makes one on `pushManager.subscribe`. */
export async function newSubscriber(): Promise<Subscriber> {
  const pair = await crypto.subtle.generateKey({ name: "ECDH", namedCurve: "P-256" }, true, [
    "deriveBits",
  ]);
  return {
    publicKey: new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)),
    privateKey: pair.privateKey,
    auth: crypto.getRandomValues(new Uint8Array(16)),
  };
}

/** A subscriber from the raw private scalar and public point (test vectors). */
export async function subscriberFrom(
  privateD: string,
  publicKey: string,
  auth: string,
): Promise<Subscriber> {
  const pub = b64urlDecode(publicKey);
  const jwk = {
    kty: "EC",
    crv: "P-256",
    d: privateD,
    x: b64urlEncode(pub.slice(1, 33)),
    y: b64urlEncode(pub.slice(33, 65)),
  };
  const privateKey = await crypto.subtle.importKey(
    "jwk",
    jwk,
    { name: "ECDH", namedCurve: "P-256" },
    false,
    ["deriveBits"],
  );
  return { publicKey: pub, privateKey, auth: b64urlDecode(auth) };
}

/**
 * Decrypts an `aes128gcm` push message body for `sub` (RFC 8291 section 3.4,
 * RFC 8188 section 2); throws when it does not authenticate or is malformed.
 */
export async function decryptPush(body: Uint8Array, sub: Subscriber): Promise<Uint8Array> {
  const salt = body.slice(0, 16);
  const rs = new DataView(body.buffer, body.byteOffset).getUint32(16);
  const idlen = body[20]!;
  if (idlen !== 65) throw new Error(`keyid is ${idlen} bytes, expected the sender's 65-byte key`);
  const asPublic = body.slice(21, 21 + idlen);
  const records = body.slice(21 + idlen);
  if (records.length > rs) throw new Error("More than one record (the relay sends one)");
  const asKey = await crypto.subtle.importKey(
    "raw",
    asPublic,
    { name: "ECDH", namedCurve: "P-256" },
    false,
    [],
  );
  const ecdhSecret = new Uint8Array(
    await crypto.subtle.deriveBits({ name: "ECDH", public: asKey }, sub.privateKey, 256),
  );
  const keyInfo = concat(enc.encode("WebPush: info\0"), sub.publicKey, asPublic);
  const ikm = await hkdf(sub.auth, ecdhSecret, keyInfo, 32);
  const cek = await hkdf(salt, ikm, enc.encode("Content-Encoding: aes128gcm\0"), 16);
  const nonce = await hkdf(salt, ikm, enc.encode("Content-Encoding: nonce\0"), 12);
  const key = await crypto.subtle.importKey("raw", cek, "AES-GCM", false, ["decrypt"]);
  const padded = new Uint8Array(
    await crypto.subtle.decrypt({ name: "AES-GCM", iv: nonce }, key, records),
  );
  // The last record ends with 0x02 and optional zero padding.
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end--;
  if (padded[end] !== 2) throw new Error("Missing the last record's delimiter (0x02)");
  return padded.slice(0, end);
}

/** A VAPID JWT's claims after its signature checked out. */
export interface VapidClaims {
  aud: string;
  exp: number;
  sub: string;
  /** The `k` of the Authorization header: the relay's public key, base64url. */
  k: string;
}

/**
 * Checks `Authorization: vapid t=<jwt>, k=<key>` (RFC 8292 section 3): an
 * ES256 JWT signed by `k`. Throws when anything is off; returns the claims.
 */
export async function verifyVapid(authorization: string | null): Promise<VapidClaims> {
  const m = authorization?.match(/^vapid t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/);
  if (!m) throw new Error(`Not a vapid Authorization header: '${authorization}'`);
  const [jwt, k] = [m[1]!, m[2]!];
  const [h, p, s] = jwt.split(".");
  if (!h || !p || !s) throw new Error("Malformed JWT");
  const header = JSON.parse(new TextDecoder().decode(b64urlDecode(h)));
  if (header.alg !== "ES256") throw new Error(`JWT alg is ${header.alg}, expected ES256`);
  const pub = b64urlDecode(k);
  const key = await crypto.subtle.importKey(
    "raw",
    pub,
    { name: "ECDSA", namedCurve: "P-256" },
    false,
    ["verify"],
  );
  const ok = await crypto.subtle.verify(
    { name: "ECDSA", hash: "SHA-256" },
    key,
    b64urlDecode(s),
    enc.encode(`${h}.${p}`),
  );
  if (!ok) throw new Error("VAPID JWT signature does not verify");
  const claims = JSON.parse(new TextDecoder().decode(b64urlDecode(p)));
  return { ...claims, k };
}

/** One message as the push service received it, decrypted and checked. */
export interface ReceivedPush {
  /** The path's last part: which subscription. */
  id: string;
  headers: Headers;
  claims: VapidClaims;
  payload: Record<string, unknown>;
}

/** A running push service on 127.0.0.1 (HTTP: tests allow its origin). */
export class PushService {
  readonly received: ReceivedPush[] = [];
  /** What went wrong with a message (bad JWT, undecryptable): tests assert it stays empty. */
  readonly failures: string[] = [];
  readonly #subscribers = new Map<string, Subscriber>();
  /** Status to answer per subscription id (default 201). */
  readonly statusOf = new Map<string, number>();
  /** Subscription ids whose requests are never answered (a stuck push service). */
  readonly hang = new Set<string>();
  readonly #conditions = new Conditions((what) => `push service: timed out waiting for ${what}`);
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #hanging: (() => void)[] = [];
  /** Requests received in all, answered or not. */
  requests = 0;

  constructor() {
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req) => this.#handle(req),
    );
  }

  get origin(): string {
    return `http://127.0.0.1:${this.#server.addr.port}`;
  }

  /** A new subscription: its endpoint and the keys a browser would give the relay. */
  async subscribe(): Promise<
    { id: string; endpoint: string; keys: { p256dh: string; auth: string } }
  > {
    const id = crypto.randomUUID();
    const sub = await newSubscriber();
    this.#subscribers.set(id, sub);
    return {
      id,
      endpoint: `${this.origin}/push/${id}`,
      keys: { p256dh: b64urlEncode(sub.publicKey), auth: b64urlEncode(sub.auth) },
    };
  }

  async #handle(req: Request): Promise<Response> {
    this.requests++;
    const id = new URL(req.url).pathname.split("/").pop() ?? "";
    const body = new Uint8Array(await req.arrayBuffer());
    if (this.hang.has(id)) {
      return await new Promise<Response>((resolve) => {
        this.#hanging.push(() => resolve(new Response(null, { status: 503 })));
        this.#conditions.check();
      });
    }
    try {
      const sub = this.#subscribers.get(id);
      if (!sub) throw new Error(`Unknown subscription: ${id}`);
      if (req.method !== "POST") throw new Error(`Method ${req.method}`);
      if (req.headers.get("content-encoding") !== "aes128gcm") {
        throw new Error(`Content-Encoding: ${req.headers.get("content-encoding")}`);
      }
      const claims = await verifyVapid(req.headers.get("authorization"));
      const plain = await decryptPush(body, sub);
      this.received.push({
        id,
        headers: req.headers,
        claims,
        payload: JSON.parse(new TextDecoder().decode(plain)),
      });
    } catch (err) {
      this.failures.push(String(err));
    }
    this.#conditions.check();
    return new Response(null, { status: this.statusOf.get(id) ?? 201 });
  }

  /** Messages received for subscription `id`. */
  of(id: string): ReceivedPush[] {
    return this.received.filter((r) => r.id === id);
  }

  until(pred: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    return this.#conditions.until(pred, what, timeoutMs);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const r of this.#hanging.splice(0)) r();
    await this.#server.shutdown();
  }
}
