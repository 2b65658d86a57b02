/**
 * Wire types of the `service_message` envelope (viewer and control channels)
 * and of the git service (`serviceId: "git"`). docs/protocol.md ("Services:
 * git") describes them in prose.
 *
 * @module
 */

/** The services a runner answers through `service_message`. */
export const SERVICE_IDS = ["git"] as const;
export type ServiceId = typeof SERVICE_IDS[number];

/** Ops of the git service a viewer may send. */
export const GIT_OPS = [
  "status",
  "diff",
  "branches",
  "checkout",
  "stage",
  "unstage",
  "commit",
  "push",
  "log",
  "discard",
] as const;
export type GitOp = typeof GIT_OPS[number];

/** Longest `requestId` a viewer may choose. */
export const MAX_SERVICE_REQUEST_ID = 100;
/** Most bytes of a request's `data` (as JSON): paths lists and commit messages fit. */
export const MAX_SERVICE_DATA_BYTES = 256 * 1024;
/** Requests one viewer socket may have in flight at once; more are refused (`too_many_requests`). */
export const MAX_SERVICE_IN_FLIGHT = 8;

/** viewer → relay: a request to a service of the runner of one of the viewer's sessions. */
export interface ServiceRequestMessage {
  t: "service_message";
  serviceId: string;
  /** Chosen by the viewer; the reply and any progress carry it back. */
  requestId: string;
  sessionId: string;
  op: string;
  data?: Record<string, unknown>;
}

/**
 * relay → viewer. A final reply has `ok`; a progress message (`op:
 * "progress"`, same `requestId`) or an unsolicited one (`op:
 * "status_changed"`, no `requestId`) has `op` and no `ok`.
 */
export type ServiceReplyMessage =
  | {
    t: "service_message";
    serviceId: string;
    requestId: string;
    sessionId: string;
    ok: true;
    data: unknown;
  }
  | {
    t: "service_message";
    serviceId: string;
    requestId?: string;
    sessionId: string;
    ok: false;
    code: string;
    message: string;
  }
  | {
    t: "service_message";
    serviceId: string;
    requestId?: string;
    sessionId: string;
    op: string;
    data: unknown;
  };

/** One changed file in a status. */
export interface GitFileChange {
  /** Relative to the repository's top folder. */
  path: string;
  /** git's letter: M, A, D, R, C, T, U (conflict), ? (untracked). */
  status: string;
  /** The old path of a rename or copy. */
  origPath?: string;
  additions?: number;
  deletions?: number;
  binary?: boolean;
}

/** Answer of `status` (and the data of `status_changed`). */
export interface GitStatus {
  /** Current branch; null when detached. */
  branch: string | null;
  /** HEAD's commit; null before the first commit. */
  oid: string | null;
  upstream: string | null;
  ahead: number;
  behind: number;
  staged: GitFileChange[];
  unstaged: GitFileChange[];
  untracked: GitFileChange[];
  conflicted: GitFileChange[];
  /** Files left out past the list's cap (5000). */
  omitted: number;
  /** The repository's top folder on the runner. */
  root?: string;
}

/** Answer of `diff`. */
export interface GitDiff {
  path: string;
  staged: boolean;
  /** Unified diff text (git's own format). */
  diff: string;
  truncated: boolean;
  binary: boolean;
}

export interface GitBranch {
  name: string;
  remote: boolean;
  current: boolean;
  upstream: string | null;
  oid: string;
}

export interface GitCommitInfo {
  oid: string;
  author: string;
  email: string;
  /** Seconds since the epoch. */
  time: number;
  subject: string;
}

// ---------------------------------------------------------------------------
// Review: comments on diff lines, sent to the agent as one message

/** One comment on a range of lines of one file's diff. */
export interface ReviewComment {
  path: string;
  /** Which side the lines are on: the new file (`new`) or the old one (`old`, removed lines). */
  side: "new" | "old";
  startLine: number;
  endLine: number;
  /** The lines commented on, as shown in the diff (kept short). */
  excerpt?: string;
  body: string;
}

/** Longest excerpt kept per comment in the review message. */
const MAX_EXCERPT_LINES = 12;

/**
 * The one message a review becomes (see docs/protocol.md, "Review
 * message"): a header, then per comment the file and line range, the lines,
 * and the comment.
 */
export function formatReview(comments: ReviewComment[], summary = ""): string {
  const out: string[] = [
    `# Code review: ${comments.length} comment${comments.length === 1 ? "" : "s"}`,
    "",
    "Please address each comment below. Line numbers are in the " +
    "current version of the file (old-side comments refer to removed lines).",
  ];
  if (summary.trim()) out.push("", summary.trim());
  comments.forEach((c, i) => {
    const lines = c.startLine === c.endLine
      ? `line ${c.startLine}`
      : `lines ${c.startLine}-${c.endLine}`;
    out.push("", `## ${i + 1}. ${c.path}:${lines}${c.side === "old" ? " (removed)" : ""}`);
    if (c.excerpt) {
      const ex = c.excerpt.split("\n").slice(0, MAX_EXCERPT_LINES).join("\n");
      out.push("", "```", ex.replaceAll("```", "` ` `"), "```");
    }
    out.push("", c.body.trim());
  });
  return out.join("\n");
}
