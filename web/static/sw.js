// baton's service worker: shows the relay's push notifications, opens their
// session on tap, and sends a notification's button or inline reply to
// /api/push/answer (docs/push.md, docs/questions.md). Served at /sw.js so that
// its scope is the whole app. Plain JavaScript: it is served as written, not
// bundled.

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

/** A same-origin path from a payload's url, or "/" for anything else. */
function pathOf(url) {
  if (typeof url !== "string") return "/";
  try {
    const u = new URL(url, self.location.origin);
    return u.origin === self.location.origin ? u.pathname + u.search : "/";
  } catch {
    return "/";
  }
}

self.addEventListener("push", (event) => {
  let p = {};
  try {
    p = event.data ? event.data.json() : {};
  } catch {
    p = { body: event.data ? event.data.text() : "" };
  }
  const title = typeof p.title === "string" && p.title ? p.title : "baton";
  if (p.resolved) {
    event.waitUntil(remember(p.toolCallId).catch(() => {}).then(() => withdraw(p, title)));
    return;
  }
  event.waitUntil(
    withdrawnBefore(p.toolCallId).catch(() => false).then((late) =>
      late
        // The push service delivered the withdrawal first: the question is over already.
        ? withdraw({ ...p, body: answeredText(p.body) }, title)
        : show(p, title)
    ),
  );
});

/** Shows a push's notification (agent_finished, agent_error, a waiting question). */
function show(p, title) {
  // agent_needs_input in collab mode: the answers its buttons and reply send.
  const actions = Array.isArray(p.actions)
    ? p.actions.filter((a) => a && typeof a.action === "string" && typeof a.title === "string")
    : [];
  return self.registration.showNotification(title, {
    body: typeof p.body === "string" ? p.body : "",
    // One notification per session: a newer one replaces it, and still alerts.
    tag: typeof p.tag === "string" ? p.tag : undefined,
    renotify: typeof p.tag === "string",
    icon: "/icons/icon-192.png",
    badge: "/icons/icon-192.png",
    timestamp: typeof p.ts === "number" ? p.ts : Date.now(),
    // A question waits until someone answers: the notification stays too.
    requireInteraction: p.kind === "agent_needs_input",
    actions: actions.map((a) => ({
      action: a.action,
      title: a.title,
      ...(a.type === "text" ? { type: "text", placeholder: a.placeholder || "" } : {}),
    })),
    data: {
      url: pathOf(p.url),
      kind: p.kind,
      sessionId: p.sessionId,
      ...(typeof p.toolCallId === "string"
        ? {
          toolCallId: p.toolCallId,
          answers: Object.fromEntries(
            actions.filter((a) => typeof a.answer === "string").map((a) => [a.action, a.answer]),
          ),
        }
        : {}),
    },
  });
}

/** Where the toolCallIds of withdrawn questions are kept (a day), in case one comes late. */
const WITHDRAWN = "baton-withdrawn";
const DAY_MS = 24 * 3600 * 1000;

/** Keeps `id` as withdrawn, dropping what is older than a day. */
async function remember(id) {
  if (typeof id !== "string") return;
  const c = await caches.open(WITHDRAWN);
  const now = Date.now();
  for (const req of await c.keys()) {
    const res = await c.match(req);
    if (!res || now - Number(await res.text()) > DAY_MS) await c.delete(req);
  }
  await c.put(`/_withdrawn/${encodeURIComponent(id)}`, new Response(String(now)));
}

/** Whether the question `id` was withdrawn before its own push came. */
async function withdrawnBefore(id) {
  if (typeof id !== "string") return false;
  const c = await caches.open(WITHDRAWN);
  return (await c.match(`/_withdrawn/${encodeURIComponent(id)}`)) !== undefined;
}

/** A question's text made its answered notice, as the relay words it (relay/push_kinds.ts). */
function answeredText(body) {
  const text = typeof body === "string" ? body : "";
  const at = text.indexOf(" asks: ");
  return at >= 0 ? `${text.slice(0, at)}: the question was answered` : "The question was answered";
}

/**
 * A question that no longer waits (answered elsewhere, or the agent was
 * stopped): its notification, if still shown, is replaced by a quiet one
 * without buttons. A push must leave a notification on screen (or the
 * browser shows one of its own): with none of this question's shown but
 * others of baton's, nothing changes; with none at all, the quiet one shows.
 */
async function withdraw(p, title) {
  const tag = typeof p.tag === "string" ? p.tag : undefined;
  const shown = await self.registration.getNotifications(tag ? { tag } : {});
  const asking = shown.some((n) => n.data && n.data.toolCallId === p.toolCallId);
  if (!asking && (await self.registration.getNotifications()).length > 0) return;
  await self.registration.showNotification(title, {
    body: typeof p.body === "string" ? p.body : "",
    tag,
    silent: true,
    icon: "/icons/icon-192.png",
    badge: "/icons/icon-192.png",
    timestamp: typeof p.ts === "number" ? p.ts : Date.now(),
    data: { url: pathOf(p.url), kind: p.kind, sessionId: p.sessionId },
  });
}

/**
 * Sends an answer with the browser's cookie (the worker's fetch is
 * same-origin, and its Origin is the relay's, as the relay's checks want).
 * A refusal (already answered, collab mode off, runner away) becomes a
 * notification that says so; a tap on it opens the session.
 */
async function sendAnswer(data, text) {
  let message = null;
  try {
    // This device's endpoint: the relay withdraws the question on the person's other devices.
    const sub = await self.registration.pushManager.getSubscription().catch(() => null);
    const res = await fetch("/api/push/answer", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        sessionId: data.sessionId,
        toolCallId: data.toolCallId,
        text,
        ...(sub ? { endpoint: sub.endpoint } : {}),
      }),
    });
    if (!res.ok) {
      const body = await res.json().catch(() => null);
      message = (body && body.error && body.error.message) || `The relay answered ${res.status}`;
    }
  } catch {
    message = "Cannot reach the relay";
  }
  if (message !== null) {
    await self.registration.showNotification("baton: the answer was not sent", {
      body: message,
      tag: `session-${data.sessionId}`,
      icon: "/icons/icon-192.png",
      data: { url: data.url, sessionId: data.sessionId },
    });
  }
}

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  // A button answers with its own text; the inline reply with what was typed.
  const text = event.action
    ? (data.answers && data.answers[event.action]) ?? (event.reply || "")
    : "";
  if (event.action && text && typeof data.toolCallId === "string") {
    event.waitUntil(sendAnswer({ ...data, url: pathOf(data.url) }, text));
    return;
  }
  const path = pathOf(data.url);
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const open = windows.find((w) => new URL(w.url).origin === self.location.origin);
    if (open) {
      // The app moves to the session without a reload (web/app/push.ts).
      open.postMessage({ t: "open", url: path });
      return open.focus();
    }
    return self.clients.openWindow(path);
  })());
});
