/**
 * `deno task bundle`: baton as one JavaScript file (dist/baton.js) that runs
 * with nothing but the `deno` binary: `deno run -A baton.js up`. The web
 * client, the Workers' modules, the migrations and every npm package are
 * inside; nothing is read from a source tree. The first line marks the file
 * as the single-file program (shared/single_file.ts), which starts its Workers
 * from itself. tests/single_file_test.ts runs it from an empty folder.
 *
 * @module
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { SINGLE_FILE_MARKER } from "../shared/single_file.ts";

/** The repository root. */
export const ROOT: string = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Options of {@linkcode bundleBaton}. */
export interface BundleOptions {
  /** The output file (default dist/baton.js). */
  out?: string;
  signal?: AbortSignal;
}

/** Bundles main.ts and all it loads into one file; returns its path. */
export async function bundleBaton(options: BundleOptions = {}): Promise<string> {
  const out = resolve(options.out ?? join(ROOT, "dist", "baton.js"));
  await Deno.mkdir(dirname(out), { recursive: true });
  const res = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "deno",
      "--config",
      join(ROOT, "deno.json"),
      "-o",
      out,
      join(ROOT, "main.ts"),
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    ...(options.signal ? { signal: options.signal } : {}),
  }).output();
  if (!res.success) {
    const err = new TextDecoder().decode(res.stderr);
    const lines = err.split("\n").filter((l) => /error/i.test(l)).slice(0, 5);
    throw new Error(`deno bundle failed: ${lines.join(" / ") || err.slice(0, 500)}`);
  }
  const body = await Deno.readTextFile(out);
  await Deno.writeTextFile(out, `globalThis.${SINGLE_FILE_MARKER} = true;\n${body}`);
  return out;
}

if (import.meta.main) {
  try {
    const out = await bundleBaton({ out: Deno.args[0] });
    const { size } = await Deno.stat(out);
    console.log(`${out}  ${(size / 1024 / 1024).toFixed(1)} MB  (run: deno run -A ${out} up)`);
  } catch (err) {
    console.error(`bundle: ${err instanceof Error ? err.message : String(err)}`);
    Deno.exit(1);
  }
}
