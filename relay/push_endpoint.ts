/**
 * Which push endpoints the relay will POST to. A subscription's endpoint is
 * a URL a signed-in user hands the relay, and the relay calls it later from
 * inside its network: without checks that is a server-side request forgery
 * (the relay probing `http://127.0.0.1:…` or a cloud metadata address). So an
 * endpoint must be https, name no private, loopback, link-local or otherwise
 * special address, and (when sending) its name must not resolve to one.
 * Origins listed in `BATON_PUSH_ALLOW_ORIGINS` (tests, a push service on the
 * LAN) are exempt from all of it, http included.
 *
 * @module
 */
import { isIP } from "node:net";

/** Longest endpoint accepted (real ones are under 600 characters). */
export const MAX_ENDPOINT_LENGTH = 2048;

/** Why an endpoint is refused, or null when it is acceptable as written. */
export function endpointProblem(endpoint: string, allowed: ReadonlySet<string>): string | null {
  if (endpoint.length > MAX_ENDPOINT_LENGTH) {
    return `longer than ${MAX_ENDPOINT_LENGTH} characters`;
  }
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return "not a URL";
  }
  if (url.username || url.password) return "a URL with credentials";
  if (allowed.has(url.origin)) return null;
  if (url.protocol !== "https:") return "not https";
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || !host.includes(".") && !isIP(host)) {
    return "a local host name";
  }
  if (isIP(host) && !isPublicAddress(host)) return "a private or reserved address";
  return null;
}

/** Whether an IPv4 or IPv6 address is globally routable (not private, loopback, ...). */
export function isPublicAddress(address: string): boolean {
  const v = isIP(address);
  if (v === 4) return isPublicV4(address.split(".").map(Number));
  if (v === 6) return isPublicV6(address.toLowerCase());
  return false;
}

function isPublicV4([a = 0, b = 0, c = 0]: number[]): boolean {
  if (a === 0 || a === 10 || a === 127 || a >= 224) return false;
  if (a === 100 && b >= 64 && b <= 127) return false; // carrier-grade NAT
  if (a === 169 && b === 254) return false; // link-local, cloud metadata
  if (a === 172 && b >= 16 && b <= 31) return false;
  if (a === 192 && b === 168) return false;
  if (a === 192 && b === 0 && (c === 0 || c === 2)) return false;
  if (a === 198 && (b === 18 || b === 19)) return false; // benchmarking
  if (a === 198 && b === 51 && c === 100) return false;
  if (a === 203 && b === 0 && c === 113) return false;
  return true;
}

function isPublicV6(address: string): boolean {
  const groups = expandV6(address);
  if (!groups) return false;
  if (groups.every((g) => g === 0)) return false; // ::
  if (groups.slice(0, 7).every((g) => g === 0) && groups[7] === 1) return false; // ::1
  const first = groups[0]!;
  if ((first & 0xfe00) === 0xfc00) return false; // unique local
  if ((first & 0xffc0) === 0xfe80) return false; // link-local
  if ((first & 0xff00) === 0xff00) return false; // multicast
  if (first === 0x2001 && groups[1] === 0x0db8) return false; // documentation
  // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d): the IPv4 address decides.
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  const nat64 = first === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((g) => g === 0);
  if (mapped || nat64) {
    const [hi = 0, lo = 0] = [groups[6], groups[7]];
    return isPublicV4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
  }
  if (groups.slice(0, 6).every((g) => g === 0)) return false; // IPv4-compatible, deprecated
  return true;
}

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 part allowed). */
function expandV6(address: string): number[] | null {
  let text = address.split("%")[0]!;
  const v4 = text.match(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = text.slice(0, v4.index) +
      `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const parse = (s: string) => (s ? s.split(":").map((g) => parseInt(g, 16)) : []);
  const h = parse(head);
  const t = tail === undefined ? [] : parse(tail);
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  const groups = [...h, ...Array(Math.max(0, fill)).fill(0), ...t];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0) ? groups : null;
}

/** Resolves a host name to its addresses (A and AAAA). */
export type ResolveHost = (host: string, signal?: AbortSignal) => Promise<string[]>;

/** Deno's resolver: every A and AAAA record of `host`. */
export const resolveHost: ResolveHost = async (host, signal) => {
  const settle = (t: "A" | "AAAA") =>
    Deno.resolveDns(host, t, signal ? { signal } : {}).catch(() => [] as string[]);
  const [a, aaaa] = await Promise.all([settle("A"), settle("AAAA")]);
  return [...a, ...aaaa];
};

/**
 * Why the relay will not send to `endpoint` now, or null: the written
 * checks, then every address its name resolves to must be public (a name
 * may have been pointed at an internal address since it was subscribed).
 */
export async function sendProblem(
  endpoint: string,
  allowed: ReadonlySet<string>,
  resolve: ResolveHost,
  signal?: AbortSignal,
): Promise<string | null> {
  const written = endpointProblem(endpoint, allowed);
  if (written) return written;
  const url = new URL(endpoint);
  if (allowed.has(url.origin)) return null;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host)) return null;
  const addresses = await resolve(host, signal);
  if (addresses.length === 0) return "its name does not resolve";
  const bad = addresses.find((a) => !isPublicAddress(a));
  return bad ? `its name resolves to a private or reserved address: '${bad}'` : null;
}
