/**
 * Whether this machine can run the OS sandbox, asked without loading the
 * sandbox runtime (the CLI says so at start).
 *
 * @module
 */
import { delimiter, join } from "node:path";

/** The programs the sandbox needs on Linux (Debian: `apt-get install bubblewrap socat ripgrep`). */
export const LINUX_SANDBOX_PROGRAMS = ["bwrap", "socat", "rg"] as const;

/** Which of `names` are not on `PATH`. */
export function missingPrograms(
  names: readonly string[],
  path: string = Deno.env.get("PATH") ?? "",
): string[] {
  const dirs = path.split(delimiter).filter((d) => d !== "");
  return names.filter((n) =>
    !dirs.some((d) => {
      try {
        return Deno.statSync(join(d, n)).isFile;
      } catch {
        return false;
      }
    })
  );
}

/** A line for the user when the sandbox cannot be enforced here, else null. */
export function sandboxDependencyWarning(os: typeof Deno.build.os = Deno.build.os): string | null {
  if (os === "windows") {
    return "The agent sandbox is inactive on Windows: tools run unrestricted";
  }
  if (os !== "linux") return null;
  const missing = missingPrograms(LINUX_SANDBOX_PROGRAMS);
  if (missing.length === 0) return null;
  return `The agent sandbox needs ${missing.join(", ")} (Debian/Ubuntu: apt-get install ` +
    `bubblewrap socat ripgrep); until then sessions run unsandboxed ` +
    `(or refuse tools with sandbox.failClosed)`;
}
