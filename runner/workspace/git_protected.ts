/**
 * What the git service's discard may not write into a work tree: what the
 * agent's own sandbox keeps from being written there. A discard restores
 * files from the index, whose content the agent controls (it may stage and
 * commit inside its sandbox), so a `.vscode/tasks.json` or `.bashrc` the
 * agent staged but could not write would reach the disk with one click.
 * Refused: the sandbox runtime's dangerous files and folders (`.bashrc`,
 * `.mcp.json`, `.vscode`, `.idea`, `.claude/commands`, …), anything inside
 * a `.git`, and whatever the folder's sandbox policy denies writing or
 * reading by name (`.env`, `.pi`, the person's own `denyWrite`). Nothing is refused
 * in mode `none`.
 *
 * @module
 */
import { join } from "node:path";
import {
  DANGEROUS_FILES,
  getDangerousDirectories,
} from "@anthropic-ai/sandbox-runtime/dist/sandbox/sandbox-utils.js";
import { checkAccess } from "../sandbox/policy.ts";
import { folderPolicy, policySourceFrom } from "../sandbox/folder_policy.ts";

/**
 * The first of `files` (paths relative to work tree `top`, as git lists
 * them) that a discard may not write, with the reason; or null.
 */
export async function protectedFile(
  top: string,
  files: string[],
  env: (name: string) => string | undefined = (k) => Deno.env.get(k),
): Promise<{ path: string; why: string } | null> {
  if (files.length === 0) return null;
  const policy = await folderPolicy(policySourceFrom(env), top, {
    global: "default",
    project: "skip",
  });
  if (policy.mode === "none") return null;
  const names = new Set(DANGEROUS_FILES.map((f: string) => f.toLowerCase()));
  const folders = [".git", ...getDangerousDirectories()].map((d: string) => d.toLowerCase());
  for (const path of files) {
    const rel = path.toLowerCase();
    const parts = rel.split("/");
    if (names.has(parts.at(-1)!)) return { path, why: "a file the sandbox protects" };
    const inside = folders.find((d) => `/${rel}`.includes(`/${d}/`));
    if (inside) return { path, why: `inside '${inside}', which the sandbox protects` };
    // What the policy denies by name; not its write allowlist, which names where the agent
    // works rather than what is dangerous to write.
    const refused = checkAccess({ ...policy.paths, allowWrite: ["/"] }, "write", join(top, path));
    if (refused) return { path, why: refused.replace(/^Sandbox: /, "") };
  }
  return null;
}
