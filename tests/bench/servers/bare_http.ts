/**
 * Baseline of the HTTP scenario: a bare Hono app on Deno.serve answering
 * `GET /api/sessions` with a fixed JSON body (the relay's own answer, read
 * from the file given as the first argument). No auth, no database.
 *
 * @module
 */
import { Hono } from "hono";
import { emit, untilStopped } from "../_proc.ts";

const body = JSON.parse(await Deno.readTextFile(Deno.args[0]!));
const app = new Hono();
app.get("/api/sessions", (c) => c.json(body));
const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, app.fetch);
// Listening for the stop signal before saying so: a signal sent on that line
// would otherwise kill the process before its listener is in place.
const stopped = untilStopped();
emit("listening", { url: `http://127.0.0.1:${server.addr.port}` });
await stopped;
await Promise.race([server.shutdown(), new Promise((r) => setTimeout(r, 1000))]);
Deno.exit(0);
