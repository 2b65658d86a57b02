import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { existsSync } from "node:fs";

/**
 * The command line that starts this same program with another subcommand:
 * `deno run -A [--config deno.json] <main> <sub>` from source or a bundle,
 * or the binary itself when compiled.
 */
export function selfCommand(sub: string, args: string[] = []): { cmd: string; args: string[] } {
  const exec = Deno.execPath();
  if (!/^deno(\.exe)?$/i.test(basename(exec))) return { cmd: exec, args: [sub, ...args] };
  const main = Deno.mainModule;
  const runArgs = ["run", "-A", "--quiet"];
  if (main.startsWith("file:")) {
    const config = join(dirname(fileURLToPath(main)), "deno.json");
    if (existsSync(config)) runArgs.push("--config", config);
  }
  return { cmd: exec, args: [...runArgs, main, sub, ...args] };
}
