/**
 * The relay's HTTP API as types: the request and response body of every
 * route, once. The relay's route modules tie their zod request schemas and
 * their `c.json(...)` bodies to these, the web client calls the API with
 * them, and docs/api.md describes them in prose. Plain types only (no zod)
 * so the web bundle does not grow; `GET /api/openapi.json` is the same
 * contract as a document, generated from the relay's request schemas.
 *
 * Each feature's wire types beyond the core (triggers, skills, push,
 * subagents, ...) go in a `shared/<feature>_api.ts` of their own, re-exported
 * here, so this stays the one place the HTTP contract is read from.
 *
 * @module
 */
import type {
  InputKind,
  ModelInfo,
  ModelRef,
  RunnerInfo,
  SessionEvent,
  SessionInfo,
  WireError,
} from "./protocol.ts";
import type { FilterMode, TriggerFilter } from "./triggers.ts";

// ---------------------------------------------------------------------------
// Common

/** The body of every error the relay itself answers (not better-auth's `/api/auth/*`). */
export interface ErrorResponse {
  error: WireError;
}

/** The answer of a change that has nothing else to say. */
export interface OkResponse {
  ok: true;
}

/** `GET /health`. */
export interface HealthResponse {
  status: "ok";
}

// ---------------------------------------------------------------------------
// Accounts (no credentials needed)

/** `GET /api/setup-status`: what the sign-in screen needs before anyone is signed in. */
export interface SetupStatusResponse {
  needsOwner: boolean;
  allowSignup: boolean;
}

/** `POST /api/register`: sign in (or create the account, with `name`) and get a new key. */
export interface RegisterRequest {
  name?: string;
  email: string;
  password: string;
}

/** The answer of `POST /api/register`: a new API key named `cli`. */
export interface RegisterResponse {
  ok: true;
  key: string;
}

// ---------------------------------------------------------------------------
// Keys

/** `api` keys start with `bk_`, runner tokens with `brt_`. */
export type KeyKind = "api" | "runner";

/**
 * What a key may do. `full`: what its account may (the default of API keys);
 * `read`: only read (GET); `runner`: a runner token's own channels, its
 * runner's trigger broadcasts and triggers into that runner's sessions.
 */
export type KeyScope = "full" | "read" | "runner";

/** `POST /api/keys`. */
export interface CreateKeyRequest {
  name?: string;
  expiresInDays?: number | null;
  /** Of an API key: `full` (default) or `read`. A runner token is always `runner`. */
  scope?: "full" | "read";
  /**
   * Binds the key to one of the caller's runners: it reaches only that runner
   * and its sessions. A runner token without one is bound by its first hello.
   */
  runnerId?: string | null;
}

/** A key as the answer that created it holds it: the secret, this once. */
export interface CreatedKey {
  id: string;
  key: string;
  name: string;
  kind: KeyKind;
  scope: KeyScope;
  runnerId: string | null;
  prefix: string;
  expiresAt: string | null;
}

/** The answer of `POST /api/keys` (201). */
export interface CreateKeyResponse extends CreatedKey {
  ok: true;
}

/** A key as `GET /api/keys` lists it: never the secret again. */
export interface KeyInfo {
  id: string;
  name: string;
  kind: KeyKind;
  scope: KeyScope;
  /** The one runner the key reaches, if it is bound to one. */
  runnerId: string | null;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  expired: boolean;
}

/** `GET /api/keys`, newest first. */
export interface KeyListResponse {
  keys: KeyInfo[];
}

// ---------------------------------------------------------------------------
// Runners

/** `GET /api/runners`: an array, not wrapped in an object. */
export type RunnerListResponse = RunnerInfo[];

/** `POST /api/runners/spawn`. */
export interface SpawnSessionRequest {
  runnerId: string;
  prompt?: string;
  cwd?: string | null;
  model?: ModelRef | null;
  /** Ids of the caller's attachments (of sessions on the same runner) for the first prompt. */
  attachments?: string[];
}

/** The answer of `POST /api/runners/spawn`. */
export interface SpawnSessionResponse {
  sessionId: string;
  /** `<base URL>/session/<sessionId>`: the session in the web client. */
  shareUrl: string;
}

/** `POST /api/runners/restart` and `POST /api/runners/stop`. */
export interface RunnerRequest {
  runnerId: string;
}

/** `GET /api/runners/{runnerId}/models`. */
export interface ModelsResponse {
  models: ModelInfo[];
  /** Why pi could not load `models.json` (whose models are then missing). */
  error?: string;
}

/** `GET /api/runners/{runnerId}/recent-folders`, newest first. */
export interface RecentFoldersResponse {
  folders: string[];
}

/** `DELETE /api/runners/{runnerId}/recent-folders`. */
export interface DismissFolderRequest {
  path: string;
}

/** The answer of `DELETE /api/runners/{runnerId}/recent-folders`. */
export interface DismissFolderResponse {
  ok: true;
  /** Whether the folder was in the list. */
  deleted: boolean;
}

// ---------------------------------------------------------------------------
// Sessions

/** `GET /api/sessions`: live sessions apart from finished ones, newest first. */
export interface SessionListResponse {
  sessions: SessionInfo[];
  persistedSessions: SessionInfo[];
}

/** `GET /api/sessions/pinned`. */
export interface PinnedSessionsResponse {
  pinnedSessions: SessionInfo[];
}

/** `GET /api/sessions/{id}` and the answer of a rename. */
export interface SessionResponse {
  session: SessionInfo;
}

/** `PATCH /api/sessions/{id}`: a new title, a pin, or both (at least one). */
export interface UpdateSessionRequest {
  title?: string;
  /** Pinned sessions are listed first and never removed by retention. */
  pinned?: boolean;
}

/** `PATCH /api/sessions/{id}` with a new title. */
export type RenameSessionRequest = UpdateSessionRequest & { title: string };

/** `PUT` and `DELETE /api/sessions/{id}/pin`. */
export interface PinResponse {
  ok: true;
  isPinned: boolean;
}

/** `POST /api/sessions/{id}/input`. */
export interface SessionInputRequest {
  kind: InputKind;
  text?: string;
  /** Ids of attachments uploaded into this session (with `prompt`, `steer`, `followUp`). */
  attachments?: string[];
}

/**
 * `GET /api/sessions/{id}/events`: one page of the stored log, as the viewer
 * channel's `events` frame, and where the next page starts.
 */
export interface SessionEventsResponse {
  t: "events";
  sessionId: string;
  events: SessionEvent[];
  /** The `since` of the next page: the last seq in this one (`since` when it is empty). */
  next: number;
  /** Whether the log held events after `next` when the page was read. */
  hasMore: boolean;
}

// ---------------------------------------------------------------------------
// Triggers: subscriptions, listeners, history, broadcasts (their own module, re-exported here)
export type * from "./triggers_api.ts";

// ---------------------------------------------------------------------------
// Settings

/** `GET /api/settings/hidden-models`: `<provider>/<model_id>` each. */
export interface HiddenModelsResponse {
  hiddenModels: string[];
}

/** `PUT /api/settings/hidden-models`: the new list, replacing the old one. */
export interface HiddenModelsRequest {
  hiddenModels: string[];
}

/** The answer of `PUT /api/settings/hidden-models` (duplicates dropped). */
export interface SetHiddenModelsResponse {
  ok: true;
  hiddenModels: string[];
}

// ---------------------------------------------------------------------------
// Webhooks

/** A webhook; `secret` only in the answers of its creation and of `GET /api/webhooks/{id}`. */
export interface Webhook {
  id: string;
  userId: string;
  name: string;
  source: string;
  secret?: string;
  runnerId: string | null;
  cwd: string | null;
  prompt: string | null;
  model: ModelRef | null;
  eventFilter: string[];
  filters: TriggerFilter[];
  filterMode: FilterMode;
  enabled: boolean;
  /**
   * Refuse deliveries a captured copy of could start sessions again: legacy
   * (body-only) signatures, and GitHub's without `X-GitHub-Delivery` or whose
   * body came before under another delivery id. New webhooks: true.
   */
  requireReplayProtection: boolean;
  /** `<base URL>/api/webhooks/<id>/fire`. */
  url: string;
  createdAt: string;
  updatedAt: string;
}

/** `POST /api/webhooks`. */
export interface CreateWebhookRequest {
  name: string;
  source: string;
  runnerId?: string | null;
  cwd?: string | null;
  prompt?: string | null;
  model?: ModelRef | null;
  eventFilter?: string[] | null;
  filters?: TriggerFilter[] | null;
  filterMode?: FilterMode | null;
  /** Default true. */
  requireReplayProtection?: boolean;
}

/** `PUT /api/webhooks/{id}`: any creation field (`null` clears it), and `enabled`. */
export interface UpdateWebhookRequest extends Partial<CreateWebhookRequest> {
  enabled?: boolean;
}

/** One webhook: create (201, with the secret), `GET /{id}` (with it), `PUT` (without). */
export interface WebhookResponse {
  webhook: Webhook;
}

/** `GET /api/webhooks`, newest first, without secrets. */
export interface WebhookListResponse {
  webhooks: Webhook[];
}

/**
 * The 200 answers of `POST /api/webhooks/{id}/fire`: a session started (or,
 * `duplicate`, a redelivery of one that did), or the filters did not match.
 */
export type WebhookFireResponse =
  | { ok: true; triggerId: string; sessionId: string; duplicate?: true }
  | { ok: true; filtered: true };

// ---------------------------------------------------------------------------
// Skills, agent definitions and plugins (their own module, re-exported here)

export type * from "./skills_api.ts";

// Push notifications (their own module, re-exported here)
export type * from "./push_api.ts";

// Subagents: `GET /api/sessions/{id}/children` and the `subagent` tool's details (their own module)
export type * from "./subagents_api.ts";
export type * from "./questions_api.ts";
