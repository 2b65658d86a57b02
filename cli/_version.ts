/**
 * baton's version and how this copy runs (compiled, one file, or source).
 *
 * @module
 */
import denoJson from "../deno.json" with { type: "json" };
import { isSingleFile } from "../shared/mod.ts";

/** baton's version, from deno.json. */
export const VERSION: string = denoJson.version;

/** `baton 0.1.0 (Deno 2.9.6, x86_64-unknown-linux-gnu, compiled)`. */
export function VERSION_INFO(): string {
  const compiled = !/^deno(\.exe)?$/i.test(Deno.execPath().split(/[\\/]/).pop() ?? "");
  const how = compiled ? "compiled" : isSingleFile() ? "single file" : "source";
  return `baton ${VERSION} (Deno ${Deno.version.deno}, ${Deno.build.target}, ${how})`;
}
