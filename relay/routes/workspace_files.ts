import { Hono } from "hono";
import { z } from "zod";
import {
  FILE_ERROR_STATUS,
  type FileErrorCode,
  type ListFilesRequest,
  type ListFilesResponse,
  type ReadFileRequest,
  SEARCH_MAX_LIMIT,
  SEARCH_MAX_QUERY,
  type SearchFilesRequest,
  type SearchFilesResponse,
} from "../../shared/workspace_files_api.ts";
import { HttpError, principal, readJson, type RelayEnv } from "../_http.ts";
import { RelayError } from "../errors.ts";
import type { WorkspaceFilesService } from "../workspace_files.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";
import { PathString } from "./trigger_schemas.ts";

const ListFiles = requestSchema<ListFilesRequest>()(z.object({ path: PathString.min(1) }));

const SearchFiles = requestSchema<SearchFilesRequest>()(z.object({
  cwd: PathString.min(1),
  query: z.string().max(SEARCH_MAX_QUERY),
  limit: z.number().int().min(1).max(SEARCH_MAX_LIMIT).optional(),
}));

const ReadFile = requestSchema<ReadFileRequest>()(z.object({
  path: PathString.min(1),
  encoding: z.enum(["utf8", "base64"]).optional(),
}));

const PATH_ERRORS = {
  400: "`bad_path` (not absolute), `not_a_directory`, `not_a_file`",
  403: "`path_outside_roots`: the path (after `..` and symlinks) is outside the runner's " +
    "workspace roots; nothing was read",
  404: "`not_found`: no such runner, or not the caller's; `path_not_found`",
  ...RUNNER_ERRORS,
} as const;

/** The runner's file error codes keep their own status (403, 404, 413, 415) rather than 502. */
function fileError(err: unknown): never {
  if (err instanceof RelayError && Object.hasOwn(FILE_ERROR_STATUS, err.code)) {
    throw new HttpError(FILE_ERROR_STATUS[err.code as FileErrorCode], err.code, err.message);
  }
  throw err;
}

/** `/api/runners/{runnerId}/files`, `/search-files`, `/read-file`: the runner's workspace. */
export function workspaceFileRoutes(files: WorkspaceFilesService): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();

  const listDoc = routeDoc({
    tag: "Runners",
    summary: "List a folder on a runner",
    description: "Folders first, then by name; at most 10,000 entries (`truncated` says more). " +
      "Read-only keys may call it.",
    auth: "principal",
    body: ListFiles,
    ok: "`{ok, path, files: [{name, type, size, mtime, symlink?}], truncated}`",
    errors: PATH_ERRORS,
  });
  app.post("/:runnerId/files", listDoc, async (c) => {
    const { userId } = principal(c);
    const body = await readJson(c, ListFiles);
    const res = await files.list(userId, c.req.param("runnerId"), body).catch(fileError);
    return c.json(res satisfies ListFilesResponse);
  });

  const searchDoc = routeDoc({
    tag: "Runners",
    summary: "Find files by name under a folder on a runner (fuzzy, honours .gitignore)",
    description: "Read-only keys may call it.",
    auth: "principal",
    body: SearchFiles,
    ok: "`{ok, files: [relative path], truncated, engine}`, best match first",
    errors: PATH_ERRORS,
  });
  app.post("/:runnerId/search-files", searchDoc, async (c) => {
    const { userId } = principal(c);
    const body = await readJson(c, SearchFiles);
    const res = await files.search(userId, c.req.param("runnerId"), body).catch(fileError);
    return c.json(res satisfies SearchFilesResponse);
  });

  const readDoc = routeDoc({
    tag: "Runners",
    summary: "Read a whole file on a runner",
    description: "`utf8` (default) up to 512 KiB, `base64` up to 10 MiB; a larger file is " +
      "refused, never cut. The body streams; a failure midway breaks the connection, so a " +
      "cut body is never valid JSON. Read-only keys may call it.",
    auth: "principal",
    body: ReadFile,
    ok: "`{ok, content, encoding, size, mtime}`",
    errors: {
      ...PATH_ERRORS,
      413: "`file_too_large`: over the encoding's cap",
      415: "`binary_file`: asked for as `utf8` but not UTF-8 text (a NUL byte or invalid UTF-8)",
      429: "`too_many_reads`: the runner streams 8 files already (Retry-After)",
    },
  });
  app.post("/:runnerId/read-file", readDoc, async (c) => {
    const { userId } = principal(c);
    const body = await readJson(c, ReadFile);
    const stream = await files.read(userId, c.req.param("runnerId"), body).catch(fileError);
    return c.body(stream, 200, {
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
    });
  });

  return app;
}
