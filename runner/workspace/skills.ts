/**
 * Skills and agent definitions on this runner, in pi's own formats and
 * folders, so what the API edits is what a session's pi loads:
 *
 * - a skill is `<name>/SKILL.md` (or a root `<name>.md`) in pi's skill
 *   folders: the agent dir's `skills/` (for baton `~/.baton/skills`, since
 *   the worker runs pi with `~/.baton` as its agent dir), `~/.agents/skills`,
 *   and for a project `.pi/skills` and `.agents/skills` up to the git root;
 *   the listing is pi's own resolution (../workspace/_pi_resources.ts);
 * - an agent definition is `<name>.md` in `~/.baton/agents` (user level) or
 *   the nearest `.pi/agents` above a project folder, where pi's subagent
 *   extension looks for them.
 *
 * Writes go to the user-level folders only (`~/.baton/skills`,
 * `~/.baton/agents`), atomically (a temporary file renamed over the old one),
 * owner-only like everything under `~/.baton`.
 *
 * @module
 */
import { basename, dirname, join } from "node:path";
import {
  DOC_CONTENT_MAX_BYTES,
  type DocEntry,
  type DocKind,
  docNameProblem,
  type DocResponse,
  type DocsChangeAnswer,
  type DocsListAnswer,
  type DocsRequest,
} from "../../shared/skills_api.ts";
import { RequestError } from "../control_link.ts";
import { FileShapeError, readBoundedText } from "../bounded_read.ts";
import { checkCwd, PathRejectedError } from "../roots.ts";
import { resolvePiResources, signatureOf, SignedCache, watchedFolders } from "./_pi_resources.ts";

/** What the catalog needs of the runner. */
export interface CatalogOptions {
  /** `<home>/.baton`, pi's agent dir for baton's sessions. */
  batonDir: string;
  home: string;
  /** Resolved workspace roots, or null for any folder. */
  roots: string[] | null;
}

const encoder = new TextEncoder();

/** Skills and agent definitions: listings from a cache, reads and atomic writes. */
export class DocCatalog {
  readonly #opts: CatalogOptions;
  readonly #cache = new SignedCache<DocsListAnswer>();

  constructor(options: CatalogOptions) {
    this.#opts = options;
  }

  /** The folder the API writes `kind` to. */
  folder(kind: DocKind): string {
    return join(this.#opts.batonDir, kind);
  }

  /** Answers one `docs` control request. */
  async request(data: unknown): Promise<DocsListAnswer | DocResponse | DocsChangeAnswer> {
    const req = data as DocsRequest;
    const kind = req?.kind;
    if (kind !== "skills" && kind !== "agents") {
      throw new RequestError("bad_request", "kind must be 'skills' or 'agents'");
    }
    switch (req.action) {
      case "list":
        return await this.list(kind, await this.#cwd(req.cwd));
      case "refresh":
        this.#cache.clear();
        return await this.list(kind, await this.#cwd(req.cwd));
      case "get":
        return await this.get(kind, checkName(req.name), await this.#cwd(req.cwd));
      case "create":
      case "update":
        return await this.write(kind, checkName(req.name), checkContent(req.content), req.action);
      case "delete":
        return await this.remove(kind, checkName(req.name));
      default:
        throw new RequestError("bad_request", "Unknown action");
    }
  }

  /** What pi finds of `kind` for the user (and for `cwd`'s project when given). */
  async list(kind: DocKind, cwd: string | null): Promise<DocsListAnswer> {
    const { batonDir, home } = this.#opts;
    const sig = await signatureOf(watchedFolders(batonDir, home, cwd));
    return await this.#cache.get(`${kind}\0${cwd ?? ""}`, sig, async () => {
      const entries = kind === "skills"
        ? await this.#skillEntries(cwd)
        : await this.#agentEntries(cwd);
      return { names: uniqueNames(entries), entries, folder: this.folder(kind) };
    });
  }

  /** One document: the user-level one first, else one found elsewhere (read-only). */
  async get(kind: DocKind, name: string, cwd: string | null): Promise<DocResponse> {
    const own = await this.#ownFile(kind, name);
    if (own) {
      return { name, content: await readCapped(own), scope: "user", path: own, editable: true };
    }
    const found = (await this.list(kind, cwd)).entries.find((e) => e.name === name);
    if (!found) throw notFound(kind, name);
    return {
      name,
      content: await readCapped(found.path),
      scope: found.scope,
      path: found.path,
      editable: found.editable,
    };
  }

  /** Creates (refused when it exists) or updates (refused when it does not) a user-level document. */
  async write(
    kind: DocKind,
    name: string,
    content: string,
    mode: "create" | "update",
  ): Promise<DocsChangeAnswer> {
    const existing = await this.#ownFile(kind, name);
    if (mode === "create" && existing) {
      throw new RequestError("already_exists", `${singular(kind)} already exists: '${name}'`);
    }
    if (mode === "update" && !existing) throw notFound(kind, name);
    const path = existing ??
      (kind === "skills"
        ? join(this.folder(kind), name, "SKILL.md")
        : join(this.folder(kind), `${name}.md`));
    await Deno.mkdir(dirname(path), { recursive: true, mode: 0o700 });
    await atomicWrite(path, content);
    this.#cache.clear();
    return { names: (await this.list(kind, null)).names };
  }

  /** Deletes a user-level document (a skill's whole folder, scripts included). */
  async remove(kind: DocKind, name: string): Promise<DocsChangeAnswer> {
    const existing = await this.#ownFile(kind, name);
    if (!existing) throw notFound(kind, name);
    const target = kind === "skills" && basename(existing) === "SKILL.md"
      ? dirname(existing)
      : existing;
    await Deno.remove(target, { recursive: true });
    this.#cache.clear();
    return { names: (await this.list(kind, null)).names };
  }

  /** The user-level file of `name`, if it exists. */
  async #ownFile(kind: DocKind, name: string): Promise<string | null> {
    const dir = this.folder(kind);
    const candidates = kind === "skills"
      ? [join(dir, name, "SKILL.md"), join(dir, `${name}.md`)]
      : [join(dir, `${name}.md`)];
    for (const p of candidates) {
      try {
        if ((await Deno.stat(p)).isFile) return p;
      } catch (err) {
        if (!(err instanceof Deno.errors.NotFound) && !(err instanceof Deno.errors.NotADirectory)) {
          throw err;
        }
      }
    }
    return null;
  }

  async #cwd(cwd: unknown): Promise<string | null> {
    if (cwd === undefined || cwd === null || cwd === "") return null;
    if (typeof cwd !== "string") throw new RequestError("bad_request", "cwd must be a string");
    return await checkedCwd(cwd, this.#opts);
  }

  async #skillEntries(cwd: string | null): Promise<DocEntry[]> {
    const own = this.folder("skills");
    const { skills } = await resolvePiResources(this.#opts.batonDir, cwd ?? this.#opts.batonDir);
    const out: DocEntry[] = [];
    for (const r of skills) {
      if (!r.enabled) continue;
      const scope = r.metadata.scope === "project" ? "project" : "user";
      // Without a folder, the project resources found around the agent dir are not a project's.
      if (cwd === null && scope === "project") continue;
      let path = r.path;
      try {
        if ((await Deno.stat(path)).isDirectory) path = join(path, "SKILL.md");
      } catch {
        continue;
      }
      const name = basename(path) === "SKILL.md"
        ? basename(dirname(path))
        : basename(path).replace(/\.md$/, "");
      if (docNameProblem(name) !== null) continue;
      const editable = dirname(path) === own || dirname(dirname(path)) === own;
      out.push({ name, scope, path, editable, ...await descriptionOf(path) });
    }
    return out;
  }

  async #agentEntries(cwd: string | null): Promise<DocEntry[]> {
    const out: DocEntry[] = [];
    if (cwd !== null) {
      const project = await nearestProjectAgents(cwd);
      if (project) out.push(...await agentsIn(project, "project", false));
    }
    out.push(...await agentsIn(this.folder("agents"), "user", true));
    return out;
  }
}

/** `cwd` checked against the workspace roots, as a spawn's is. */
export async function checkedCwd(cwd: string, opts: CatalogOptions): Promise<string> {
  try {
    return await checkCwd(cwd, opts.roots, { home: opts.home });
  } catch (err) {
    if (err instanceof PathRejectedError) throw new RequestError(err.code, err.message);
    throw err;
  }
}

function checkName(name: unknown): string {
  const problem = docNameProblem(name);
  if (problem !== null) throw new RequestError("invalid_name", problem);
  return name as string;
}

function checkContent(content: unknown): string {
  if (typeof content !== "string") {
    throw new RequestError("bad_request", "content must be a string");
  }
  if (encoder.encode(content).length > DOC_CONTENT_MAX_BYTES) {
    throw new RequestError(
      "content_too_large",
      `Content is over ${DOC_CONTENT_MAX_BYTES / 1024} KiB`,
    );
  }
  return content;
}

function singular(kind: DocKind): string {
  return kind === "skills" ? "Skill" : "Agent definition";
}

function notFound(kind: DocKind, name: string): RequestError {
  return new RequestError("not_found", `${singular(kind)} not found: '${name}'`);
}

/** Names in order, each once (the first found wins, as in pi). */
function uniqueNames(entries: DocEntry[]): string[] {
  return [...new Set(entries.map((e) => e.name))];
}

/** A file's text, refused whole when it is over the cap (never cut) or not a regular file. */
async function readCapped(path: string): Promise<string> {
  try {
    return await readBoundedText(path, DOC_CONTENT_MAX_BYTES);
  } catch (err) {
    if (!(err instanceof FileShapeError)) throw err;
    throw err.code === "too_large"
      ? new RequestError(
        "content_too_large",
        `File is over ${DOC_CONTENT_MAX_BYTES / 1024} KiB: '${path}'`,
      )
      : new RequestError("not_a_file", `Not a regular file: '${path}'`);
  }
}

/** Writes `content` to `path` through a temporary file beside it, so a reader never sees half. */
async function atomicWrite(path: string, content: string): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${crypto.randomUUID()}.tmp`);
  try {
    await Deno.writeTextFile(tmp, content, { mode: 0o600 });
    await Deno.rename(tmp, path);
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw err;
  }
}

/** The frontmatter's `description`, read from the file's first 4 KiB. */
async function descriptionOf(path: string): Promise<{ description?: string }> {
  let head: string;
  try {
    using f = await Deno.open(path);
    const buf = new Uint8Array(4096);
    const n = await f.read(buf);
    head = new TextDecoder().decode(buf.subarray(0, n ?? 0));
  } catch {
    return {};
  }
  const fm = head.match(/^---\r?\n([\s\S]*?)\r?\n---/);
  const line = fm?.[1]?.match(/^description:\s*(.+)$/m);
  if (!line) return {};
  const text = line[1]!.trim().replace(/^(["'])(.*)\1$/, "$2");
  return text ? { description: text.slice(0, 1024) } : {};
}

/** The nearest `.pi/agents` folder at or above `cwd` (pi's subagent extension's rule). */
async function nearestProjectAgents(cwd: string): Promise<string | null> {
  let dir = cwd;
  while (true) {
    const candidate = join(dir, ".pi", "agents");
    try {
      if ((await Deno.stat(candidate)).isDirectory) return candidate;
    } catch {
      // Not here.
    }
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/** The `<name>.md` files of an agents folder. */
async function agentsIn(dir: string, scope: "user" | "project", editable: boolean) {
  const out: DocEntry[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      if (!e.name.endsWith(".md") || e.isDirectory) continue;
      const name = e.name.slice(0, -3);
      if (docNameProblem(name) !== null) continue;
      const path = join(dir, e.name);
      out.push({ name, scope, path, editable, ...await descriptionOf(path) });
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound) && !(err instanceof Deno.errors.NotADirectory)) {
      throw err;
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}
