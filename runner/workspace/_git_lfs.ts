/**
 * Whether a switch needs git-lfs's downloads, which the git sandbox (no
 * network, none of the person's credentials) cannot make: git_sandbox.ts
 * runs such a switch as the person.
 *
 * @module
 */

/**
 * Whether the person's own config (system, global, and what they include,
 * `includeIf` for this repository too) has git-lfs's filter, which
 * downloads. Listed from `cwd` with scopes: the repository's own settings
 * do not count (the agent writes them).
 */
export async function lfsConfigured(
  cwd: string,
  env?: (name: string) => string | undefined,
): Promise<boolean> {
  const home = env?.("HOME");
  try {
    const out = await new Deno.Command("git", {
      args: ["config", "--show-scope", "-z", "--get-regexp", "^filter\\.lfs\\."],
      cwd,
      ...(home !== undefined ? { env: { HOME: home } } : {}),
      stdin: "null",
      stdout: "piped",
      stderr: "null",
      signal: AbortSignal.timeout(10_000),
    }).output();
    // `scope\0key\nvalue\0` per setting.
    const parts = new TextDecoder().decode(out.stdout).split("\0");
    return parts.some((p, i) => i % 2 === 0 && (p === "global" || p === "system"));
  } catch {
    return false;
  }
}
