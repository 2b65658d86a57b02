/**
 * `/api/runners/{runnerId}/skills`, `.../agents` and `.../plugins`: a
 * runner's skills and agent definitions (list, read, create, update, delete,
 * rescan) and its plugins, each asked of the runner over its control link
 * (`docs` and `plugins` requests, docs/protocol.md). The relay never reads the
 * runner's disk; it checks names, sizes and ownership before asking.
 *
 * @module
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { z } from "zod";
import {
  type AgentsChangeResponse,
  type AgentsListResponse,
  type CreateDocRequest,
  DOC_CONTENT_MAX_BYTES,
  type DocKind,
  docNameProblem,
  type DocResponse,
  type DocsChangeAnswer,
  type DocsListAnswer,
  type DocsRequest,
  type PluginsRefreshResponse,
  type PluginsRequest,
  type PluginsResponse,
  type SkillsChangeResponse,
  type SkillsListResponse,
  type UpdateDocRequest,
} from "../../shared/skills_api.ts";
import { HttpError, principal, readJson, type RelayEnv } from "../_http.ts";
import { conflict, invalid, rejected, RelayError } from "../errors.ts";
import type { RunnerRegistry } from "../runner_registry.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";
import { PathString } from "./trigger_schemas.ts";

/** How long the relay waits for the runner's answer (a first listing loads pi's resolver). */
const DOCS_TIMEOUT_MS = 15_000;

const Create = requestSchema<CreateDocRequest>()(z.object({
  name: z.string().max(1000),
  content: z.string(),
}));

const Update = requestSchema<UpdateDocRequest>()(z.object({ content: z.string() }));

const CWD_QUERY = {
  name: "cwd",
  description: "A project folder (absolute, inside the runner's workspace roots): adds what pi " +
    "finds for it (`.pi/skills`, `.agents/skills`, `.pi/agents`, `.pi/extensions`)",
  schema: { type: "string" },
};

const NOT_FOUND = "`not_found`: no such runner, or not the caller's";
const CWD_ERRORS = "`cwd_outside_roots`, `cwd_not_found`, `bad_request` (a relative `cwd`)";
const NAME_ERROR = "`invalid_name`: empty, over 64 characters, a path separator, `..`, " +
  "a leading dot, NUL or another character outside letters, digits, `.`, `_`, `-`";

const encoder = new TextEncoder();

/** The runner's own error codes these routes answer with their status. */
function mapRunnerError(err: unknown): never {
  if (err instanceof RelayError) {
    if (err.code === "already_exists") throw conflict(err.code, err.message);
    if (err.code === "content_too_large") throw new HttpError(413, err.code, err.message);
    if (err.code === "invalid_name") throw invalid(err.message, err.code);
  }
  throw err;
}

const isStrings = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === "string");

/** A runner's answer with the shape the route needs, or 502 `bad_runner_answer`. */
function shaped<T>(op: string, res: unknown, ok: (r: T) => boolean): T {
  if (typeof res !== "object" || res === null || !ok(res as T)) {
    throw rejected("bad_runner_answer", `Runner sent an invalid answer to '${op}'`);
  }
  return res as T;
}
const isList = (r: DocsListAnswer) =>
  isStrings(r.names) && Array.isArray(r.entries) && typeof r.folder === "string";
const isChange = (r: DocsChangeAnswer) => isStrings(r.names);
const isDoc = (r: DocResponse) => typeof r.content === "string" && typeof r.path === "string";
const isPlugins = (r: PluginsResponse) => Array.isArray(r.plugins);

function checkName(name: string): string {
  const problem = docNameProblem(name);
  if (problem !== null) throw invalid(problem, "invalid_name");
  return name;
}

function checkContent(content: string): string {
  if (encoder.encode(content).length > DOC_CONTENT_MAX_BYTES) {
    throw new HttpError(
      413,
      "content_too_large",
      `Content is over ${DOC_CONTENT_MAX_BYTES / 1024} KiB`,
    );
  }
  return content;
}

function cwdOf(c: Context<RelayEnv>): string | undefined {
  const cwd = c.req.query("cwd");
  if (cwd === undefined || cwd === "") return undefined;
  const ok = PathString.safeParse(cwd);
  if (!ok.success) throw invalid("cwd must be a path without NUL or control characters");
  return cwd;
}

/** Skills, agent definitions and plugins of the caller's runners. */
export function skillRoutes(runners: RunnerRegistry): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  /** Asks the runner (404 for a foreign or unknown one, 503 offline), mapping its codes. */
  const ask = async <T>(
    c: Context<RelayEnv>,
    op: string,
    data: unknown,
    ok: (r: T) => boolean,
  ): Promise<T> => {
    const link = await runners.connectedRunner(principal(c).userId, c.req.param("runnerId")!);
    let res: unknown;
    try {
      res = await link.request(op, data, DOCS_TIMEOUT_MS);
    } catch (err) {
      mapRunnerError(err);
    }
    return shaped(op, res, ok);
  };
  /** 404 before anything about the request is looked at, for a runner not the caller's. */
  const owned = (c: Context<RelayEnv>) =>
    runners.assertOwned(principal(c).userId, c.req.param("runnerId")!);

  for (const kind of ["skills", "agents"] as const satisfies DocKind[]) {
    const one = kind === "skills" ? "skill" : "agent definition";
    const listBody = (a: DocsListAnswer) =>
      kind === "skills"
        ? { skills: a.names, entries: a.entries, folder: a.folder } satisfies SkillsListResponse
        : { agents: a.names, entries: a.entries, folder: a.folder } satisfies AgentsListResponse;
    const changeBody = (names: string[]) =>
      kind === "skills"
        ? { ok: true, skills: names } satisfies SkillsChangeResponse
        : { ok: true, agents: names } satisfies AgentsChangeResponse;
    const base = `/:runnerId/${kind}`;

    app.get(
      base,
      routeDoc({
        tag: "Runners",
        summary: `The ${kind === "skills" ? "skills" : "agent definitions"} pi finds on a runner`,
        description: "From the runner's cache, which a change in its folders or a refresh renews.",
        auth: "principal",
        query: [CWD_QUERY],
        ok: `\`{${kind}: [name], entries: [{name, scope, path, editable, description?}], folder}\``,
        errors: { 400: CWD_ERRORS, 404: NOT_FOUND, ...RUNNER_ERRORS },
      }),
      async (c) => {
        await owned(c);
        const cwd = cwdOf(c);
        const req: DocsRequest = { kind, action: "list", ...(cwd ? { cwd } : {}) };
        return c.json(listBody(await ask<DocsListAnswer>(c, "docs", req, isList)));
      },
    );

    app.post(
      `${base}/refresh`,
      routeDoc({
        tag: "Runners",
        summary: `Rescan the runner's ${kind} from disk`,
        auth: "principal",
        ok: `\`{ok: true, ${kind}: [name]}\``,
        errors: { 404: NOT_FOUND, ...RUNNER_ERRORS },
      }),
      async (c) => {
        const res = await ask<DocsListAnswer>(c, "docs", { kind, action: "refresh" }, isList);
        return c.json(changeBody(res.names));
      },
    );

    app.get(
      `${base}/:name`,
      routeDoc({
        tag: "Runners",
        summary: `One ${one}: its Markdown`,
        auth: "principal",
        query: [CWD_QUERY],
        ok: "`{name, content, scope, path, editable}`",
        errors: {
          400: `${NAME_ERROR}; ${CWD_ERRORS}`,
          404: `${NOT_FOUND}; \`not_found\` also for no ${one} of that name`,
          413: "`content_too_large`: the file on the runner is over 256 KiB",
          ...RUNNER_ERRORS,
        },
      }),
      async (c) => {
        await owned(c);
        const name = checkName(c.req.param("name"));
        const cwd = cwdOf(c);
        const req: DocsRequest = { kind, action: "get", name, ...(cwd ? { cwd } : {}) };
        const doc = await ask<DocResponse>(c, "docs", req, isDoc);
        return c.json(
          {
            name: doc.name,
            content: doc.content,
            scope: doc.scope,
            path: doc.path,
            editable: doc.editable,
          } satisfies DocResponse,
        );
      },
    );

    app.post(
      base,
      routeDoc({
        tag: "Runners",
        summary: `Create a ${one} in the runner's user-level folder`,
        auth: "principal",
        body: Create,
        ok: `\`{ok: true, ${kind}: [name]}\``,
        errors: {
          400: NAME_ERROR,
          404: NOT_FOUND,
          409: `\`already_exists\`: a ${one} of that name is there; update it with PUT`,
          413: "`content_too_large`: content over 256 KiB (UTF-8)",
          ...RUNNER_ERRORS,
        },
      }),
      async (c) => {
        await owned(c);
        const body = await readJson(c, Create);
        const req: DocsRequest = {
          kind,
          action: "create",
          name: checkName(body.name),
          content: checkContent(body.content),
        };
        return c.json(changeBody((await ask<DocsChangeAnswer>(c, "docs", req, isChange)).names));
      },
    );

    app.put(
      `${base}/:name`,
      routeDoc({
        tag: "Runners",
        summary: `Replace a ${one}'s Markdown`,
        auth: "principal",
        body: Update,
        ok: `\`{ok: true, ${kind}: [name]}\``,
        errors: {
          400: NAME_ERROR,
          404: `${NOT_FOUND}; \`not_found\` also for no ${one} of that name in the user folder`,
          413: "`content_too_large`: content over 256 KiB (UTF-8)",
          ...RUNNER_ERRORS,
        },
      }),
      async (c) => {
        await owned(c);
        const body = await readJson(c, Update);
        const name = checkName(c.req.param("name"));
        const req: DocsRequest = {
          kind,
          action: "update",
          name,
          content: checkContent(body.content),
        };
        return c.json(changeBody((await ask<DocsChangeAnswer>(c, "docs", req, isChange)).names));
      },
    );

    app.delete(
      `${base}/:name`,
      routeDoc({
        tag: "Runners",
        summary: `Delete a ${one}${kind === "skills" ? " (its whole folder)" : ""}`,
        auth: "principal",
        ok: `\`{ok: true, ${kind}: [name]}\``,
        errors: {
          400: NAME_ERROR,
          404: `${NOT_FOUND}; \`not_found\` also for no ${one} of that name in the user folder`,
          ...RUNNER_ERRORS,
        },
      }),
      async (c) => {
        await owned(c);
        const name = checkName(c.req.param("name"));
        const req: DocsRequest = { kind, action: "delete", name };
        return c.json(changeBody((await ask<DocsChangeAnswer>(c, "docs", req, isChange)).names));
      },
    );
  }

  const pluginsDoc = (refresh: boolean) =>
    routeDoc({
      tag: "Runners",
      summary: refresh
        ? "Rescan the runner's plugins from disk"
        : "The plugins (pi extensions and packages) a runner's sessions load",
      auth: "principal",
      query: [CWD_QUERY],
      ok: `\`{${refresh ? "ok: true, " : ""}plugins: [{name, path, scope, source}], skipped}\`; ` +
        "`skipped`: the runner runs with --no-plugins, so sessions load none",
      errors: { 400: CWD_ERRORS, 404: NOT_FOUND, ...RUNNER_ERRORS },
    });
  const plugins = async (c: Context<RelayEnv>, action: PluginsRequest["action"]) => {
    await owned(c);
    const cwd = cwdOf(c);
    const res = await ask<PluginsResponse>(
      c,
      "plugins",
      { action, ...(cwd ? { cwd } : {}) },
      isPlugins,
    );
    return { plugins: res.plugins, skipped: res.skipped === true };
  };
  app.get("/:runnerId/plugins", pluginsDoc(false), async (c) => {
    return c.json(await plugins(c, "list") satisfies PluginsResponse);
  });
  app.post("/:runnerId/plugins/refresh", pluginsDoc(true), async (c) => {
    return c.json({ ok: true, ...await plugins(c, "refresh") } satisfies PluginsRefreshResponse);
  });

  return app;
}
