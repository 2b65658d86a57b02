/**
 * The HTTP API: every route under `/api`, with the principal and scope
 * checks in front of them and the OpenAPI document that describes them.
 * createRelay loads this module on the first request under `/api`, so a
 * relay nobody has used yet carries neither the routes nor the libraries
 * that validate and describe them (zod, hono-openapi: about 15 MB).
 *
 * @module
 */
import { type ErrorHandler, type Handler, Hono } from "hono";
import type { Attachments } from "./attachments.ts";
import type { Auth } from "./auth.ts";
import { errorResponse, type RelayEnv } from "./_http.ts";
import type { Hub } from "./hub.ts";
import { requirePrincipal } from "./principal.ts";
import { RecentFolders } from "./recent_folders.ts";
import { scopeGuard } from "./scopes.ts";
import type { AsyncStore } from "./store/mod.ts";
import type { TriggerListeners } from "./trigger_listeners.ts";
import type { Triggers } from "./triggers.ts";
import type { Webhooks } from "./webhooks.ts";
import { openApiRoute, routeDoc } from "./routes/_openapi.ts";
import { operationDocs } from "./routes/operations.ts";
import { pushKeyRoute, pushRoutes } from "./routes/push.ts";
import { accountRoutes } from "./routes/accounts.ts";
import { attachmentDownloadRoutes, attachmentUploadRoutes } from "./routes/attachments.ts";
import { keyRoutes } from "./routes/keys.ts";
import { runnerRoutes } from "./routes/runners.ts";
import { sessionRoutes } from "./routes/sessions.ts";
import { subagentRoutes } from "./routes/subagents.ts";
import { settingsRoutes } from "./routes/settings.ts";
import { skillRoutes } from "./routes/skills.ts";
import { usageRoutes } from "./routes/usage.ts";
import { workspaceFileRoutes } from "./routes/workspace_files.ts";
import { WorkspaceFilesService } from "./workspace_files.ts";
import { sandboxRoutes } from "./routes/sandbox.ts";
import { runnerTriggerRoutes, sessionTriggerRoutes } from "./routes/triggers.ts";
import { webhookFireRoute, webhookRoutes } from "./routes/webhooks.ts";
import { tunnelRoutes } from "./routes/tunnel.ts";
import { terminalRoutes } from "./routes/terminals.ts";
import { runnerServiceRoutes } from "./routes/runner_services.ts";
import type { RunnerServices } from "./runner_services.ts";
import { Questions } from "./questions.ts";
import {
  pushAnswerRoute,
  runnerApprovalRoutes,
  sessionQuestionRoutes,
} from "./routes/questions.ts";

/** What the API's routes are built over. */
export interface ApiOptions {
  auth: Auth;
  store: AsyncStore;
  hub: Hub;
  triggers: Triggers;
  listeners: TriggerListeners;
  webhooks: Webhooks;
  /** What each runner's services announced (panels, sigils). */
  runnerServices: RunnerServices;
  attachments: Attachments;
  allowSignup: boolean;
  trustProxy: boolean;
  originAllowed: (req: Request) => boolean;
  /** The relay's error answers, shared with the routes outside /api. */
  onError: ErrorHandler<RelayEnv>;
  /** `GET /health`, which the relay serves itself: the document describes it too. */
  health: Handler<RelayEnv>;
  /** The VAPID public key and the endpoint origins exempt from the SSRF checks. */
  push: { publicKey: string; allowedOrigins: ReadonlySet<string> };
}

/** Every `/api` route, on an app that receives the whole request (its path starts with /api). */
export function apiRoutes(o: ApiOptions): Hono<RelayEnv> {
  const app = new Hono<RelayEnv>();
  app.onError(o.onError);
  app.notFound((c) =>
    errorResponse(c, 404, "not_found", `No route: ${c.req.method} ${c.req.path}`)
  );

  // The API's contract, public: it holds what the source does, none of the relay's data.
  const documented = new Hono<RelayEnv>();
  app.get("/api/openapi.json", openApiRoute(documented));
  app.route(
    "/api",
    accountRoutes({
      auth: o.auth,
      store: o.store,
      hub: o.hub,
      allowSignup: o.allowSignup,
      trustProxy: o.trustProxy,
    }),
  );
  // Webhook senders prove themselves with a signature, not a cookie or key.
  app.route("/api/webhooks", webhookFireRoute(o.webhooks));
  // Downloads authenticate themselves: they also take the key as ?apiKey=.
  app.route("/api/attachments", attachmentDownloadRoutes(o.attachments, o.auth));

  // The tunnel takes the owner's cookie only, and checks it itself.
  app.route(
    "/api/tunnel",
    tunnelRoutes({
      auth: o.auth,
      tunnels: o.hub.tunnels,
      store: o.hub.store,
      originAllowed: o.originAllowed,
    }),
  );
  // A page asks for the key before its user subscribes (spec: Authentication rule 1).
  app.route("/api/push", pushKeyRoute(o.push.publicKey));

  // Every other /api route needs a principal (cookie or key).
  app.use("/api/*", requirePrincipal(o.auth, o.originAllowed));
  // Read-only keys, keys bound to a runner and runner tokens reach less.
  app.use("/api/*", scopeGuard(o.store));
  app.route("/api/keys", keyRoutes(o.store, o.hub.credentials));
  app.route(
    "/api/runners",
    runnerRoutes(o.hub.runners, o.hub.sessions, new RecentFolders(o.hub.store, o.hub.runners)),
  );
  app.route("/api/runners", runnerTriggerRoutes(o.listeners));
  app.route("/api/runners", skillRoutes(o.hub.runners));
  app.route("/api/runners", usageRoutes(o.hub.runners));
  app.route("/api/runners", terminalRoutes(o.hub.runners));
  app.route("/api/runners", runnerServiceRoutes(o.hub.runners, o.runnerServices));
  app.route(
    "/api/runners",
    workspaceFileRoutes(new WorkspaceFilesService({ runners: o.hub.runners })),
  );
  app.route("/api/runners", sandboxRoutes(o.hub.runners));
  const questions = new Questions({
    store: o.hub.store,
    runners: o.hub.runners,
    owned: (userId, id) => o.hub.sessions.owned(userId, id),
  });
  app.route("/api/runners", runnerApprovalRoutes(questions));
  app.route("/api/sessions", sessionQuestionRoutes(questions));
  app.route("/api/sessions", sessionRoutes(o.hub));
  app.route("/api/sessions", subagentRoutes(o.hub));
  app.route("/api/sessions", sessionTriggerRoutes(o.triggers));
  app.route("/api/sessions", attachmentUploadRoutes(o.attachments, o.hub.sessions));
  app.route("/api/settings", settingsRoutes(o.store));
  app.route("/api/push", pushRoutes(o.store, o.push.allowedOrigins));
  app.route("/api/push", pushAnswerRoute(questions, o.hub.push));
  app.route("/api/webhooks", webhookRoutes(o.webhooks));

  const healthDoc = routeDoc({
    tag: "Health",
    summary: "Liveness: the process serves requests (the database is not queried)",
    auth: "none",
    ok: '`{"status": "ok"}`',
  });
  documented.get("/health", healthDoc, o.health);
  operationDocs(documented);
  documented.route("/", app);
  return app;
}
