import assert from "node:assert/strict";
import { join } from "node:path";
import { RecentFolders } from "./recent_folders.ts";
import { SessionService } from "./session_service.ts";
import { asyncStore, Store } from "./store/mod.ts";
import { openDatabase } from "./store/db.ts";
import { FakeClock, FakeLink } from "./testdata/fakes.ts";

/** A session service on a real store, a clock that moves only when told and a runner that says yes. */
async function withService(
  fn: (
    s: SessionService,
    clock: FakeClock,
    folders: RecentFolders,
    more: { store: ReturnType<typeof asyncStore>; injected: string[] },
  ) => Promise<void>,
) {
  const dir = await Deno.makeTempDir({ prefix: "baton-sessions-" });
  const db = openDatabase(join(dir, "relay.db"));
  const clock = new FakeClock();
  // A runner that starts every session in the folder asked for.
  const link = new class extends FakeLink {
    override request(_op?: string, data?: unknown): Promise<unknown> {
      return Promise.resolve({ cwd: (data as { cwd: string }).cwd });
    }
  }("r1", "u1");
  const store = asyncStore(new Store(db));
  const injected: string[] = [];
  const service = new SessionService({
    store,
    runners: {
      connected: () => link,
      connectedRunner: () => Promise.resolve(link),
      assertOwned: () => Promise.resolve(),
    },
    events: {
      lastSeq: () => 0,
      // What a tail in memory says: still running (it may be stale, another node ingests).
      statusOf: () => "running",
      inject: (rec: { sessionId: string }) => {
        injected.push(rec.sessionId);
        return Promise.resolve(true);
      },
      catchUp: () => Promise.resolve(false),
      retitle: () => {},
      drop: () => {},
      inFlight: () => null,
    } as unknown as ConstructorParameters<typeof SessionService>[0]["events"],
    feed: { sessionChanged: () => {}, runnerChanged: () => {}, bump: () => {} },
    baseUrl: "http://relay.test",
    clock,
  });
  try {
    await fn(
      service,
      clock,
      new RecentFolders(store, { assertOwned: () => Promise.resolve() }),
      { store, injected },
    );
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const spawn = (s: SessionService, cwd: string) =>
  s.spawn("u1", { runnerId: "r1", prompt: "", cwd, model: null });

Deno.test("a folder removed from the recent ones comes back with a session started in the same millisecond", async () => {
  await withService(async (s, clock, folders) => {
    await spawn(s, "/w/a");
    clock.advance(5);
    await spawn(s, "/w/b");
    clock.advance(5);
    assert.deepEqual(await folders.list("u1", "r1"), ["/w/b", "/w/a"]);
    assert.equal(await folders.dismiss("u1", "r1", "/w/a"), true);
    // The next session in that folder, within the same millisecond as the removal.
    await spawn(s, "/w/a");
    assert.deepEqual(await folders.list("u1", "r1"), ["/w/a", "/w/b"]);
    // Removing it again hides every session of it so far, also one of the same millisecond.
    assert.equal(await folders.dismiss("u1", "r1", "/w/a"), true);
    assert.deepEqual(await folders.list("u1", "r1"), ["/w/b"]);
  });
});

Deno.test("abandoning a session ends it once, and not one that ended elsewhere meanwhile", async () => {
  await withService(async (s, _clock, _folders, { store, injected }) => {
    const live = (await spawn(s, "/w/a")).sessionId;
    const gone = (await spawn(s, "/w/b")).sessionId;
    // Another relay node holds the runner and stored gone's end; this node's tail knows nothing of it.
    await store.sessions.update(gone, { status: "ended" }, new Date().toISOString());
    await s.abandonSession(gone, "did not start in time");
    await s.abandonSession(live, "did not start in time");
    assert.deepEqual(injected, [live]);
  });
});
