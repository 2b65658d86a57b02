/**
 * Parses `git status --porcelain=v2 -z --branch` and `git diff --numstat -z`
 * into the git service's status.
 *
 * @module
 */
import type { GitFileChange, GitStatus } from "../../shared/git_api.ts";

/** Most files listed in one status; the rest is counted in `omitted`. */
export const MAX_STATUS_FILES = 5000;

/** Parses porcelain v2 output (with `-z`); counts come later from numstat. */
export function parseStatus(out: string): GitStatus {
  const st: GitStatus = {
    branch: null,
    oid: null,
    upstream: null,
    ahead: 0,
    behind: 0,
    staged: [],
    unstaged: [],
    untracked: [],
    conflicted: [],
    omitted: 0,
  };
  const fields = out.split("\0");
  let listed = 0;
  const add = (list: GitFileChange[], c: GitFileChange) => {
    if (listed >= MAX_STATUS_FILES) {
      st.omitted++;
      return;
    }
    listed++;
    list.push(c);
  };
  for (let i = 0; i < fields.length; i++) {
    const line = fields[i]!;
    if (line === "") continue;
    if (line.startsWith("# ")) {
      const [key, ...rest] = line.slice(2).split(" ");
      const value = rest.join(" ");
      if (key === "branch.oid") st.oid = value === "(initial)" ? null : value;
      else if (key === "branch.head") st.branch = value === "(detached)" ? null : value;
      else if (key === "branch.upstream") st.upstream = value;
      else if (key === "branch.ab") {
        const m = /^\+(\d+) -(\d+)$/.exec(value);
        if (m) [st.ahead, st.behind] = [Number(m[1]), Number(m[2])];
      }
      continue;
    }
    const kind = line[0];
    if (kind === "?") {
      add(st.untracked, { path: line.slice(2), status: "?" });
      continue;
    }
    if (kind === "!") continue;
    if (kind === "1" || kind === "2") {
      // 1 XY sub mH mI mW hH hI path | 2 XY sub mH mI mW hH hI Xscore path \0 origPath
      const parts = line.split(" ");
      const xy = parts[1] ?? "..";
      const head = kind === "1" ? 8 : 9;
      const path = parts.slice(head).join(" ");
      const origPath = kind === "2" ? fields[++i] : undefined;
      const x = xy[0]!, y = xy[1]!;
      if (x !== ".") add(st.staged, { path, status: x, ...(origPath ? { origPath } : {}) });
      if (y !== ".") {
        add(st.unstaged, {
          path,
          status: y,
          ...(origPath && x === "." ? { origPath } : {}),
        });
      }
      continue;
    }
    if (kind === "u") {
      const parts = line.split(" ");
      add(st.conflicted, { path: parts.slice(10).join(" "), status: "U" });
    }
  }
  return st;
}

/** Puts `--numstat -z` counts (`-` for binary) on the matching files. */
export function applyNumstat(files: GitFileChange[], out: string): void {
  const byPath = new Map(files.map((f) => [f.path, f]));
  const fields = out.split("\0");
  for (let i = 0; i < fields.length; i++) {
    const rec = fields[i]!;
    if (rec === "") continue;
    const m = /^(-|\d+)\t(-|\d+)\t(.*)$/s.exec(rec);
    if (!m) continue;
    let path = m[3]!;
    // A rename: "<add>\t<del>\t" then the old and the new path as two fields.
    if (path === "") {
      i += 2;
      path = fields[i] ?? "";
    }
    const f = byPath.get(path);
    if (!f) continue;
    if (m[1] === "-") f.binary = true;
    else {
      f.additions = Number(m[1]);
      f.deletions = Number(m[2]);
    }
  }
}
