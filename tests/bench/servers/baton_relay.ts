/**
 * The server under test: baton's relay, served exactly as `baton relay`
 * serves it (`serveRelay`). With `--volatile` the session event log is kept
 * in memory only (no SQLite writes, no transactions), which is how the
 * durability scenario prices the durable log. With `--database-url
 * postgres://…` its store is that database, and with `--bus-url nats://…` it
 * is a node of a cluster (the cluster scenario, issue 22).
 *
 * @module
 */
import { parseArgs } from "node:util";
import type { Database } from "../../../relay/store/db.ts";
import { serveRelay } from "../../../relay/serve.ts";
import { EventsRepo, type StoredEvent } from "../../../relay/store/events.ts";
import { Store } from "../../../relay/store/mod.ts";
import { SessionsRepo } from "../../../relay/store/sessions.ts";
import { commands, emit, untilStopped } from "../_proc.ts";
import { webClient } from "../../../web/mod.ts";

/** The event log in memory: what the relay would cost if it kept nothing on disk. */
class MemoryEventsRepo extends EventsRepo {
  readonly #log = new Map<string, StoredEvent[]>();

  override append(sessionId: string, seq: number, json: string): boolean {
    let list = this.#log.get(sessionId);
    if (!list) this.#log.set(sessionId, list = []);
    const last = list[list.length - 1];
    if (last && last.seq >= seq) return false;
    list.push({ seq, json });
    return true;
  }

  override appendMany(sessionId: string, events: readonly StoredEvent[]): number {
    let n = 0;
    for (const ev of events) if (this.append(sessionId, ev.seq, ev.json)) n++;
    return n;
  }

  override after(sessionId: string, afterSeq: number, limit: number): StoredEvent[] {
    const list = this.#log.get(sessionId) ?? [];
    const start = list.findIndex((e) => e.seq > afterSeq);
    return start < 0 ? [] : list.slice(start, start + limit);
  }

  override maxSeq(sessionId: string): number {
    return this.#log.get(sessionId)?.at(-1)?.seq ?? 0;
  }

  override deleteSession(sessionId: string): void {
    this.#log.delete(sessionId);
  }
}

class VolatileSessionsRepo extends SessionsRepo {
  override setLastSeq(): void {}
}

/** A store whose event log is volatile; everything else is the real SQLite store. */
class VolatileStore extends Store {
  override readonly events: EventsRepo;
  override readonly sessions: SessionsRepo;

  constructor(db: Database) {
    super(db);
    this.events = new MemoryEventsRepo(db);
    this.sessions = new VolatileSessionsRepo(db);
  }

  override tx<T>(fn: () => T): T {
    return fn();
  }
}

const { values } = parseArgs({
  args: Deno.args,
  options: {
    "data-dir": { type: "string" },
    volatile: { type: "boolean", default: false },
    "database-url": { type: "string" },
    "bus-url": { type: "string" },
  },
});
const dataDir = values["data-dir"] ?? await Deno.makeTempDir({ prefix: "baton-bench-relay-" });
const served = await serveRelay({
  web: await webClient(),
  hostname: "127.0.0.1",
  port: 0,
  dataDir,
  allowSignup: true,
  log: (line) => console.error(`[relay] ${line}`),
  ...(values.volatile ? { store: (db: Database) => new VolatileStore(db) } : {}),
  ...(values["database-url"] ? { databaseUrl: values["database-url"] } : {}),
  ...(values["bus-url"] ? { bus: { url: values["bus-url"] } } : {}),
});
// Listening for the stop signal before saying so: a signal sent on that line
// would otherwise kill the process before its listener is in place.
const stopped = untilStopped();
emit("listening", { url: served.url, dataDir });
// `{"cmd":"memory"}` on stdin: where the RSS goes (V8 heap vs the rest).
(async () => {
  for await (const cmd of commands()) {
    if (cmd.cmd === "memory") {
      const gc = (globalThis as { gc?: () => void }).gc;
      const before = Deno.memoryUsage();
      gc?.();
      emit("memory", { before, after: Deno.memoryUsage(), gc: gc !== undefined });
    }
  }
})();
await stopped;
await Promise.race([served.shutdown(), new Promise((r) => setTimeout(r, 2000))]);
// A full run stores gigabytes of events: a data folder made here goes with the process.
if (!values["data-dir"]) await Deno.remove(dataDir, { recursive: true }).catch(() => {});
Deno.exit(0);
