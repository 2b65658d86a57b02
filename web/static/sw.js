// baton's service worker: shows the relay's push notifications and opens
// their session on tap (docs/push.md). Served at /sw.js so that its scope is
// the whole app. Plain JavaScript: it is served as written, not bundled.

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
  event.waitUntil(
    self.registration.showNotification(title, {
      body: typeof p.body === "string" ? p.body : "",
      // One notification per session: a newer one replaces it, and still alerts.
      tag: typeof p.tag === "string" ? p.tag : undefined,
      renotify: typeof p.tag === "string",
      icon: "/icons/icon-192.png",
      badge: "/icons/icon-192.png",
      timestamp: typeof p.ts === "number" ? p.ts : Date.now(),
      data: { url: pathOf(p.url), kind: p.kind, sessionId: p.sessionId },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const path = pathOf(event.notification.data && event.notification.data.url);
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
