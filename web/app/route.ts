/**
 * The page on screen, from the address bar, and moving between pages
 * without a reload. The relay serves the app at each of these paths
 * (PAGES in web/mod.ts).
 *
 * @module
 */
import { signal } from "@preact/signals";

/** A page of the app. */
export type Route =
  | { page: "home" }
  | { page: "new" }
  | { page: "session"; id: string }
  | { page: "settings" }
  /** A runner's skills, agents and plugins. */
  | { page: "runner"; id: string }
  | { page: "automations" }
  /** A runner's usage; `null`: the first connected runner's. */
  | { page: "usage"; runnerId: string | null }
  /** An address the app has no page for (the relay serves the app for any page a browser opens). */
  | { page: "missing"; path: string };

function parseRoute(path: string): Route {
  const m = path.match(/^\/session\/([A-Za-z0-9_-]{1,64})\/?$/);
  if (m) return { page: "session", id: m[1]! };
  if (path === "/settings") return { page: "settings" };
  const runner = path.match(/^\/settings\/runners\/([A-Za-z0-9_-]{1,64})\/?$/);
  if (runner) return { page: "runner", id: runner[1]! };
  if (path === "/automations") return { page: "automations" };
  if (path === "/usage") return { page: "usage", runnerId: null };
  const u = path.match(/^\/runners\/([A-Za-z0-9_-]{1,100})\/usage$/);
  if (u) return { page: "usage", runnerId: u[1]! };
  if (path === "/new") return { page: "new" };
  if (path === "/" || path === "") return { page: "home" };
  return { page: "missing", path };
}

/** The page on screen. */
export const route = signal<Route>(parseRoute(location.pathname));

/** Moves to `path` in the app (History API, no reload). */
export function navigate(path: string, replace = false): void {
  if (path !== location.pathname) {
    if (replace) history.replaceState(null, "", path);
    else history.pushState(null, "", path);
  }
  route.value = parseRoute(path);
}
addEventListener("popstate", () => route.value = parseRoute(location.pathname));
