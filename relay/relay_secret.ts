/**
 * The relay's signing secret (better-auth's cookies and tokens): one file in
 * the data folder, made once.
 *
 * @module
 */
import { join } from "node:path";

/** The relay's signing secret: `<dataDir>/secret`, created (0600) on first start. */
export async function loadSecret(dataDir: string): Promise<string> {
  const path = join(dataDir, "secret");
  try {
    const s = (await Deno.readTextFile(path)).trim();
    // Replacing a damaged secret would sign every browser out: refuse instead.
    if (s.length < 32) {
      throw new Error(`Relay secret is too short (under 32 characters): '${path}'`);
    }
    return s;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  const secret = btoa(String.fromCharCode(...bytes));
  await Deno.writeTextFile(path, secret + "\n", { mode: 0o600 });
  return secret;
}
