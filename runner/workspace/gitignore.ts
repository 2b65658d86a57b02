/**
 * The parts of `.gitignore` that the search walker honours when ripgrep is
 * not installed: comments, `!` negation, a trailing `/` for folders only, a
 * `/` anywhere else anchoring the pattern to its file's folder, `*`, `?`,
 * `[...]` and `**`. Not honoured: the global excludes file and `.gitignore`
 * files above the searched folder (ripgrep is run with the same limits).
 *
 * @module
 */

/** One pattern of a `.gitignore`, relative to the folder holding the file. */
export interface IgnoreRule {
  /** The folder of the `.gitignore`, relative to the walk's root ("" for the root). */
  base: string;
  regex: RegExp;
  negate: boolean;
  dirOnly: boolean;
  /** Matched against the whole path below `base` (else against the last name). */
  anchored: boolean;
}

/** The rules of one `.gitignore`'s text. */
export function parseGitignore(text: string, base: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.replace(/(?<!\\)\s+$/, "");
    if (line === "" || line.startsWith("#")) continue;
    let negate = false;
    if (line.startsWith("!")) {
      negate = true;
      line = line.slice(1);
    } else if (line.startsWith("\\!") || line.startsWith("\\#")) {
      line = line.slice(1);
    }
    let dirOnly = false;
    if (line.endsWith("/")) {
      dirOnly = true;
      line = line.replace(/\/+$/, "");
    }
    if (line === "") continue;
    const anchored = line.includes("/");
    if (line.startsWith("/")) line = line.slice(1);
    let regex: RegExp;
    try {
      regex = new RegExp(`^${globToRegex(line)}$`);
    } catch {
      continue;
    }
    rules.push({ base, regex, negate, dirOnly, anchored });
  }
  return rules;
}

/** Whether `path` (relative to the walk's root, `/`-separated) is ignored by `rules`. */
export function isIgnored(path: string, isDir: boolean, rules: readonly IgnoreRule[]): boolean {
  let ignored = false;
  const name = path.slice(path.lastIndexOf("/") + 1);
  for (const r of rules) {
    if (r.dirOnly && !isDir) continue;
    if (r.negate === ignored) {
      // Only a rule that would change the answer needs testing.
      let below: string;
      if (r.base === "") below = path;
      else if (path.startsWith(r.base + "/")) below = path.slice(r.base.length + 1);
      else continue;
      if (r.regex.test(r.anchored ? below : name)) ignored = !r.negate;
    }
  }
  return ignored;
}

/**
 * A path glob (`*` and `?` within one segment, `**` across, `[…]` classes,
 * `\` escapes) as the source of a regular expression, unanchored.
 */
export function globToRegex(glob: string): string {
  let re = "";
  let i = 0;
  while (i < glob.length) {
    const c = glob[i]!;
    if (glob.startsWith("**/", i)) {
      re += "(?:.*/)?";
      i += 3;
    } else if (glob.startsWith("/**", i) && i + 3 === glob.length) {
      re += "/.*";
      i += 3;
    } else if (glob.startsWith("**", i)) {
      re += ".*";
      i += 2;
    } else if (c === "*") {
      re += "[^/]*";
      i++;
    } else if (c === "?") {
      re += "[^/]";
      i++;
    } else if (c === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end === -1) {
        re += "\\[";
        i++;
        continue;
      }
      let cls = glob.slice(i + 1, end);
      if (cls.startsWith("!")) cls = "^" + cls.slice(1);
      re += `[${cls.replace(/\\/g, "\\\\")}]`;
      i = end + 1;
    } else if (c === "\\" && i + 1 < glob.length) {
      re += escapeRegex(glob[i + 1]!);
      i += 2;
    } else {
      re += escapeRegex(c);
      i++;
    }
  }
  return re;
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}
