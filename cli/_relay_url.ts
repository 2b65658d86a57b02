/**
 * What the commands that call a relay share. Apart from `_args.ts` so that
 * `baton relay`, which imports that, does not load the runner (and its
 * WebSocket client) with it.
 *
 * @module
 */
import { join } from "node:path";
import { normalizeRelayUrl, readUserConfig } from "../runner/mod.ts";
import { homeDir, UsageError } from "./_args.ts";

/**
 * The relay a command talks to: its flag (or variable) when given, else
 * `relayUrls` or `relayUrl` in `~/.baton/config.json`, else the local
 * default. Of a list of relay nodes (commas, or the config's array), the
 * first: every node of a deployment answers the same (docs/scaling.md).
 */
export async function relayUrlFrom(flag: string | undefined): Promise<string> {
  const saved = await readUserConfig(join(homeDir(), ".baton")).catch(
    () => ({} as Record<string, unknown>),
  );
  const savedList = Array.isArray(saved.relayUrls) && typeof saved.relayUrls[0] === "string"
    ? saved.relayUrls[0]
    : undefined;
  const raw = flag ?? savedList ??
    (typeof saved.relayUrl === "string" && saved.relayUrl !== "off" ? saved.relayUrl : undefined) ??
    "http://127.0.0.1:7420";
  try {
    return normalizeRelayUrl(raw.split(",").find((u) => u.trim() !== "") ?? raw);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}
