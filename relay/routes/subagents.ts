/**
 * `GET /api/sessions/{id}/children`: the subagents a session's agent
 * started (relay/subagents.ts), oldest first. Each one is also in
 * `GET /api/sessions`, with its `parentId`.
 *
 * @module
 */
import { Hono } from "hono";
import type { SessionChildrenResponse } from "../../shared/subagents_api.ts";
import { principal, type RelayEnv } from "../_http.ts";
import type { Hub } from "../hub.ts";
import { routeDoc } from "./_openapi.ts";

/** `/api/sessions/{id}/children`. */
export function subagentRoutes(hub: Pick<Hub, "store" | "sessions">): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const doc = routeDoc({
    tag: "Sessions",
    summary: "A session's subagents",
    description: "The child sessions its agent started with the `subagent` tool, oldest first.",
    auth: "principal",
    ok: "`{sessions: [...]}`, each with `parentId` set to this session",
    errors: { 404: "`not_found`: no such session, or not the caller's" },
  });
  app.get("/:id/children", doc, async (c) => {
    const { userId, runnerId } = principal(c);
    const s = await hub.sessions.owned(userId, c.req.param("id"));
    const children = (await hub.store.sessions.listChildren(s.sessionId))
      .filter((k) => k.userId === userId && (runnerId === null || k.runnerId === runnerId));
    return c.json(
      {
        sessions: children.map((k) => hub.sessions.sessionInfo(k)),
      } satisfies SessionChildrenResponse,
    );
  });
  return app;
}
