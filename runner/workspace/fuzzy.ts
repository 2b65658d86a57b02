/**
 * Fuzzy ranking of file paths for `search-files`: every term of the query
 * (split on spaces) must appear in the path as a subsequence, ignoring case.
 * A term found whole in the file's name ranks highest, then whole elsewhere
 * in the path, then scattered in the name, then scattered in the path;
 * matches that run together or start a word score more; shorter paths win
 * ties.
 *
 * @module
 */

/** The score of `path` for the terms of a query (lower case), or null when one does not match. */
export function fuzzyScore(path: string, terms: readonly string[]): number | null {
  const lower = path.toLowerCase();
  const base = lower.lastIndexOf("/") + 1;
  let total = 0;
  for (const term of terms) {
    const s = termScore(lower, base, term);
    if (s === null) return null;
    total += s;
  }
  return total - path.length * 0.5;
}

/** The query's terms, lower case. */
export function queryTerms(query: string): string[] {
  return query.toLowerCase().split(/\s+/).filter(Boolean);
}

function termScore(path: string, base: number, term: string): number | null {
  const name = path.slice(base);
  const inName = name.indexOf(term);
  if (inName !== -1) {
    const stem = name.replace(/\.[^.]*$/, "");
    return 1000 + (inName === 0 ? 200 : boundary(name, inName) ? 100 : 0) +
      (name === term || stem === term ? 300 : 0);
  }
  const inPath = path.indexOf(term);
  if (inPath !== -1) return 600 + (boundary(path, inPath) ? 100 : 0);
  const scattered = subsequence(path, base, term);
  if (scattered !== null) return 400 + scattered;
  const anywhere = subsequence(path, 0, term);
  return anywhere === null ? null : 100 + anywhere;
}

/** Whether position `i` of `s` starts a word (after a separator). */
function boundary(s: string, i: number): boolean {
  return i === 0 || "/_-. ".includes(s[i - 1]!);
}

/** Matches `term`'s characters in order from `from`; scores runs and word starts, null if absent. */
function subsequence(s: string, from: number, term: string): number | null {
  let score = 0;
  let last = -2;
  let at = from;
  for (const ch of term) {
    const i = s.indexOf(ch, at);
    if (i === -1) return null;
    if (i === last + 1) score += 10;
    else if (boundary(s, i)) score += 8;
    else score -= Math.min(i - at, 10);
    last = i;
    at = i + 1;
  }
  return score;
}
