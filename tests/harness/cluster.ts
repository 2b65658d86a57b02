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
import { assertContiguous, json, signUp, storedEvents, type User, Viewer } from "./client.ts";
import { type MockLlm, MODEL } from "./mock_llm.ts";
import type { PostgresServer } from "./postgres.ts";
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
 * Starts two relay nodes at once on a new database of `pg` (the second to
 * migrate waits on the migrations' advisory lock, then finds nothing to do).
 * `options` go to both, so they name no folder or port of their own.
 */
export async function twoNodes(
  pg: PostgresServer,
  options: Omit<RelayOptions, "dataDir" | "home" | "port"> = {},
): Promise<TwoNodes> {
  const url = await pg.createDatabase() as RelayStore;
  const started = await Promise.allSettled([
    startRelayOn(url, options),
    startRelayOn(url, options),
  ]);
  const stopAll = async () => {
    for (const s of started) {
      if (s.status === "fulfilled") await s.value.stop().catch(() => {});
    }
  };
  const [a, b] = started;
  if (a.status === "rejected" || b.status === "rejected") {
    await stopAll();
    throw a.status === "rejected" ? a.reason : (b as PromiseRejectedResult).reason;
  }
  return { url, a: a.value, b: b.value, stop: stopAll, [Symbol.asyncDispose]: stopAll };
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
