/**
 * Relays for multi-process tests: a relay on a chosen store, two relay nodes
 * on one PostgreSQL database (issue 22), a signed-up user with a runner on a
 * relay, and the crash in the middle of a stream that a relay must survive on
 * either store. Everything here starts real processes (procs.ts); the caller
 * stops what it is handed, in `finally`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertContiguous, json, signUp, storedEvents, type User, Viewer } from "./client.ts";
import { type MockLlm, MODEL } from "./mock_llm.ts";
import { NatsServer } from "./nats.ts";
import { type PostgresServer, startPostgres } from "./postgres.ts";
import {
  RelayProcess,
  type RunnerOptions,
  type RunnerProcess,
  startRunner,
  tempDir,
} from "./procs.ts";

/** Where a relay keeps its data: a SQLite file in its data folder, or a PostgreSQL database. */
export type RelayStore = "sqlite" | `postgres://${string}`;

/** Options of `RelayProcess.start`. */
export type RelayOptions = NonNullable<Parameters<typeof RelayProcess.start>[0]>;

/**
 * Starts `baton relay` on `store`; a PostgreSQL one is given through
 * `BATON_DATABASE_URL`, as an operator sets it.
 */
export function startRelayOn(store: RelayStore, options: RelayOptions = {}): Promise<RelayProcess> {
  if (store === "sqlite") return RelayProcess.start(options);
  return RelayProcess.start({ ...options, env: { ...options.env, BATON_DATABASE_URL: store } });
}

/** Two relay nodes on one PostgreSQL database, each with its own home and data folder. */
export interface TwoNodes extends AsyncDisposable {
  /** The database both nodes use. */
  url: RelayStore;
  a: RelayProcess;
  b: RelayProcess;
  /** Stops both nodes (one already killed is fine). */
  stop(): Promise<void>;
}

/**
 * Starts two relay nodes on a new database of `pg`, as a deployment runs
 * them (docs/scaling.md): node B gets node A's signing secret (cookies,
 * webhook secrets) and push keys. A migrates the database first; B finds it
 * ready. `options` go to both, so they name no folder or port of their own.
 */
export async function twoNodes(
  pg: PostgresServer,
  options: Omit<RelayOptions, "dataDir" | "home" | "port"> = {},
): Promise<TwoNodes> {
  const url = await pg.createDatabase() as RelayStore;
  const a = await startRelayOn(url, options);
  let b: RelayProcess;
  try {
    const home = await tempDir("baton-node-home-");
    const dataDir = join(home, "relay-data");
    await Deno.mkdir(dataDir, { mode: 0o700 });
    for (const file of ["secret", "vapid.json"]) {
      await Deno.copyFile(join(a.dataDir, file), join(dataDir, file));
    }
    b = await startRelayOn(url, { ...options, home, dataDir });
  } catch (err) {
    await a.stop().catch(() => {});
    throw err;
  }
  const stop = async () => {
    for (const node of [a, b]) await node.stop().catch(() => {});
  };
  return { url, a, b, stop, [Symbol.asyncDispose]: stop };
}

/**
 * Starts a private PostgreSQL and two nodes on it ({@linkcode twoNodes} with
 * `options`), runs `fn`, and stops them all; both nodes' output is printed
 * when `fn` fails.
 */
export async function withTwoNodes(
  fn: (nodes: TwoNodes) => Promise<void>,
  options: Omit<RelayOptions, "dataDir" | "home" | "port"> = {},
): Promise<void> {
  const pg = await startPostgres();
  try {
    await using nodes = await twoNodes(pg, options);
    try {
      await fn(nodes);
    } catch (err) {
      console.error(`--- node A:\n${nodes.a.proc.output()}\n--- node B:\n${nodes.b.proc.output()}`);
      throw err;
    }
  } finally {
    await pg.stop();
  }
}

/** Two nodes on a bus, with a runner on node A ({@linkcode withBusNodes}). */
export interface BusNodes {
  a: RelayProcess;
  b: RelayProcess;
  /** The flags both nodes run with (a node restarted gets them again). */
  args: string[];
  /** The runner's owner, signed up on node A. */
  owner: User;
  runner: RunnerProcess;
}

/**
 * A private PostgreSQL and nats-server, two nodes on them ({@linkcode twoNodes},
 * with `env`), and the owner's runner on node A (`startRunner`); runs `fn`,
 * prints every process's output when it fails, and stops them all.
 */
export async function withBusNodes(
  options: {
    env?: Record<string, string>;
    startRunner: (a: RelayProcess, owner: User) => Promise<RunnerProcess>;
  },
  fn: (c: BusNodes) => Promise<void>,
): Promise<void> {
  let pg: PostgresServer | null = null;
  let nats: NatsServer | null = null;
  let nodes: TwoNodes | null = null;
  let runner: RunnerProcess | null = null;
  try {
    pg = await startPostgres();
    nats = await NatsServer.start();
    const args = ["--allow-signup", "--bus", nats.url];
    nodes = await twoNodes(pg, { args, ...(options.env ? { env: options.env } : {}) });
    const owner = await signUp(nodes.a.url);
    runner = await options.startRunner(nodes.a, owner);
    await fn({ a: nodes.a, b: nodes.b, args, owner, runner });
  } catch (err) {
    if (nodes) {
      console.error(`--- relay A\n${nodes.a.proc.output()}\n--- relay B\n${nodes.b.proc.output()}`);
    }
    if (runner) console.error(`--- runner\n${runner.proc.output()}`);
    throw err;
  } finally {
    await runner?.stop();
    await nodes?.stop();
    await nats?.stop();
    await pg?.stop();
  }
}

/** A signed-up user with one runner connected to a relay, its model served by the mock. */
export interface RunnerWorld {
  user: User;
  runner: RunnerProcess;
  runnerId: string;
  /** The runner's HOME, also the folder sessions are spawned in. */
  home: string;
  /** Spawns a session in `home` with the mock model; its id. */
  spawn(prompt: string): Promise<string>;
}

/**
 * Signs a user up on `relay` and starts a runner with that user's key and
 * models pointed at `llm`. `options` reach `startRunner` (e.g. other relay
 * URLs for the runner to dial).
 */
export async function withRunner(
  relay: RelayProcess,
  llm: MockLlm,
  options: Partial<RunnerOptions> = {},
): Promise<RunnerWorld> {
  const user = await signUp(relay.url);
  const home = options.home ?? await tempDir();
  await llm.writeModelsJson(home);
  const runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, ...options, home });
  try {
    const [r] = await (await user.api("/api/runners")).json();
    const runnerId: string = r.id;
    const spawn = async (prompt: string) =>
      (await (await user.api(
        "/api/runners/spawn",
        json("POST", { runnerId, cwd: home, model: MODEL, prompt }),
      )).json()).sessionId as string;
    return { user, runner, runnerId, home, spawn };
  } catch (err) {
    await runner.stop();
    throw err;
  }
}

/** The user's API calls sent to another node of the same deployment. */
export function onNode(node: RelayProcess, user: User): User {
  return {
    ...user,
    api: (path, init = {}) =>
      fetch(`${node.url}${path}`, {
        ...init,
        headers: { "x-api-key": user.apiKey, ...(init.headers as Record<string, string>) },
      }),
  };
}

/** The assistant's text as the deltas of a log spell it. */
export function streamedText(events: { e: { type: string; [k: string]: unknown } }[]): string {
  return events
    .filter((e) => e.e.type === "message_update")
    .map((e) => (e.e.assistantMessageEvent as { delta?: string }).delta ?? "")
    .join("");
}

/** Options of {@linkcode crashMidStream}. */
export interface CrashOptions {
  /** How many pieces the model streams, 25 ms apart. */
  pieces: number;
  /** The relay is killed once a viewer has seen more than this many events. */
  killAfter: number;
  /** Runs while the relay is down: after the SIGKILL, before the restart. */
  whileDown?: () => Promise<void>;
}

/**
 * One session streams from the mock model; the relay is SIGKILLed in the
 * middle and restarted on the same port and store; a viewer resuming from
 * the last seq it saw gets the rest. Asserts what a user would notice: every
 * event stored before the crash is still there unchanged, the two viewers
 * together saw exactly the stored log, and every streamed piece arrived
 * once. The session's id.
 */
export async function crashMidStream(
  relay: RelayProcess,
  world: RunnerWorld,
  llm: MockLlm,
  options: CrashOptions,
): Promise<string> {
  const { user, runner } = world;
  const pieces = Array.from({ length: options.pieces }, (_, i) => `p${i} `);
  llm.enqueue({ text: pieces, chunkDelayMs: 25 });
  const id = await world.spawn("stream through a crash");
  const v1 = await Viewer.connect(relay.url, { apiKey: user.apiKey });
  v1.subscribe(id);
  await v1.until(() => v1.eventsOf(id).length > options.killAfter, "some streamed events");
  const before = await storedEvents(user, id);
  await relay.kill("SIGKILL");
  await v1.closed;
  const seen = v1.eventsOf(id);
  await options.whileDown?.();

  await relay.restart();
  await runner.connected(2);
  const v2 = await Viewer.connect(relay.url, { apiKey: user.apiKey });
  try {
    v2.subscribe(id, seen[seen.length - 1]!.seq);
    await v2.waitForEvent(id, "agent_end", 30_000);
    const all = [...seen, ...v2.eventsOf(id)];
    assertContiguous(all);
    const stored = await storedEvents(user, id);
    assert.deepEqual(all, stored, "the viewer saw exactly the stored log");
    assert.deepEqual(stored.slice(0, before.length), before, "no acknowledged event was lost");
    const text = all
      .filter((e) => e.e.type === "message_update")
      .map((e) => (e.e.assistantMessageEvent as { delta?: string }).delta ?? "")
      .join("");
    assert.equal(text, pieces.join(""), "every streamed piece arrived exactly once");
  } finally {
    await v2.close();
  }
  return id;
}
