/**
 * The browser client, served by the relay from memory.
 *
 * @module
 */
import { Hono } from "hono";

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>baton</title></head>
<body><main><h1>baton</h1><p>The relay is running. The web client is served here.</p></main></body></html>`;

/** Routes of the web client: the app shell for `/` and `/session/:id`. */
export function webRoutes(): Hono {
  const app = new Hono();
  app.get("/", (c) => c.html(PAGE));
  app.get("/session/:id", (c) => c.html(PAGE));
  return app;
}
