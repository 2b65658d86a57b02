import { type AttachmentPolicy, DEFAULT_ATTACHMENT_POLICY } from "../relay/mod.ts";
import { UsageError } from "./_args.ts";

/** The help lines of the attachment variables (`baton relay` and `baton up`). */
export const ATTACHMENT_ENV_HELP =
  `  BATON_ATTACHMENT_MAX_BYTES      Largest uploaded file (default 10485760: 10 MiB)
  BATON_ATTACHMENT_MAX_FILES      Most files in one upload (default 10)
  BATON_ATTACHMENT_TTL            How long attachments are kept: 90s, 30m, 12h, 7d
                                  (default 7d)
  BATON_ATTACHMENT_USER_MAX_MB    Most MB of attachments one user may hold
                                  (default 1024; 0: no limit)`;

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** The attachment policy from `BATON_ATTACHMENT_*`; a bad value is a usage error. */
export function attachmentPolicyFromEnv(): AttachmentPolicy {
  const get = (name: string) => {
    const v = Deno.env.get(name);
    return v === undefined || v === "" ? null : v;
  };
  const int = (name: string, min: number, max: number, fallback: number): number => {
    const v = get(name);
    if (v === null) return fallback;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      throw new UsageError(`Invalid ${name}: '${v}' (expected an integer from ${min} to ${max})`);
    }
    return Number(v);
  };
  const ttl = get("BATON_ATTACHMENT_TTL");
  let ttlMs = DEFAULT_ATTACHMENT_POLICY.ttlMs;
  if (ttl !== null) {
    const m = /^(\d{1,6})([smhd])$/.exec(ttl);
    ttlMs = m ? Number(m[1]) * UNITS[m[2]!]! : NaN;
    if (!(ttlMs >= 1000 && ttlMs <= 3650 * 86_400_000)) {
      throw new UsageError(
        `Invalid BATON_ATTACHMENT_TTL: '${ttl}' (expected a duration such as 90s, 12h or 7d, ` +
          "from 1s to 3650d)",
      );
    }
  }
  return {
    maxFileBytes: int(
      "BATON_ATTACHMENT_MAX_BYTES",
      1,
      1024 * 1024 * 1024,
      DEFAULT_ATTACHMENT_POLICY.maxFileBytes,
    ),
    maxFiles: int("BATON_ATTACHMENT_MAX_FILES", 1, 100, DEFAULT_ATTACHMENT_POLICY.maxFiles),
    ttlMs,
    userMaxBytes: int(
      "BATON_ATTACHMENT_USER_MAX_MB",
      0,
      100_000_000,
      DEFAULT_ATTACHMENT_POLICY.userMaxBytes / (1024 * 1024),
    ) * 1024 * 1024,
  };
}
