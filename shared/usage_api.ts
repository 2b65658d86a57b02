/**
 * Wire types of the usage summary (`GET /api/runners/{runnerId}/usage`): the
 * relay's answer is exactly what the runner computed from pi's session files.
 * Plain types only; the web client imports them.
 *
 * @module
 */

/** The ranges the usage summary accepts: the last 7, 30 or 90 UTC days (today included), or all. */
export const USAGE_RANGES = ["7d", "30d", "90d", "all"] as const;
/** One of {@linkcode USAGE_RANGES}. */
export type UsageRange = typeof USAGE_RANGES[number];

/** The most sessions one answer lists (the most expensive first); totals still cover all. */
export const USAGE_MAX_SESSIONS = 1000;

/** Token counts and cost of one thing (a session, a day, a model) within the range. */
export interface UsageAmounts {
  /** Prompt tokens, cache reads and cache writes included. */
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
}

/** One pi conversation file with model activity in the range. */
export interface UsageSession extends UsageAmounts {
  /** The baton session it belongs to; `null` for a pi session baton did not start or has forgotten. */
  sessionId: string | null;
  /** pi's own id of the conversation (its header's `id`). */
  piSessionId: string | null;
  cwd: string | null;
  /** The model of the latest assistant message (pi's model id). */
  model: string | null;
  /** ISO time of pi's session header. */
  startedAt: string | null;
  /** ISO time of the latest assistant message counted. */
  lastActivityAt: string | null;
}

/** `GET /api/runners/{runnerId}/usage?range=`. */
export interface UsageResponse {
  ok: true;
  range: UsageRange;
  totalInputTokens: number;
  totalOutputTokens: number;
  totalCostUsd: number;
  /** Of `totalInputTokens`, the tokens read from and written to the provider's prompt cache. */
  totalCacheReadTokens: number;
  totalCacheWriteTokens: number;
  /** Most expensive first (then newest), at most {@linkcode USAGE_MAX_SESSIONS}. */
  sessions: UsageSession[];
  /** How many sessions had activity in the range (may exceed `sessions.length`). */
  sessionCount: number;
  /** `sessionCount > sessions.length`. */
  truncated: boolean;
  /** Per UTC day with activity, oldest first. */
  days: Array<UsageAmounts & { date: string }>;
  /** Per model, most expensive first. */
  models: Array<UsageAmounts & { model: string }>;
  /** Conversation files the index holds, and lines it could not read (corrupt or over the line cap). */
  filesIndexed: number;
  skippedLines: number;
}
