/**
 * The Notes service: an example of a baton runner service (docs/services.md).
 *
 * - a panel (panel/index.html) served on a local port and shown in the
 *   session view through the relay's tunnel;
 * - an API the panel calls with relative URLs (`./api/notes`);
 * - the trigger `notes:note_added`, fired through the relay's
 *   trigger-broadcast endpoint with the runner's key;
 * - the sigil `[[note:<id>]]`, resolved by `GET /api/notes/{id}`.
 *
 * Copy this folder to `~/.baton/services/notes/` (or a plugin's
 * `services/`) and restart the runner.
 *
 * @module
 */
import { join } from "node:path";

/** One note. */
interface Note {
  id: string;
  text: string;
  tag?: string;
  createdAt: string;
}

/** What `init` receives from the runner (see docs/services.md). */
interface ServiceContext {
  id: string;
  dir: string;
  panelDir: string | null;
  runnerId: string;
  relayUrl: string | null;
  log: (line: string) => void;
}

const CORS = { "access-control-allow-origin": "*" };

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { ...CORS, "content-type": "application/json" },
  });
}

export default class NotesService {
  readonly id = "notes";
  #server: Deno.HttpServer<Deno.NetAddr> | null = null;
  #notes: Note[] = [];
  #file = "";
  #service!: ServiceContext;

  async init(
    service: ServiceContext,
    { announcePanel }: { announcePanel: (port: number) => void },
  ): Promise<void> {
    this.#service = service;
    const home = Deno.env.get("HOME") ?? ".";
    this.#file = join(home, ".baton", "notes.json");
    try {
      this.#notes = JSON.parse(await Deno.readTextFile(this.#file));
    } catch {
      this.#notes = [];
    }
    const page = await Deno.readTextFile(join(service.panelDir!, "index.html"));
    // Loopback only, any free port: the relay's tunnel reaches it on the runner's machine.
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req) => this.#handle(req, page),
    );
    announcePanel(this.#server.addr.port);
  }

  async dispose(): Promise<void> {
    await this.#server?.shutdown();
    this.#server = null;
  }

  async #handle(req: Request, page: string): Promise<Response> {
    const url = new URL(req.url);
    if (req.method === "OPTIONS") {
      return new Response(null, {
        status: 204,
        headers: { ...CORS, "access-control-allow-headers": "content-type" },
      });
    }
    if (url.pathname === "/" && req.method === "GET") {
      // The notes go into the page itself, so it shows them with no request of its own.
      const data = JSON.stringify(this.#notes).replaceAll("<", "\\u003c");
      return new Response(page.replace(/\/\*NOTES\*\/\s*\[\]/, () => data), {
        headers: { "content-type": "text/html; charset=utf-8" },
      });
    }
    if (url.pathname === "/api/notes" && req.method === "GET") return json({ notes: this.#notes });
    if (url.pathname === "/api/notes" && req.method === "POST") {
      let body: { text?: unknown; tag?: unknown };
      try {
        body = await req.json();
      } catch {
        return json({ error: { code: "bad_json", message: "Send JSON: {text, tag?}" } }, 400);
      }
      if (typeof body.text !== "string" || !body.text.trim() || body.text.length > 2000) {
        return json({ error: { code: "bad_text", message: "text: 1 to 2000 characters" } }, 400);
      }
      const note: Note = {
        id: crypto.randomUUID().slice(0, 8),
        text: body.text.trim(),
        ...(typeof body.tag === "string" && body.tag ? { tag: body.tag.slice(0, 50) } : {}),
        createdAt: new Date().toISOString(),
      };
      this.#notes.push(note);
      await Deno.writeTextFile(this.#file, JSON.stringify(this.#notes, null, 2));
      const trigger = await this.#fire("notes:note_added", {
        id: note.id,
        text: note.text,
        ...(note.tag ? { tag: note.tag } : {}),
      }, `Note added: ${note.text.slice(0, 60)}`);
      return json({ note, trigger }, 201);
    }
    const one = url.pathname.match(/^\/api\/notes\/([A-Za-z0-9_-]{1,64})$/);
    if (one && req.method === "GET") {
      const note = this.#notes.find((n) => n.id === one[1]);
      if (!note) return json({ error: { code: "not_found", message: "No such note" } }, 404);
      // What a sigil pill shows: title, and description as its tooltip.
      return json({
        title: note.text.slice(0, 40),
        description: note.text,
        ...(note.tag ? { status: note.tag } : {}),
      });
    }
    return json({ error: { code: "not_found", message: "Not found" } }, 404);
  }

  /**
   * Fires a trigger the way any service does: the runner id from
   * `~/.baton/runner.json`, the key from `BATON_RUNNER_API_KEY` (or
   * `BATON_API_KEY`), the relay from `BATON_RELAY_URL` (or config relayUrl).
   */
  async #fire(type: string, payload: Record<string, unknown>, summary: string) {
    const key = Deno.env.get("BATON_RUNNER_API_KEY") ?? Deno.env.get("BATON_API_KEY");
    const relay = Deno.env.get("BATON_RELAY_URL") ?? this.#service.relayUrl;
    const home = Deno.env.get("HOME") ?? ".";
    const { runnerId } = JSON.parse(
      await Deno.readTextFile(join(home, ".baton", "runner.json")),
    );
    if (!key || !relay) return { ok: false, error: "No key or relay URL" };
    try {
      const res = await fetch(`${relay}/api/runners/${runnerId}/trigger-broadcast`, {
        method: "POST",
        headers: { "x-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({ type, payload, summary, source: "notes" }),
      });
      const body = await res.json();
      if (!res.ok) this.#service.log(`broadcast refused: ${res.status} ${JSON.stringify(body)}`);
      return body;
    } catch (err) {
      this.#service.log(`broadcast failed: ${err}`);
      return { ok: false, error: String(err) };
    }
  }
}
