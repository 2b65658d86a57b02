/**
 * The browser client, served by the relay from memory: the app shell for
 * every client-side route, the bundled script and stylesheet (built into
 * web/dist by `deno task build:web`), the PWA manifest and icons.
 *
 * @module
 */
import { Hono } from "hono";
// Imported, not read from files: the client is part of the module graph, so
// the single-file bundle and a compiled binary carry it (docs/install.md).
import appJs from "./dist/app.js" with { type: "text" };
import appCss from "./dist/app.css" with { type: "text" };
import xtermJs from "./dist/xterm.js" with { type: "text" };
import xtermCss from "./dist/xterm.css" with { type: "text" };
import { ICON_192, ICON_512 } from "./dist/icons.ts";
import indexHtml from "./static/index.html" with { type: "text" };
import manifest from "./static/manifest.webmanifest" with { type: "text" };
import iconSvg from "./static/icon.svg" with { type: "text" };
import serviceWorker from "./static/sw.js" with { type: "text" };

const utf8 = (text: string) => new TextEncoder().encode(text);
const base64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));

async function shortHash(bytes: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource));
  return Array.from(d.slice(0, 6), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Script, styles and the page can only come from the relay itself. */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

interface Asset {
  body: Uint8Array;
  type: string;
  /** Content hash: a request naming it (`?v=`) may be cached for a year. */
  version?: string;
}

/** The client's pages (parseRoute in app/route.ts), as route patterns. */
const PAGES = [
  "/",
  "/new",
  "/settings",
  "/settings/runners/:id",
  "/automations",
  "/session/:id",
  "/usage",
  "/runners/:id/usage",
];
const PAGE_PATTERNS = PAGES.map((p) => new RegExp(`^${p.replace(/:\w+/g, "[^/]+")}$`));

/** The web client as the relay serves it. */
export interface WebClient {
  /** The app shell at each page, the bundled script and styles, the manifest and icons. */
  routes: Hono;
  /**
   * What a browser that opens a path no route serves gets: a page asked for
   * with a trailing slash (`/settings/`) is redirected to it (the client
   * would not know it), any other path gets the app shell, exactly as `/`
   * does, and the client's routing decides what to show.
   */
  page(path: string, search: string): Response;
}

/** Builds the web client's routes over the built bundle (web/dist). */
export async function webClient(): Promise<WebClient> {
  const js = utf8(appJs);
  const css = utf8(appCss);
  const [jsHash, cssHash] = [await shortHash(js), await shortHash(css)];
  const page = indexHtml
    .replace("%JS_HASH%", jsHash)
    .replace("%CSS_HASH%", cssHash);
  const assets: Record<string, Asset> = {
    "/assets/app.js": { body: js, type: "text/javascript; charset=utf-8", version: jsHash },
    "/assets/app.css": { body: css, type: "text/css; charset=utf-8", version: cssHash },
    // xterm.js, loaded by the terminal panel only when it opens (web/app/components/terminal/).
    "/assets/xterm.js": { body: utf8(xtermJs), type: "text/javascript; charset=utf-8" },
    "/assets/xterm.css": { body: utf8(xtermCss), type: "text/css; charset=utf-8" },
    "/manifest.webmanifest": {
      body: utf8(manifest),
      type: "application/manifest+json",
    },
    "/icons/icon.svg": { body: utf8(iconSvg), type: "image/svg+xml" },
    // The service worker (push notifications); at the root so its scope is the whole app.
    "/sw.js": { body: utf8(serviceWorker), type: "text/javascript; charset=utf-8" },
    "/icons/icon-192.png": { body: base64(ICON_192), type: "image/png" },
    "/icons/icon-512.png": { body: base64(ICON_512), type: "image/png" },
  };

  const app = new Hono();
  const shell = () =>
    new Response(page, {
      headers: {
        "content-type": "text/html; charset=utf-8",
        "cache-control": "no-cache",
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-frame-options": "DENY",
      },
    });
  for (const path of PAGES) app.get(path, shell);
  for (const [path, a] of Object.entries(assets)) {
    app.get(path, (c) => {
      const versioned = a.version !== undefined && c.req.query("v") === a.version;
      return new Response(a.body as BodyInit, {
        headers: {
          "content-type": a.type,
          "cache-control": versioned ? "public, max-age=31536000, immutable" : "no-cache",
        },
      });
    });
  }
  app.get("/favicon.ico", (c) => c.redirect("/icons/icon.svg", 301));
  return {
    routes: app,
    page(path, search) {
      const trimmed = path.replace(/\/+$/, "");
      if (trimmed !== path && PAGE_PATTERNS.some((p) => p.test(trimmed))) {
        return new Response(null, { status: 301, headers: { location: trimmed + search } });
      }
      return shell();
    },
  };
}
