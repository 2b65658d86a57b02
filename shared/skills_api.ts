/**
 * Skills, agent definitions and plugins of a runner: the HTTP bodies of
 * `/api/runners/{runnerId}/skills|agents|plugins`, the control-channel
 * requests behind them, and the one name rule both ends check.
 *
 * Skills and agent definitions are pi's own files (see docs/api.md, "Skills,
 * agents and plugins"): what is edited here is what a session's pi loads.
 *
 * @module
 */

/** The two document families; each is also the key of its list in the answers. */
export type DocKind = "skills" | "agents";

/** Longest name (pi's own rule for a skill's name is 64 characters). */
export const DOC_NAME_MAX = 64;

/**
 * Largest skill or agent definition, in UTF-8 bytes. pi puts only a skill's
 * description in the prompt and reads the rest on demand; 256 KiB is far
 * past any real SKILL.md yet keeps an answer well inside a control message.
 */
export const DOC_CONTENT_MAX_BYTES = 256 * 1024;

const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

/**
 * Why `name` is not a usable skill or agent name, or null when it is: 1-64
 * letters, digits, `.`, `_` or `-`, not starting with a dot and without
 * `..`, so it is one folder or file name inside its folder and nothing else.
 */
export function docNameProblem(name: unknown): string | null {
  if (typeof name !== "string") return "Name must be a string";
  const shown = JSON.stringify(name.length > 80 ? name.slice(0, 80) + "…" : name);
  if (name.length === 0 || name.length > DOC_NAME_MAX) {
    return `Invalid name: ${shown} (1 to ${DOC_NAME_MAX} characters)`;
  }
  if (!NAME_RE.test(name) || name.includes("..")) {
    return `Invalid name: ${shown} (letters, digits, '.', '_' or '-' only; no path ` +
      `separators, no '..', no leading dot)`;
  }
  return null;
}

/** Where a listed skill or agent definition comes from. */
export type DocScope = "user" | "project";

/** One skill or agent definition a runner found, with where it lives. */
export interface DocEntry {
  name: string;
  /** `user`: the runner's own folders; `project`: the `cwd` given to the listing. */
  scope: DocScope;
  /** The file pi reads (a SKILL.md, or the definition's .md file). */
  path: string;
  /** Only entries in the folder baton writes to may be changed through the API. */
  editable: boolean;
  /** The frontmatter's `description` (pi skips a skill without one). */
  description?: string;
}

/** `GET /api/runners/{runnerId}/skills`. */
export interface SkillsListResponse {
  skills: string[];
  entries: DocEntry[];
  /** The folder created skills go to. */
  folder: string;
}

/** `GET /api/runners/{runnerId}/agents`. */
export interface AgentsListResponse {
  agents: string[];
  entries: DocEntry[];
  /** The folder created agent definitions go to. */
  folder: string;
}

/** `GET .../skills/{name}` and `.../agents/{name}`. */
export interface DocResponse {
  name: string;
  content: string;
  scope: DocScope;
  path: string;
  editable: boolean;
}

/** `POST .../skills` and `.../agents`. */
export interface CreateDocRequest {
  name: string;
  content: string;
}

/** `PUT .../skills/{name}` and `.../agents/{name}`. */
export interface UpdateDocRequest {
  content: string;
}

/** Create, update, delete and refresh of skills. */
export interface SkillsChangeResponse {
  ok: true;
  skills: string[];
}

/** Create, update, delete and refresh of agent definitions. */
export interface AgentsChangeResponse {
  ok: true;
  agents: string[];
}

/** A pi extension or package a session on the runner loads. */
export interface PluginInfo {
  name: string;
  /** The extension's entry file. */
  path: string;
  scope: DocScope;
  /** `auto` (found in an extensions folder), `local` (settings.json), or the package's source. */
  source: string;
}

/** `GET /api/runners/{runnerId}/plugins`. */
export interface PluginsResponse {
  plugins: PluginInfo[];
  /** The runner runs with `--no-plugins` (or `BATON_NO_PLUGINS=1`): sessions load none of them. */
  skipped: boolean;
}

/** `POST /api/runners/{runnerId}/plugins/refresh`. */
export interface PluginsRefreshResponse extends PluginsResponse {
  ok: true;
}

/** The control request `docs` (relay → runner). */
export type DocsRequest =
  | { kind: DocKind; action: "list" | "refresh"; cwd?: string }
  | { kind: DocKind; action: "get"; name: string; cwd?: string }
  | { kind: DocKind; action: "create" | "update"; name: string; content: string }
  | { kind: DocKind; action: "delete"; name: string };

/** The runner's answer to a `docs` list or refresh. */
export interface DocsListAnswer {
  names: string[];
  entries: DocEntry[];
  folder: string;
}

/** The runner's answer to a `docs` write. */
export interface DocsChangeAnswer {
  names: string[];
}

/** The control request `plugins` (relay → runner). */
export interface PluginsRequest {
  action: "list" | "refresh";
  cwd?: string;
}
