import { Hono } from "hono";
import { z } from "zod";
import type {
  OkResponse,
  PinnedSessionsResponse,
  PinResponse,
  SessionInputRequest,
  SessionListResponse,
  SessionResponse,
  UpdateSessionRequest,
} from "../../shared/api.ts";
import { MAX_INPUT_ATTACHMENTS } from "../../shared/attachments_api.ts";
import { INPUT_KINDS, type InputKind, MAX_SESSION_TITLE } from "../../shared/protocol.ts";
import { invalid } from "../errors.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import { assertRunnerInScope } from "../scopes.ts";
import { eventPage, PAGE_BYTES, PAGE_EVENTS } from "../event_pages.ts";
import type { Hub } from "../hub.ts";
import { requestSchema, routeDoc, RUNNER_ERRORS } from "./_openapi.ts";

const Input = requestSchema<SessionInputRequest>()(z.object({
  kind: z.enum(INPUT_KINDS as [InputKind, ...InputKind[]]),
  // Its length is checked by the session service (text_too_long), as for the viewer socket's input.
  text: z.string().optional().default(""),
  attachments: z.array(z.string().max(100)).max(MAX_INPUT_ATTACHMENTS).optional(),
}));

const Update = requestSchema<UpdateSessionRequest>()(
  z.object({
    title: z.string()
      .trim()
      .min(1, "Title must not be empty")
      .max(MAX_SESSION_TITLE, `Title must have at most ${MAX_SESSION_TITLE} characters`)
      // Line breaks, tabs and other control characters would break the one-line lists.
      .regex(/^[^\p{Cc}\u2028\u2029]*$/u, "Title must not contain control characters")
      .optional(),
    pinned: z.boolean().optional(),
  }).refine((b) => b.title !== undefined || b.pinned !== undefined, {
    message: "Give a title, pinned, or both",
  }),
);

const NOT_FOUND = { 404: "`not_found`: no such session, or not the caller's" } as const;

/** `/api/sessions`: listing, pins, renaming, input and the stored event log. */
export function sessionRoutes(
  hub: Pick<Hub, "store" | "sessions" | "feed" | "deleteSession">,
): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const { store, sessions, feed } = hub;

  // The last listing per user and query, reused while none of their sessions changes.
  const listings = new Map<string, { version: number; body: string }>();

  const listDoc = routeDoc({
    tag: "Sessions",
    summary: "List the caller's sessions",
    description: "Served from memory while none of the caller's sessions changed.",
    auth: "principal",
    query: [
      {
        name: "includePersisted",
        description: "`false` or `0`: `persistedSessions` is left empty",
        schema: { type: "string", default: "true" },
      },
      { name: "runnerId", description: "Only this runner's sessions", schema: { type: "string" } },
    ],
    ok: "`{sessions, persistedSessions}`: live (`starting`, `running`) and finished, newest " +
      "first; a subagent has `parentId` (its parent session) and `agent` (its role)",
  });
  app.get("/", listDoc, async (c) => {
    const { userId, runnerId: bound } = principal(c);
    const q = c.req.query("includePersisted");
    const includePersisted = !(q === "false" || q === "0");
    const asked = c.req.query("runnerId") ?? "";
    // A key bound to a runner lists that runner's sessions only.
    if (bound !== null && asked && asked !== bound) assertRunnerInScope(principal(c), asked);
    const runnerId = bound ?? asked;
    const key = `${userId}\n${includePersisted}\n${runnerId}`;
    const version = feed.version(userId);
    let cached = listings.get(key);
    if (!cached || cached.version !== version) {
      const all = (await store.sessions.listForUser(userId))
        .filter((s) => !runnerId || s.runnerId === runnerId)
        .map((s) => sessions.sessionInfo(s));
      const isLive = (s: { status: string }) => s.status === "starting" || s.status === "running";
      cached = {
        version,
        body: JSON.stringify(
          {
            sessions: all.filter(isLive),
            persistedSessions: includePersisted ? all.filter((s) => !isLive(s)) : [],
          } satisfies SessionListResponse,
        ),
      };
      if (listings.size > 1000) listings.clear();
      listings.set(key, cached);
    }
    return c.body(cached.body, 200, { "content-type": "application/json" });
  });

  const pinnedDoc = routeDoc({
    tag: "Sessions",
    summary: "List the caller's pinned sessions",
    auth: "principal",
    ok: "`{pinnedSessions: [...]}`, of any status, newest first",
  });
  app.get("/pinned", pinnedDoc, async (c) => {
    const { userId, runnerId } = principal(c);
    const pinned = (await store.sessions.listPinned(userId))
      .filter((s) => runnerId === null || s.runnerId === runnerId);
    return c.json(
      {
        pinnedSessions: pinned.map((s) => ({ ...sessions.sessionInfo(s), isPinned: true })),
      } satisfies PinnedSessionsResponse,
    );
  });

  const getDoc = routeDoc({
    tag: "Sessions",
    summary: "One session",
    auth: "principal",
    ok: "`{session: {...}}`, with `parentId` (null unless a subagent) and `agent`",
    errors: NOT_FOUND,
  });
  app.get("/:id", getDoc, async (c) => {
    const s = await sessions.owned(principal(c).userId, c.req.param("id"));
    return c.json({ session: sessions.sessionInfo(s) } satisfies SessionResponse);
  });

  const updateDoc = routeDoc({
    tag: "Sessions",
    summary: "Rename a session, pin or unpin it",
    auth: "principal",
    body: Update,
    ok: "`{session: {...}}` as it now is",
    errors: NOT_FOUND,
  });
  app.patch("/:id", updateDoc, async (c) => {
    const body = await readJson(c, Update);
    const userId = principal(c).userId;
    const id = c.req.param("id");
    await sessions.owned(userId, id);
    if (body.pinned !== undefined) await sessions.setPinned(userId, id, body.pinned);
    const session = body.title !== undefined
      ? await sessions.rename(userId, id, body.title)
      : sessions.sessionInfo(await sessions.owned(userId, id));
    return c.json({ session } satisfies SessionResponse);
  });

  const deleteDoc = routeDoc({
    tag: "Sessions",
    summary: "Delete a session with its events and triggers",
    description:
      "Its runner is told (it stops a session that runs and deletes its conversation). " +
      "Its viewers get `session_deleted`. Answers once its events are deleted; the space " +
      "goes back to the file system shortly after.",
    auth: "principal",
    ok: "`{ok: true}`",
    errors: NOT_FOUND,
  });
  app.delete("/:id", deleteDoc, async (c) => {
    await hub.deleteSession(principal(c).userId, c.req.param("id"));
    return c.json({ ok: true } satisfies OkResponse);
  });

  for (const [method, pinned] of [["put", true], ["delete", false]] as const) {
    const pinDoc = routeDoc({
      tag: "Sessions",
      summary: pinned ? "Pin a session" : "Unpin a session",
      auth: "principal",
      ok: `\`{ok: true, isPinned: ${pinned}}\``,
      errors: NOT_FOUND,
    });
    app[method]("/:id/pin", pinDoc, async (c) => {
      await sessions.setPinned(principal(c).userId, c.req.param("id"), pinned);
      return c.json({ ok: true, isPinned: pinned } satisfies PinResponse);
    });
  }

  const inputDoc = routeDoc({
    tag: "Sessions",
    summary: "Send input to a session (prompt, steer, followUp, abort, end, dequeue)",
    auth: "principal",
    body: Input,
    ok: "`{ok: true}`: the session's worker took it; what follows arrives as events",
    errors: {
      400: "`text_too_long`: `text` over 200,000 characters (the viewer socket's limit too); " +
        "`bad_request`: attachments with a kind other than prompt, steer or followUp",
      404: "`not_found`: no such session, or not the caller's, or its runner no longer has it; " +
        "an attachment that is not one of this session's (or expired)",
      409: "`session_ended`, `busy` (a prompt while working), `not_ready`, `not_queued`",
      ...RUNNER_ERRORS,
    },
  });
  app.post("/:id/input", inputDoc, async (c) => {
    const body = await readJson(c, Input);
    await sessions.input(principal(c).userId, c.req.param("id"), body.kind, body.text, {
      attachments: body.attachments ?? [],
    });
    return c.json({ ok: true } satisfies OkResponse);
  });

  // The stored log, for clients that do not keep a socket open.
  const eventsDoc = routeDoc({
    tag: "Sessions",
    summary: "A session's stored event log, a page at a time",
    description: `At most \`limit\` events and ${PAGE_BYTES} bytes of them per page (one bigger ` +
      "event is a page by itself), streamed as it is read. `next` is the `since` of the next " +
      "page; `hasMore` says whether there is one.",
    auth: "principal",
    query: [
      {
        name: "since",
        description: "Events after this seq",
        schema: { type: "integer", minimum: 0, default: 0 },
      },
      {
        name: "limit",
        description: "At most this many events",
        schema: { type: "integer", minimum: 1, maximum: PAGE_EVENTS, default: 1000 },
      },
    ],
    ok: 'The viewer channel\'s `events` frame and where the next page starts: `{t: "events", ' +
      "sessionId, events: [...], next, hasMore}`",
    errors: { 400: "`bad_request`: `since` or `limit` out of range", ...NOT_FOUND },
  });
  app.get("/:id/events", eventsDoc, async (c) => {
    const id = c.req.param("id");
    await sessions.owned(principal(c).userId, id);
    const since = Number(c.req.query("since") ?? "0");
    const limit = Number(c.req.query("limit") ?? "1000");
    if (!Number.isSafeInteger(since) || since < 0) {
      throw invalid("since must be a non-negative integer");
    }
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > PAGE_EVENTS) {
      throw invalid(`limit must be an integer from 1 to ${PAGE_EVENTS}`);
    }
    return c.body(eventPage(store.events, id, { since, limit }), 200, {
      "content-type": "application/json",
    });
  });

  return app;
}
