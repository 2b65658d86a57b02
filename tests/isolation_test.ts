import assert from "node:assert/strict";
import { join } from "node:path";
import { PROTOCOL_VERSION, type RelayToViewer, RUNNER_WS_PATH } from "../shared/protocol.ts";
import { json, signUp, Viewer } from "./harness/client.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import {
  baseEnv,
  BatonProcess,
  type RunnerProcess,
  startRunner,
  tempDir,
} from "./harness/procs.ts";
import { within } from "./harness/wait.ts";

/** Text B tries to slip into A's session; it must never reach the model. */
const INTRUDER_TEXT = "intruder-prompt-from-b";

/** Status and parsed body of a response. */
async function answer(res: Response): Promise<{ status: number; body: unknown }> {
  const text = await res.text();
  return { status: res.status, body: text === "" ? null : JSON.parse(text) };
}

/** A route B may call with one of A's ids, or with an id that does not exist. */
interface Probe {
  what: string;
  kind: "runner" | "session" | "key";
  call: (as: (path: string, init?: RequestInit) => Promise<Response>, id: string) => Promise<
    Response
  >;
}

/** A raw runner control socket that records what the relay sends. */
class RawRunnerSocket {
  readonly messages: { t: string; [k: string]: unknown }[] = [];
  readonly #waiters: (() => void)[] = [];
  readonly opened: Promise<void>;
  readonly closed: Promise<CloseEvent>;

  constructor(readonly ws: WebSocket) {
    this.opened = new Promise((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error("runner socket failed")), { once: true });
    });
    this.closed = new Promise((resolve) => ws.addEventListener("close", resolve, { once: true }));
    ws.addEventListener("message", (ev) => {
      this.messages.push(JSON.parse(ev.data as string));
      for (const w of this.#waiters.splice(0)) w();
    });
  }

  send(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }

  /** The first message (past or future) matching `pred`. */
  async waitFor(pred: (m: { t: string; [k: string]: unknown }) => boolean) {
    return await within(
      (async () => {
        for (;;) {
          const found = this.messages.find(pred);
          if (found) return found;
          await new Promise<void>((resolve) => this.#waiters.push(resolve));
        }
      })(),
      10_000,
      "a message on the runner socket",
    );
  }

  async close(): Promise<void> {
    if (this.ws.readyState < WebSocket.CLOSING) this.ws.close();
    await this.closed;
  }
}

const PROBES: Probe[] = [
  {
    what: "GET /api/runners/{id}/models",
    kind: "runner",
    call: (as, id) => as(`/api/runners/${id}/models`),
  },
  {
    what: "GET /api/runners/{id}/usage",
    kind: "runner",
    call: (as, id) => as(`/api/runners/${id}/usage?range=all`),
  },
  {
    what: "POST /api/runners/spawn",
    kind: "runner",
    call: (as, id) =>
      as(
        "/api/runners/spawn",
        json("POST", { runnerId: id, prompt: INTRUDER_TEXT, model: MODEL }),
      ),
  },
  {
    what: "POST /api/runners/restart",
    kind: "runner",
    call: (as, id) => as("/api/runners/restart", json("POST", { runnerId: id })),
  },
  {
    what: "POST /api/runners/stop",
    kind: "runner",
    call: (as, id) => as("/api/runners/stop", json("POST", { runnerId: id })),
  },
  { what: "GET /api/sessions/{id}", kind: "session", call: (as, id) => as(`/api/sessions/${id}`) },
  {
    what: "PUT /api/sessions/{id}/pin",
    kind: "session",
    call: (as, id) => as(`/api/sessions/${id}/pin`, { method: "PUT" }),
  },
  {
    what: "DELETE /api/sessions/{id}/pin",
    kind: "session",
    call: (as, id) => as(`/api/sessions/${id}/pin`, { method: "DELETE" }),
  },
  {
    what: "PATCH /api/sessions/{id}",
    kind: "session",
    call: (as, id) => as(`/api/sessions/${id}`, json("PATCH", { title: INTRUDER_TEXT })),
  },
  {
    what: "POST /api/sessions/{id}/input",
    kind: "session",
    call: (as, id) =>
      as(`/api/sessions/${id}/input`, json("POST", { kind: "prompt", text: INTRUDER_TEXT })),
  },
  {
    what: "GET /api/sessions/{id}/events",
    kind: "session",
    call: (as, id) => as(`/api/sessions/${id}/events`),
  },
  {
    what: "DELETE /api/keys/{id}",
    kind: "key",
    call: (as, id) => as(`/api/keys/${id}`, { method: "DELETE" }),
  },
];

/** Viewer messages that would carry another user's data. */
const DATA_MESSAGES = new Set<RelayToViewer["t"]>([
  "subscribed",
  "events",
  "caught_up",
  "reset",
  "input_ok",
  "runner",
  "session",
]);

Deno.test("one user's runners, sessions and keys are invisible and untouchable for another user", async (t) => {
  const llm = MockLlm.start();
  await using relay = await startTestRelay({ allowSignup: true });
  let runnerA: RunnerProcess | undefined;
  let viewerA: Viewer | undefined;
  let viewerB: Viewer | undefined;
  const homes: string[] = [];
  let ok = false;
  try {
    const a = await signUp(relay.url, { name: "Alice" });
    const b = await signUp(relay.url, { name: "Bob" });
    const homeA = await tempDir("baton-home-a-");
    homes.push(homeA);
    await llm.writeModelsJson(homeA, ["mock-1", "mock-2"]);
    runnerA = await startRunner({ relayUrl: relay.url, apiKey: a.apiKey, home: homeA });
    const [listed] = await (await a.api("/api/runners")).json();
    const runnerId: string = listed.id;
    const runnerJson = JSON.parse(await Deno.readTextFile(join(homeA, ".baton", "runner.json")));
    assert.equal(runnerJson.runnerId, runnerId);

    viewerA = await Viewer.connect(relay.url, { apiKey: a.apiKey });
    const spawned = await a.api(
      "/api/runners/spawn",
      json("POST", { runnerId, cwd: homeA, model: MODEL, prompt: "hello from A" }),
    );
    const { sessionId } = await spawned.json();
    assert.equal(spawned.status, 200);
    viewerA.subscribe(sessionId);
    await viewerA.waitForEvent(sessionId, "agent_end");
    const pinned = await a.api(`/api/sessions/${sessionId}/pin`, { method: "PUT" });
    assert.deepEqual(await pinned.json(), { ok: true, isPinned: true });
    const hidden = await a.api(
      "/api/settings/hidden-models",
      json("PUT", { hiddenModels: ["mock/mock-2"] }),
    );
    assert.equal(hidden.status, 200);
    await hidden.body?.cancel();
    const { keys: keysA } = await (await a.api("/api/keys")).json();
    const keyIdA: string = keysA[0].id;
    const idsOfA = { runner: runnerId, session: sessionId, key: keyIdA };

    for (const probe of PROBES) {
      await t.step(
        `${probe.what} answers B for A's ${probe.kind} exactly as for a missing one`,
        async () => {
          for (const [via, as] of [["key", b.api], ["cookie", b.web]] as const) {
            const foreign = await answer(await probe.call(as, idsOfA[probe.kind]));
            const missing = await answer(await probe.call(as, crypto.randomUUID()));
            assert.equal(foreign.status, 404, `via ${via}: ${JSON.stringify(foreign.body)}`);
            assert.deepEqual(foreign, missing, `via ${via}`);
            assert.equal(
              (foreign.body as { error: { code: string } }).error.code,
              "not_found",
              `via ${via}`,
            );
          }
        },
      );
    }

    await t.step(
      "B's lists show none of A's runners, sessions, pins, keys or settings",
      async () => {
        assert.deepEqual(await (await b.api("/api/runners")).json(), []);
        const empty = { sessions: [], persistedSessions: [] };
        assert.deepEqual(await (await b.api("/api/sessions")).json(), empty);
        assert.deepEqual(await (await b.api(`/api/sessions?runnerId=${runnerId}`)).json(), empty);
        assert.deepEqual(await (await b.api("/api/sessions/pinned")).json(), {
          pinnedSessions: [],
        });
        assert.deepEqual(await (await b.api("/api/settings/hidden-models")).json(), {
          hiddenModels: [],
        });
        const keysB = await (await b.api("/api/keys")).text();
        for (const k of keysA) assert.ok(!keysB.includes(k.id), `B sees A's key ${k.id}`);
      },
    );

    await t.step(
      "B's viewer socket cannot subscribe to or send input into A's session",
      async () => {
        viewerB = await Viewer.connect(relay.url, { apiKey: b.apiKey });
        viewerB.send({ t: "watch" });
        const runners = await viewerB.waitFor((m) => m.t === "runners");
        const sessions = await viewerB.waitFor((m) => m.t === "sessions");
        assert.deepEqual(runners, { t: "runners", runners: [] });
        assert.deepEqual(sessions, { t: "sessions", sessions: [] });

        viewerB.subscribe(sessionId);
        const refused = await viewerB.waitFor((m) => m.t === "error" && m.sessionId === sessionId);
        assert.equal(refused.t === "error" && refused.code, "not_found");

        viewerB.send({ t: "input", id: "in-1", sessionId, kind: "prompt", text: INTRUDER_TEXT });
        const inputRefused = await viewerB.waitFor((m) => m.t === "error" && m.id === "in-1");
        assert.equal(inputRefused.t === "error" && inputRefused.code, "not_found");

        // A's session moves on; nothing of it may reach B.
        const runsBefore = viewerA!.eventsOf(sessionId).filter((e) => e.e.type === "agent_end")
          .length;
        const follow = await a.api(
          `/api/sessions/${sessionId}/input`,
          json("POST", { kind: "prompt", text: "second prompt from A" }),
        );
        assert.deepEqual(await answer(follow), { status: 200, body: { ok: true } });
        await viewerA!.until(
          () =>
            viewerA!.eventsOf(sessionId).filter((e) => e.e.type === "agent_end").length >
              runsBefore,
          "A's second run to end",
        );
        viewerB.send({ t: "ping" });
        await viewerB.waitFor((m) => m.t === "pong");
        const leaked = viewerB.messages.filter((m) => DATA_MESSAGES.has(m.t));
        assert.deepEqual(leaked, []);
        assert.equal(viewerB.eventsOf(sessionId).length, 0);
        assert.equal(viewerB.closeEvent, null);
      },
    );

    await t.step(
      "a runner with B's key and A's runner id is refused and A's runner stays",
      async () => {
        const homeB = await tempDir("baton-home-b-");
        homes.push(homeB);
        await Deno.mkdir(join(homeB, ".baton"), { recursive: true });
        await Deno.writeTextFile(
          join(homeB, ".baton", "runner.json"),
          JSON.stringify({ runnerId }) + "\n",
        );
        const intruder = BatonProcess.start("runner-b", {
          args: ["runner"],
          env: baseEnv(homeB, {
            BATON_RELAY_URL: relay.url,
            BATON_API_KEY: b.apiKey,
            BATON_WARM_WORKERS: "0",
          }),
        });
        let stepOk = false;
        try {
          const status = await within(intruder.status, 30_000, "B's runner to exit");
          assert.equal(status.code, 1);
          assert.ok(intruder.count(/belongs to another account/) > 0);
          assert.equal(intruder.count(/connected to relay as runner/), 0);
          stepOk = true;
        } finally {
          if (!stepOk) console.error(intruder.output());
          await intruder.stop();
        }
        assert.deepEqual(await (await b.api("/api/runners")).json(), []);
        const runners = await (await a.api("/api/runners")).json();
        assert.equal(runners.length, 1);
        assert.equal(runners[0].id, runnerId);
        assert.equal(runners[0].connected, true);
        assert.equal(
          runnerA!.proc.count(/connected to relay as runner/),
          1,
          "A's runner reconnected",
        );
      },
    );

    await t.step("B's runner can neither claim nor write into A's session", async () => {
      const before = (await (await a.api(`/api/sessions/${sessionId}`)).json()).session;
      const sock = new RawRunnerSocket(
        new WebSocket(`${relay.url.replace(/^http/, "ws")}${RUNNER_WS_PATH}`),
      );
      try {
        await sock.opened;
        sock.send({
          t: "hello",
          v: PROTOCOL_VERSION,
          apiKey: b.apiKey,
          runnerId: "b-runner",
          name: "b-runner",
          roots: [],
          version: "0.0.0",
          platform: "linux",
          sessions: [{ sessionId, cwd: homeA }],
        });
        const welcome = await sock.waitFor((m) => m.t === "welcome");
        // The relay tells B's runner to forget a session that is not its own.
        assert.deepEqual(welcome.acked, {});
        assert.deepEqual(welcome.ended, [sessionId]);

        sock.send({
          t: "events",
          sessionId,
          events: [{
            seq: before.lastSeq + 1,
            ts: Date.now(),
            e: { type: "message_start", message: { role: "user", content: INTRUDER_TEXT } },
          }],
        });
        const refused = await sock.waitFor((m) => m.t === "error");
        assert.equal(refused.code, "unknown_session");
        assert.equal(refused.sessionId, sessionId);
      } finally {
        await sock.close();
      }
      const after = (await (await a.api(`/api/sessions/${sessionId}`)).json()).session;
      assert.deepEqual(after, before);
      const runnersB = await (await b.api("/api/runners")).json();
      assert.deepEqual(runnersB.map((r: { id: string }) => r.id), ["b-runner"]);
      const runnersA = await (await a.api("/api/runners")).json();
      assert.deepEqual(runnersA.map((r: { id: string }) => r.id), [runnerId]);
    });

    await t.step("A still sees and uses everything B was refused", async () => {
      const runners = await (await a.api("/api/runners")).json();
      assert.equal(runners.length, 1);
      assert.equal(runners[0].connected, true);
      assert.deepEqual(runners[0].sessions, [sessionId]);

      const session = await (await a.api(`/api/sessions/${sessionId}`)).json();
      assert.equal(session.session.status, "running");
      assert.equal(session.session.isPinned, true);
      assert.equal(session.session.title, "hello from A");
      const { sessions } = await (await a.api("/api/sessions")).json();
      assert.deepEqual(sessions.map((s: { sessionId: string }) => s.sessionId), [sessionId]);
      const { pinnedSessions } = await (await a.api("/api/sessions/pinned")).json();
      assert.deepEqual(pinnedSessions.map((s: { sessionId: string }) => s.sessionId), [sessionId]);

      const models = await (await a.api(`/api/runners/${runnerId}/models`)).json();
      assert.deepEqual(
        models.models.filter((m: { provider: string }) => m.provider === "mock").map((
          m: { id: string },
        ) => m.id),
        ["mock-1"],
      );

      const events = await a.api(`/api/sessions/${sessionId}/events`);
      const log = await events.text();
      assert.equal(events.status, 200);
      assert.ok(JSON.parse(log).events.length > 0);
      assert.ok(!log.includes(INTRUDER_TEXT), "B's input reached A's session");
      assert.ok(
        !llm.requests.some((r) => JSON.stringify(r).includes(INTRUDER_TEXT)),
        "B's input reached the model",
      );

      const { keys } = await (await a.api("/api/keys")).json();
      assert.ok(keys.some((k: { id: string }) => k.id === keyIdA), "A's key was deleted by B");
      const stillValid = await a.api("/api/runners");
      assert.equal(stillValid.status, 200);
      await stillValid.body?.cancel();
    });
    ok = true;
  } finally {
    if (runnerA && !ok) console.error(runnerA.proc.output());
    await viewerB?.close();
    await viewerA?.close();
    await runnerA?.stop();
    await llm.close();
    for (const home of homes) await Deno.remove(home, { recursive: true });
  }
});
