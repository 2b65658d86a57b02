/**
 * Which file-system changes can change what `git status` says.
 *
 * @module
 */
import { relative, sep } from "node:path";

/**
 * A change in the work tree, or to what status reads inside `.git` (the
 * index, HEAD, refs, a merge starting); `.git/objects` churns on every write
 * and tells nothing a change of the index or a ref would not.
 */
export function relevantChange(top: string, path: string): boolean {
  const rel = relative(top, path).split(sep).join("/");
  if (rel.startsWith("..")) return true;
  if (rel !== ".git" && !rel.startsWith(".git/")) return true;
  if (rel.endsWith(".lock")) return false;
  return rel === ".git/index" || rel === ".git/HEAD" || rel.startsWith(".git/refs/") ||
    rel === ".git/packed-refs" || rel === ".git/MERGE_HEAD";
}
