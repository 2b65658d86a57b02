import { Hono } from "hono";
import { z } from "zod";
import { INPUT_KINDS, MAX_SESSION_TITLE } from "../../shared/protocol.ts";
import { invalid } from "../errors.ts";
import { principal, readJson, type RelayEnv } from "../_http.ts";
import { eventsFrame } from "../fanout.ts";
import type { Hub } from "../hub.ts";

const Input = z.object({
  kind: z.enum(INPUT_KINDS as [string, ...string[]]),
  text: z.string().max(200_000).optional().default(""),
});

const Rename = z.object({
  title: z.string()
    .trim()
    .min(1, "Title must not be empty")
    .max(MAX_SESSION_TITLE, `Title must have at most ${MAX_SESSION_TITLE} characters`)
    // Line breaks, tabs and other control characters would break the one-line lists.
    .regex(/^[^\p{Cc}\u2028\u2029]*$/u, "Title must not contain control characters"),
});

/** `/api/sessions`: listing, pins, renaming, input and the stored event log. */
export function sessionRoutes(hub: Pick<Hub, "store" | "sessions" | "feed">): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  const { store, sessions, feed } = hub;

  // The last listing per user and query, reused while none of their sessions changes.
  const listings = new Map<string, { version: number; body: string }>();

  app.get("/", (c) => {
    const userId = principal(c).userId;
    const q = c.req.query("includePersisted");
    const includePersisted = !(q === "false" || q === "0");
    const runnerId = c.req.query("runnerId") ?? "";
    const key = `${userId}\n${includePersisted}\n${runnerId}`;
    const version = feed.version(userId);
    let cached = listings.get(key);
    if (!cached || cached.version !== version) {
      const all = store.sessions.listForUser(userId)
        .filter((s) => !runnerId || s.runnerId === runnerId)
        .map((s) => sessions.sessionInfo(s));
      const isLive = (s: { status: string }) => s.status === "starting" || s.status === "running";
      cached = {
        version,
        body: JSON.stringify({
          sessions: all.filter(isLive),
          persistedSessions: includePersisted ? all.filter((s) => !isLive(s)) : [],
        }),
      };
      if (listings.size > 1000) listings.clear();
      listings.set(key, cached);
    }
    return c.body(cached.body, 200, { "content-type": "application/json" });
  });

  app.get("/pinned", (c) => {
    const pinned = store.sessions.listPinned(principal(c).userId);
    return c.json({
      pinnedSessions: pinned.map((s) => ({ ...sessions.sessionInfo(s), isPinned: true })),
    });
  });

  app.get("/:id", (c) => {
    const s = sessions.owned(principal(c).userId, c.req.param("id"));
    return c.json({ session: sessions.sessionInfo(s) });
  });

  app.patch("/:id", async (c) => {
    const body = await readJson(c, Rename);
    const session = await sessions.rename(principal(c).userId, c.req.param("id"), body.title);
    return c.json({ session });
  });

  for (const [method, pinned] of [["put", true], ["delete", false]] as const) {
    app[method]("/:id/pin", (c) => {
      sessions.setPinned(principal(c).userId, c.req.param("id"), pinned);
      return c.json({ ok: true, isPinned: pinned });
    });
  }

  app.post("/:id/input", async (c) => {
    const body = await readJson(c, Input);
    await sessions.input(
      principal(c).userId,
      c.req.param("id"),
      body.kind as (typeof INPUT_KINDS)[number],
      body.text,
    );
    return c.json({ ok: true });
  });

  // The stored log, for clients that do not keep a socket open.
  app.get("/:id/events", (c) => {
    const id = c.req.param("id");
    sessions.owned(principal(c).userId, id);
    const since = Number(c.req.query("since") ?? "0");
    const limit = Number(c.req.query("limit") ?? "1000");
    if (!Number.isSafeInteger(since) || since < 0) {
      throw invalid("since must be a non-negative integer");
    }
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 5000) {
      throw invalid("limit must be an integer from 1 to 5000");
    }
    const frame = eventsFrame(id, store.events.after(id, since, limit));
    return c.body(frame, 200, { "content-type": "application/json" });
  });

  return app;
}
