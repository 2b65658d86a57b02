/**
 * Relay nodes on one private PostgreSQL (issue 22), as a deployment runs
 * them: each `baton relay` process with its own data folder and
 * `BATON_DATABASE_URL` naming the same database, the first node's signing
 * secret and push keys copied to the others.
 *
 * @module
 */
import { type PostgresServer, startPostgres } from "./postgres.ts";
import { join } from "node:path";
import { RelayProcess, tempDir } from "./procs.ts";

/** Options of {@linkcode startPgNodes}. */
export interface PgNodesOptions {
  /** How many relay nodes (default 2). */
  nodes?: number;
  /** More of every node's environment (BATON_* settings). */
  env?: Record<string, string>;
}

/** A PostgreSQL, its database, and the relay nodes on it. */
export interface PgNodes {
  pg: PostgresServer;
  /** The database's URL (no password: the test server trusts loopback). */
  url: string;
  nodes: RelayProcess[];
  /** Starts one more node on the same database. */
  addNode(): Promise<RelayProcess>;
  /** Stops every node, then PostgreSQL; with `failed`, prints the nodes' output first. */
  stop(failed?: boolean): Promise<void>;
}

/** Starts a private PostgreSQL with one database and `nodes` relay nodes on it. */
export async function startPgNodes(options: PgNodesOptions = {}): Promise<PgNodes> {
  const pg = await startPostgres();
  const nodes: RelayProcess[] = [];
  const stop = async (failed = false) => {
    if (failed) {
      for (const [i, n] of nodes.entries()) console.error(`--- node ${i}:\n${n.proc.output()}`);
    }
    await Promise.all(nodes.map((n) => n.stop().catch(() => {})));
    await pg.stop();
  };
  try {
    const url = await pg.createDatabase("baton_nodes");
    const env = { BATON_DATABASE_URL: url, ...options.env };
    const addNode = async () => {
      const home = await tempDir("baton-node-home-");
      const dataDir = join(home, "relay-data");
      // As docs/scaling.md says: every node gets the first one's signing
      // secret (cookies, webhook secrets) and push keys.
      const first = nodes[0];
      if (first) {
        await Deno.mkdir(dataDir, { mode: 0o700 });
        for (const file of ["secret", "vapid.json"]) {
          await Deno.copyFile(join(first.dataDir, file), join(dataDir, file));
        }
      }
      const node = await RelayProcess.start({ env, home, dataDir });
      nodes.push(node);
      return node;
    };
    // One at a time: the first migrates the new database, the others find it ready.
    for (let i = 0; i < (options.nodes ?? 2); i++) await addNode();
    return { pg, url, nodes, addNode, stop };
  } catch (err) {
    await stop(true);
    throw err;
  }
}
