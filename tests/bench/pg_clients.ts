/**
 * Compares the two PostgreSQL clients for Node on npm, `pg` (node-postgres)
 * and `postgres` (porsager), as the relay's store would use them, on a
 * private PostgreSQL (tests/harness/postgres.ts). docs/scaling.md quotes
 * its figures ("## PostgreSQL store").
 *
 *   deno run -A tests/bench/pg_clients.ts [--n 3000]
 *
 * Per client: the memory importing it adds to a fresh Deno (RSS, in a child
 * process of its own), the round trip of a single-row insert and of a
 * primary-key select (prepared statements, one at a time, as the
 * repositories run them), and a batch as the event committer writes it
 * (BEGIN, 50 inserts, COMMIT). Then durable ingest through the store
 * itself: the event committer of SQLite (inline, WAL) and of PostgreSQL,
 * batches of 200 small events for 4 sessions, one batch at a time.
 *
 * @module
 */
import { parseArgs } from "node:util";
import pg from "pg";
// Measured only, never used by the relay: not in the import map.
// deno-lint-ignore no-import-prefix
import postgres from "npm:postgres@3.4.9";
import { openRelayStore } from "../../relay/relay_store.ts";
import { Store } from "../../relay/store/mod.ts";
import type { EventCommit } from "../../relay/store/event_writer.ts";
import { startPostgres } from "../harness/postgres.ts";

const { values } = parseArgs({ args: Deno.args, options: { n: { type: "string" } } });
const N = Number(values.n ?? 3000);
const BATCHES = 60;
const PER_BATCH = 50;

interface Client {
  insert(id: string, body: string): Promise<unknown>;
  select(id: string): Promise<unknown>;
  batch(prefix: string): Promise<unknown>;
  end(): Promise<void>;
}

function pgClient(url: string): Client {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  const ins = "INSERT INTO t (id, body) VALUES ($1, $2)";
  return {
    insert: (id, body) => pool.query({ name: "ins", text: ins, values: [id, body] }),
    select: (id) =>
      pool.query({ name: "sel", text: "SELECT body FROM t WHERE id = $1", values: [id] }),
    batch: async (prefix) => {
      const c = await pool.connect();
      try {
        await c.query("BEGIN");
        for (let i = 0; i < PER_BATCH; i++) {
          await c.query({ name: "ins", text: ins, values: [`${prefix}-${i}`, "x".repeat(200)] });
        }
        await c.query("COMMIT");
      } finally {
        c.release();
      }
    },
    end: () => pool.end(),
  };
}

function postgresClient(url: string): Client {
  const sql = postgres(url, { max: 4, prepare: true, onnotice: () => {} });
  return {
    insert: (id, body) => sql`INSERT INTO t (id, body) VALUES (${id}, ${body})`,
    select: (id) => sql`SELECT body FROM t WHERE id = ${id}`,
    batch: (prefix) =>
      sql.begin(async (tx) => {
        for (let i = 0; i < PER_BATCH; i++) {
          await tx`INSERT INTO t (id, body) VALUES (${`${prefix}-${i}`}, ${"x".repeat(200)})`;
        }
      }),
    end: () => sql.end(),
  };
}

/** Median of microseconds per operation over `rounds` timed loops. */
async function perOp(count: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await fn(i);
  return (performance.now() - t0) * 1000 / count;
}

/** RSS (MB) a fresh Deno adds by importing `specifier`: the median of three children. */
async function importRss(specifier: string): Promise<number> {
  const code = `
    const before = Deno.memoryUsage().rss;
    await import(${JSON.stringify(specifier)});
    console.log((Deno.memoryUsage().rss - before) / 1048576);`;
  const runs: number[] = [];
  for (let i = 0; i < 3; i++) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--quiet", code],
      stdout: "piped",
    }).output();
    runs.push(Number(new TextDecoder().decode(out.stdout).trim()));
  }
  return runs.sort((a, b) => a - b)[1]!;
}

const server = await startPostgres({ settings: { fsync: "on", synchronous_commit: "on" } });
try {
  const rows: string[][] = [];
  for (
    const [name, make, spec] of [
      ["pg 8.23.1", pgClient, "npm:pg@8.23.1"],
      ["postgres 3.4.9", postgresClient, "npm:postgres@3.4.9"],
    ] as const
  ) {
    const url = await server.createDatabase();
    const setup = new pg.Client({ connectionString: url });
    await setup.connect();
    await setup.query("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT NOT NULL)");
    await setup.end();
    const c = make(url);
    await perOp(200, (i) => c.insert(`warm-${i}`, "w")); // connections and statements ready
    const insert = await perOp(N, (i) => c.insert(`i-${i}`, "x".repeat(200)));
    const select = await perOp(N, (i) => c.select(`i-${(i * 7919) % N}`));
    const batch = await perOp(BATCHES, (i) => c.batch(`b-${i}`));
    await c.end();
    rows.push([
      name,
      `${insert.toFixed(0)} µs`,
      `${select.toFixed(0)} µs`,
      `${(batch / 1000).toFixed(2)} ms`,
      `${(await importRss(spec)).toFixed(1)} MB`,
    ]);
  }
  console.log(
    "| client | insert (1 row) | select (by key) | batch (BEGIN, 50 inserts, COMMIT) | import RSS |",
  );
  console.log("|---|---|---|---|---|");
  for (const r of rows) console.log(`| ${r.join(" | ")} |`);

  const dir = await Deno.makeTempDir({ prefix: "baton-pg-bench-" });
  console.log("\n| store | events/s committed | ms per batch (800 events) |\n|---|---|---|");
  try {
    for (
      const [name, target] of [
        ["SQLite (inline commit)", null],
        ["PostgreSQL (PgStore.commit)", await server.createDatabase()],
      ] as const
    ) {
      // A custom SQLite store commits on this thread (inline), as the measurement wants.
      const opened = await openRelayStore(
        target === null
          ? { dataDir: dir, custom: (db) => new Store(db) }
          : { dataDir: dir, databaseUrl: target },
      );
      const seqs = new Map<string, number>();
      const batch = (): EventCommit[] =>
        ["a", "b", "c", "d"].map((sessionId) => {
          const from = (seqs.get(sessionId) ?? 0) + 1;
          const events = Array.from({ length: 200 }, (_, i) => ({
            seq: from + i,
            json: JSON.stringify({
              seq: from + i,
              ts: 0,
              e: { type: "text_delta", delta: "x".repeat(40) },
            }),
          }));
          seqs.set(sessionId, from + 199);
          return { sessionId, events, lastSeq: from + 199, eventBytes: 0, patch: null, at: "" };
        });
      for (let i = 0; i < 5; i++) await opened.commit(batch());
      const rounds = 100;
      const t0 = performance.now();
      for (let i = 0; i < rounds; i++) await opened.commit(batch());
      const ms = (performance.now() - t0) / rounds;
      console.log(`| ${name} | ${Math.round(800 / ms * 1000)} | ${ms.toFixed(2)} |`);
      await opened.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
} finally {
  await server.stop();
}
