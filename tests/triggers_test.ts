import assert from "node:assert/strict";
import { join } from "node:path";
import type { ChatRequest } from "./harness/mock_llm.ts";
import { json, signUp, type User } from "./harness/client.ts";
import { defaultAnswer, FakeRunner, spawnSession } from "./harness/fake_runner.ts";
import type { SpawnRequest, TriggerRequest } from "../shared/protocol.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { RelayProcess, type RunnerProcess, startRunner } from "./harness/procs.ts";
import {
  allSessionIds,
  answer,
  closeWorld,
  endSession,
  ModelWatch,
  prepareHome,
  requestText,
  runs,
  spawn,
  startWorld,
  stepper,
  triggerBlocks,
  userTexts,
  type World,
} from "./harness/trigger_world.ts";
import { eventually } from "./harness/wait.ts";

/** What the runner declares in `~/.baton/triggers.json`; the last three are invalid. */
const DEFS: unknown[] = [
  {
    type: "ci:build_finished",
    label: "Build finished",
    description: "A CI build ended",
    params: [
      { name: "branch", type: "string" },
      { name: "status", type: "string" },
      { name: "attempt", type: "number" },
    ],
    schema: {
      type: "object",
      properties: { branch: { type: "string" }, status: { type: "string" } },
      required: ["branch"],
    },
  },
  {
    type: "mail:received",
    label: "Mail received",
    params: [
      { name: "from", type: "string" },
      { name: "subject", type: "string" },
      { name: "labels", type: "string" },
    ],
  },
  {
    type: "cron:tick",
    label: "Tick",
    description: "A scheduled job is due",
    params: [{ name: "job", type: "string" }],
  },
  { type: "no colon here", label: "Bad type" },
  { type: "bad:params", label: "Bad params", params: [{ name: "p" }] },
  "not an object",
];

/** The valid definitions as available-triggers shows them. */
const AVAILABLE = [
  {
    type: "ci:build_finished",
    label: "Build finished",
    description: "A CI build ended",
    params: [
      { name: "branch", type: "string" },
      { name: "status", type: "string" },
      { name: "attempt", type: "number" },
    ],
    schema: {
      type: "object",
      properties: { branch: { type: "string" }, status: { type: "string" } },
      required: ["branch"],
    },
  },
  {
    type: "mail:received",
    label: "Mail received",
    description: "",
    params: [
      { name: "from", type: "string" },
      { name: "subject", type: "string" },
      { name: "labels", type: "string" },
    ],
    schema: null,
  },
  {
    type: "cron:tick",
    label: "Tick",
    description: "A scheduled job is due",
    params: [{ name: "job", type: "string" }],
    schema: null,
  },
];

type Api = User["api"];

async function post(api: Api, path: string, body: unknown) {
  return await answer(await api(path, json("POST", body)));
}

async function history(api: Api, sessionId: string, query = "") {
  const res = await answer(await api(`/api/sessions/${sessionId}/triggers${query}`));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.triggers as Record<string, unknown>[];
}

async function subscriptions(api: Api, sessionId: string) {
  const res = await answer(await api(`/api/sessions/${sessionId}/trigger-subscriptions`));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.subscriptions as Record<string, unknown>[];
}

async function listeners(api: Api, runnerId: string) {
  const res = await answer(await api(`/api/runners/${runnerId}/trigger-listeners`));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.listeners as Record<string, unknown>[];
}

/** The name a session was spawned with (`I am session <name>`), or `listener:<prompt>`. */
function sessionName(req: ChatRequest): string {
  const first = userTexts(req)[0] ?? "";
  const m = first.match(/^I am session ([\w-]+)/);
  if (m) return m[1]!;
  const l = first.match(/^(LISTENER-\S+)/);
  return l ? `listener:${l[1]}` : `?${first.slice(0, 40)}`;
}

/** The sessions (by name) whose model requests contain `marker`. */
function sessionsWith(w: World, marker: string): string[] {
  const names = w.model.matching((r) => requestText(r).includes(marker)).map(sessionName);
  return [...new Set(names)].sort();
}

/** The number of tool results in a request. */
function toolResults(req: ChatRequest): number {
  return req.messages.filter((m) => m.role === "tool").length;
}

Deno.test("session triggers, history, responses, subscriptions, broadcasts and listeners on one runner", async (t) => {
  let w: World | undefined;
  const s = stepper(t);
  try {
    w = await startWorld({ triggerDefs: DEFS, relay: { allowSignup: true } });
    const world = w;
    const { user, runnerId, viewer } = world;
    const api = user.api;
    let main!: string;

    await s.step(
      "available triggers come from the runner's triggers.json; invalid ones are ignored",
      async () => {
        // The relay names each definition it drops; the runner logs it.
        await world.runner.proc.waitFor(/relay error: bad_trigger_def: .*no colon here/);
        await world.runner.proc.waitFor(/relay error: bad_trigger_def: .*name and a type/);
        main = await spawn(world, "I am session main");
        await viewer.until(() => runs(viewer, main) === 1, "the first run");
        const res = await answer(await api(`/api/sessions/${main}/available-triggers`));
        assert.equal(res.status, 200);
        assert.deepEqual(res.body, { triggerDefs: AVAILABLE });
        const byCookie = await answer(await user.web(`/api/sessions/${main}/available-triggers`));
        assert.deepEqual(byCookie, res);
        const runner = await answer(await api(`/api/runners/${runnerId}/triggers`));
        assert.equal(runner.status, 200);
        // The runner's own view shows the same definitions without the payload schemas.
        assert.deepEqual(
          runner.body.triggerDefs,
          AVAILABLE.map(({ schema: _, ...def }) => def),
        );
        assert.deepEqual(runner.body.listeners, []);
      },
    );

    await s.step(
      "a trigger reaches the agent as one message with its payload and metadata",
      async () => {
        const payload = {
          branch: "main",
          status: "failed",
          attempt: 2,
          repo: { owner: { login: "acme" }, name: "api" },
          marker: "TRIGGER-ONE",
        };
        const res = await post(api, `/api/sessions/${main}/trigger`, {
          type: "ci:build_finished",
          payload,
          summary: "Build 7 failed",
          source: "ci-bot",
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        assert.deepEqual(Object.keys(res.body).sort(), ["ok", "triggerId"]);
        assert.equal(res.body.ok, true);
        const triggerId: string = res.body.triggerId;
        assert.match(triggerId, /^[0-9a-f-]{36}$/);

        const req = await world.model.withText("TRIGGER-ONE");
        const texts = userTexts(req);
        assert.equal(texts.filter((x) => x.includes("TRIGGER-ONE")).length, 1, "one message");
        const blocks = triggerBlocks(texts[texts.length - 1]!);
        assert.equal(blocks.length, 1);
        const { before: _b, after, ...block } = blocks[0]!;
        assert.deepEqual(block, {
          id: triggerId,
          type: "ci:build_finished",
          source: "ci-bot",
          summary: "Build 7 failed",
          payload,
        });
        assert.equal(after, "", "no answer was asked for");

        const [entry, ...older] = await history(api, main);
        assert.deepEqual(older, []);
        const { ts, ...fields } = entry!;
        assert.deepEqual(fields, {
          triggerId,
          type: "ci:build_finished",
          source: "ci-bot",
          summary: "Build 7 failed",
          payload,
          deliverAs: "steer",
          direction: "inbound",
          expectsResponse: false,
        });
        assert.ok(Math.abs(Date.parse(String(ts)) - Date.now()) < 60_000);
        await viewer.until(() => runs(viewer, main) === 2, "the trigger's run");

        // followUp, without source or summary: source "api", no summary.
        const follow = await post(api, `/api/sessions/${main}/trigger`, {
          type: "mail:received",
          payload: { subject: "hello", marker: "TRIGGER-TWO" },
          deliverAs: "followUp",
        });
        assert.equal(follow.status, 200);
        const [b] = triggerBlocks(userTexts(await world.model.withText("TRIGGER-TWO")).at(-1)!);
        assert.equal(b!.source, "api");
        assert.equal(b!.summary, undefined);
        const [latest] = await history(api, main);
        assert.equal(latest!.triggerId, follow.body.triggerId);
        assert.equal(latest!.deliverAs, "followUp");
        assert.equal(latest!.source, "api");
        assert.equal("summary" in latest!, false);
        await viewer.until(() => runs(viewer, main) === 3, "the follow-up's run");
      },
    );

    await s.step(
      "while the agent works, steer reaches the next request and followUp waits for the run's end",
      async () => {
        world.llm.enqueue(
          {
            text: Array.from({ length: 30 }, (_, i) => `part${i} `),
            chunkDelayMs: 40,
            toolCalls: [{ name: "bash", args: { command: "echo step" } }],
          },
          { text: "steered answer" },
          { text: "follow-up answer" },
        );
        const input = await post(api, `/api/sessions/${main}/input`, {
          kind: "prompt",
          text: "LONG-TASK",
        });
        assert.equal(input.status, 200);
        const busy = await world.model.withText("LONG-TASK");
        const n = world.model.requests.indexOf(busy);
        const steer = await post(api, `/api/sessions/${main}/trigger`, {
          type: "ci:build_finished",
          payload: { marker: "STEER-NOW" },
        });
        const follow = await post(api, `/api/sessions/${main}/trigger`, {
          type: "ci:build_finished",
          payload: { marker: "FOLLOW-LATER" },
          deliverAs: "followUp",
        });
        assert.equal(steer.status, 200);
        assert.equal(follow.status, 200);
        await world.model.withText("FOLLOW-LATER");
        const text = (i: number) => requestText(world.model.requests[i]!);
        assert.equal(sessionName(world.model.requests[n + 1]!), "main");
        assert.match(text(n + 1), /STEER-NOW/, "the steer is in the very next request");
        assert.doesNotMatch(text(n + 1), /FOLLOW-LATER/);
        assert.match(text(n + 1), /step/, "after the tool's result");
        assert.match(text(n + 2), /FOLLOW-LATER/, "the follow-up comes once the turn is done");
        assert.match(text(n + 2), /steered answer/);
        await viewer.until(() => runs(viewer, main) === 4, "the long run");
        const [f, st] = await history(api, main);
        assert.deepEqual([f!.triggerId, f!.deliverAs], [follow.body.triggerId, "followUp"]);
        assert.deepEqual([st!.triggerId, st!.deliverAs], [steer.body.triggerId, "steer"]);
      },
    );

    await s.step(
      "the agent's respond_to_trigger answer shows on the inbound entry and as an outbound one",
      async () => {
        world.model.rules = [(req) => {
          const last = req.messages.at(-1)!;
          if (last.role !== "user") return undefined;
          const [b] = triggerBlocks(userTexts(req).at(-1)!);
          if (!b || !JSON.stringify(b.payload).includes("PLEASE-ANSWER")) return undefined;
          return {
            text: "Answering.",
            toolCalls: [{
              name: "respond_to_trigger",
              args: { triggerId: b.id, action: "acknowledged", text: "On it: RESPONSE-TEXT" },
            }],
          };
        }];
        const res = await post(api, `/api/sessions/${main}/trigger`, {
          type: "ci:build_finished",
          payload: { question: "PLEASE-ANSWER" },
          summary: "Question",
          expectsResponse: true,
        });
        assert.equal(res.status, 200);
        const triggerId: string = res.body.triggerId;
        const asked = await world.model.withText("PLEASE-ANSWER");
        const [b] = triggerBlocks(userTexts(asked).at(-1)!);
        assert.match(b!.after, /expects an answer/);
        assert.ok(b!.after.includes(`respond_to_trigger with triggerId "${triggerId}"`));
        await viewer.until(() => runs(viewer, main) === 5, "the answering run");
        world.model.rules = [];
        const toolResult = world.model.requests.find((r) =>
          r.messages.at(-1)?.role === "tool" && requestText(r).includes("PLEASE-ANSWER")
        );
        assert.match(requestText(toolResult!), /"ok": true/, "the tool told the agent it worked");

        const [outbound, inbound] = await history(api, main);
        assert.equal(inbound!.triggerId, triggerId);
        assert.equal(inbound!.direction, "inbound");
        assert.equal(inbound!.expectsResponse, true);
        const response = inbound!.response as { action: string; text: string; ts: string };
        assert.deepEqual(Object.keys(response).sort(), ["action", "text", "ts"]);
        assert.equal(response.action, "acknowledged");
        assert.equal(response.text, "On it: RESPONSE-TEXT");
        assert.ok(Math.abs(Date.parse(response.ts) - Date.now()) < 60_000);
        assert.equal(outbound!.direction, "outbound");
        assert.equal(outbound!.type, "ci:build_finished");
        assert.notEqual(outbound!.triggerId, triggerId);
        assert.deepEqual(outbound!.payload, { inReplyTo: triggerId, ...response });
        assert.equal("response" in outbound!, false);
      },
    );

    await s.step(
      "invalid triggers are 400 and store nothing; an ended session is 409; a missing one 404",
      async () => {
        const entries = (await history(api, main, "?limit=200")).length;
        const calls = world.model.requests.length;
        const bad: [string, unknown][] = [
          ["empty body", {}],
          ["no payload", { type: "ci:build_finished" }],
          ["payload is an array", { type: "ci:build_finished", payload: [1] }],
          ["payload is a string", { type: "ci:build_finished", payload: "x" }],
          ["payload is null", { type: "ci:build_finished", payload: null }],
          ["empty type", { type: "", payload: {} }],
          ["type is a number", { type: 7, payload: {} }],
          ["unknown deliverAs", { type: "ci:build_finished", payload: {}, deliverAs: "now" }],
          ["expectsResponse as a string", {
            type: "ci:build_finished",
            payload: {},
            expectsResponse: "yes",
          }],
          ["empty source", { type: "ci:build_finished", payload: {}, source: "" }],
          ["summary as a number", { type: "ci:build_finished", payload: {}, summary: 3 }],
        ];
        for (const [what, body] of bad) {
          const res = await post(api, `/api/sessions/${main}/trigger`, body);
          assert.equal(res.status, 400, `${what}: ${JSON.stringify(res.body)}`);
          assert.match(res.body.error.message, /\S/);
        }
        const notJson = await answer(
          await api(`/api/sessions/${main}/trigger`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: '{"type": "x", ',
          }),
        );
        assert.equal(notJson.status, 400);
        assert.equal(
          (await history(api, main, "?limit=200")).length,
          entries,
          "nothing was recorded",
        );
        assert.equal(world.model.requests.length, calls, "nothing reached the agent");

        const missing = await post(api, `/api/sessions/${crypto.randomUUID()}/trigger`, {
          type: "ci:build_finished",
          payload: {},
        });
        assert.equal(missing.status, 404);

        const ended = await spawn(world, "I am session ended-early");
        await endSession(world, ended);
        const late = await post(api, `/api/sessions/${ended}/trigger`, {
          type: "ci:build_finished",
          payload: { marker: "TOO-LATE" },
        });
        assert.equal(late.status, 409, JSON.stringify(late.body));
        assert.equal(late.body.error.code, "session_ended");
        assert.deepEqual(await history(api, ended), []);
        assert.equal(world.model.matching((r) => requestText(r).includes("TOO-LATE")).length, 0);
      },
    );

    await s.step(
      "history: most recent first, limit 50 by default and 200 at most; 250 kept as 200; DELETE clears",
      async () => {
        // A runner that accepts triggers without an agent: the history is the relay's.
        const fake = await FakeRunner.connect(world.relay.url, { apiKey: user.apiKey });
        try {
          const id = await spawnSession(user, fake.runnerId);
          for (let n = 0; n < 250; n++) {
            const res = await post(api, `/api/sessions/${id}/trigger`, {
              type: "ci:build_finished",
              payload: { n },
            });
            assert.equal(res.status, 200, JSON.stringify(res.body));
          }
          assert.equal(fake.requests.filter((r) => r.op === "trigger").length, 250);
          const ns = (list: Record<string, unknown>[]) =>
            list.map((e) => (e.payload as { n: number }).n);
          const range = (from: number, to: number) =>
            Array.from({ length: from - to + 1 }, (_, i) => from - i);
          assert.deepEqual(ns(await history(api, id)), range(249, 200), "50, newest first");
          assert.deepEqual(ns(await history(api, id, "?limit=7")), range(249, 243));
          assert.deepEqual(ns(await history(api, id, "?limit=200")), range(249, 50));
          assert.deepEqual(
            ns(await history(api, id, "?limit=1000")),
            range(249, 50),
            "capped at 200",
          );
          // The oldest 50 are gone from the store, not only from the answer.
          assert.equal((await world.relay.relay.store.triggers.history(id, 10_000)).length, 200);
          for (const q of ["?limit=0", "?limit=-1", "?limit=abc", "?limit=1.5"]) {
            const res = await answer(await api(`/api/sessions/${id}/triggers${q}`));
            assert.equal(res.status, 400, q);
          }
          const cleared = await answer(
            await api(`/api/sessions/${id}/triggers`, { method: "DELETE" }),
          );
          assert.deepEqual(cleared, { status: 200, body: { ok: true } });
          assert.deepEqual(await history(api, id), []);
          assert.ok((await history(api, main)).length > 0, "other sessions keep theirs");

          // A history expires after 24 hours without a new entry (the clock is moved by
          // ageing the stored entries).
          const age = (hours: number) =>
            world.relay.relay.db!.prepare(
              "UPDATE trigger_history SET ts = ? WHERE session_id = ?",
            )
              .run(new Date(Date.now() - hours * 3600_000).toISOString(), id);
          for (const n of [1, 2]) {
            await post(api, `/api/sessions/${id}/trigger`, {
              type: "ci:build_finished",
              payload: { n },
            });
          }
          age(23);
          assert.deepEqual(ns(await history(api, id)), [2, 1], "23 hours idle: kept");
          age(25);
          assert.deepEqual(await history(api, id), [], "25 hours idle: expired");
          for (const n of [3, 4]) {
            await post(api, `/api/sessions/${id}/trigger`, {
              type: "ci:build_finished",
              payload: { n },
            });
          }
          age(25);
          await post(api, `/api/sessions/${id}/trigger`, {
            type: "ci:build_finished",
            payload: { n: 5 },
          });
          assert.deepEqual(
            ns(await history(api, id)),
            [5],
            "a new entry after an idle day starts afresh",
          );
        } finally {
          await fake.close();
        }
      },
    );

    await s.step(
      "the session may answer before its runner acknowledges the trigger or the spawn it starts; a refused one leaves no entry",
      async () => {
        let refuse = false;
        let callId = 0;
        const fake: FakeRunner = await FakeRunner.connect(world.relay.url, {
          apiKey: user.apiKey,
          answer: async (req) => {
            const data = req.data as Partial<TriggerRequest & SpawnRequest>;
            if (!data.trigger || (req.op !== "trigger" && req.op !== "spawn")) {
              return defaultAnswer(req);
            }
            if (refuse) return { ok: false, error: { code: "busy", message: "Not now" } };
            // Answer first, as a quick agent does, and acknowledge after the relay replied.
            const id = ++callId;
            fake.send({
              t: "call",
              id,
              op: "triggers.respond",
              data: {
                sessionId: data.sessionId,
                triggerId: data.trigger.triggerId,
                action: "early",
              },
            });
            await fake.until(() => fake.received.some((m) => m.t === "result" && m.id === id));
            return defaultAnswer(req);
          },
        });
        const results = () => fake.received.filter((m) => m.t === "result");
        const answered = async (sessionId: string, triggerId: string) => {
          const [outbound, inbound] = await history(api, sessionId);
          assert.equal(inbound!.triggerId, triggerId);
          assert.equal((inbound!.response as { action: string }).action, "early");
          assert.equal(outbound!.direction, "outbound");
        };
        try {
          const id = await spawnSession(user, fake.runnerId);
          const res = await post(api, `/api/sessions/${id}/trigger`, {
            type: "ci:build_finished",
            payload: { n: 1 },
            expectsResponse: true,
          });
          assert.equal(res.status, 200, JSON.stringify(res.body));
          assert.deepEqual(results(), [{ t: "result", id: 1, ok: true, data: { ok: true } }]);
          await answered(id, res.body.triggerId);

          // A listener's session: its trigger is in the history before the runner starts it.
          fake.send({ t: "service_announce", triggerDefs: [DEFS[0]] });
          await eventually("the fake runner's trigger type", async () => {
            const res = await answer(await api(`/api/runners/${fake.runnerId}/triggers`));
            return JSON.stringify(res.body).includes("ci:build_finished") || undefined;
          });
          const listener = await post(api, `/api/runners/${fake.runnerId}/trigger-listeners`, {
            triggerType: "ci:build_finished",
            prompt: "Answer it",
          });
          assert.equal(listener.status, 200, JSON.stringify(listener.body));
          const fired = await post(api, `/api/runners/${fake.runnerId}/trigger-broadcast`, {
            type: "ci:build_finished",
            payload: { branch: "main" },
          });
          assert.equal(fired.status, 200, JSON.stringify(fired.body));
          assert.deepEqual(results().map((r) => r.ok), [true, true], JSON.stringify(results()));
          const spawned = fake.requests.filter((r) => r.op === "spawn")
            .map((r) => r.data as SpawnRequest).find((d) => d.trigger)!;
          await answered(spawned.sessionId, spawned.trigger!.triggerId);

          refuse = true;
          const refused = await post(api, `/api/sessions/${id}/trigger`, {
            type: "ci:build_finished",
            payload: { n: 2 },
          });
          assert.notEqual(refused.status, 200);
          assert.equal((await history(api, id)).length, 2, "the refused trigger is not in it");
          const rows = () =>
            (world.relay.relay.db!.prepare("SELECT COUNT(*) AS n FROM trigger_history").get() as {
              n: number;
            }).n;
          const before = [(await allSessionIds(user)).length, rows()];
          await post(api, `/api/runners/${fake.runnerId}/trigger-broadcast`, {
            type: "ci:build_finished",
            payload: { branch: "main" },
          });
          assert.deepEqual(
            [(await allSessionIds(user)).length, rows()],
            before,
            "the refused spawn left no session and no history entry",
          );
        } finally {
          await fake.close();
        }
      },
    );

    await s.step(
      "subscriptions: validated on create; listed; updated by id in the path or the query; deleted by id or type",
      async () => {
        const path = `/api/sessions/${main}/trigger-subscriptions`;
        const bad: [string, unknown, string?][] = [
          ["no type", {}],
          ["type not on the runner", { triggerType: "ci:deployed" }, "unknown_trigger_type"],
          ["invalid definition's type", { triggerType: "bad:params" }, "unknown_trigger_type"],
          [
            "unknown param",
            { triggerType: "ci:build_finished", params: { nope: "x" } },
            "invalid_params",
          ],
          ["number param with a word", {
            triggerType: "ci:build_finished",
            params: { attempt: "many" },
          }, "invalid_params"],
          ["object param", { triggerType: "ci:build_finished", params: { branch: { a: 1 } } }],
          ["filter without field", { triggerType: "ci:build_finished", filters: [{ value: 1 }] }],
          ["filter without value", { triggerType: "ci:build_finished", filters: [{ field: "a" }] }],
          ["unknown op", {
            triggerType: "ci:build_finished",
            filters: [{ field: "a", value: 1, op: "regex" }],
          }],
          ["unknown filterMode", { triggerType: "ci:build_finished", filterMode: "xor" }],
        ];
        for (const [what, body, code] of bad) {
          const res = await post(api, path, body);
          assert.equal(res.status, 400, `${what}: ${JSON.stringify(res.body)}`);
          if (code) assert.equal(res.body.error.code, code, what);
        }
        assert.deepEqual(await subscriptions(api, main), [], "nothing was stored");

        const a = await post(api, path, {
          triggerType: "ci:build_finished",
          params: { branch: "main" },
        });
        assert.equal(a.status, 200, JSON.stringify(a.body));
        assert.equal(a.body.ok, true);
        assert.equal(a.body.triggerType, "ci:build_finished");
        assert.equal(a.body.runnerId, runnerId);
        const filters = [
          { field: "repo.owner.login", value: "acme" },
          { field: "status", value: ["failed", "errored"], op: "eq" },
        ];
        const b = await post(api, path, {
          triggerType: "ci:build_finished",
          filters,
          filterMode: "or",
        });
        const c = await post(api, path, {
          triggerType: "mail:received",
          params: { subjectContains: "invoice" },
        });
        assert.equal(c.status, 200, JSON.stringify(c.body));
        const ids = [a.body.subscriptionId, b.body.subscriptionId, c.body.subscriptionId];
        assert.equal(new Set(ids).size, 3);

        const listed = await subscriptions(api, main);
        assert.deepEqual(listed.map((x) => x.subscriptionId), ids);
        assert.deepEqual(
          listed.map(({ triggerType, runnerId, params, filters, filterMode }) => ({
            triggerType,
            runnerId,
            params,
            filters,
            filterMode,
          })),
          [
            {
              triggerType: "ci:build_finished",
              runnerId,
              params: { branch: "main" },
              filters: [],
              filterMode: "and",
            },
            { triggerType: "ci:build_finished", runnerId, params: {}, filters, filterMode: "or" },
            {
              triggerType: "mail:received",
              runnerId,
              params: { subjectContains: "invoice" },
              filters: [],
              filterMode: "and",
            },
          ],
        );

        const put = async (target: string, body: unknown, query = "") =>
          await answer(await api(`${path}${target}${query}`, json("PUT", body)));
        const byPath = await put(`/${ids[0]}`, {
          params: { branch: "dev", attempt: 3 },
          filters: [{ field: "status", value: "failed" }],
          filterMode: "or",
        });
        assert.equal(byPath.status, 200, JSON.stringify(byPath.body));
        assert.equal(byPath.body.subscriptionId, ids[0]);
        const byQuery = await put(
          "",
          { filterMode: "and", filters: null },
          `?subscriptionId=${ids[1]}`,
        );
        assert.equal(byQuery.status, 200, JSON.stringify(byQuery.body));
        assert.equal(byQuery.body.subscriptionId, ids[1]);
        const invalid = await put(`/${ids[2]}`, { params: { nope: "x" } });
        assert.equal(invalid.status, 400);
        assert.equal((await put(`/${crypto.randomUUID()}`, { filterMode: "or" })).status, 404);
        assert.equal((await put("", { filterMode: "or" })).status, 400, "no target at all");

        const after = await subscriptions(api, main);
        assert.deepEqual(after[0]!.params, { branch: "dev", attempt: 3 });
        assert.deepEqual(after[0]!.filters, [{ field: "status", value: "failed" }]);
        assert.equal(after[0]!.filterMode, "or");
        assert.deepEqual(after[1]!.filters, []);
        assert.equal(after[1]!.filterMode, "and");
        assert.deepEqual(
          after[2]!.params,
          { subjectContains: "invoice" },
          "the invalid update changed nothing",
        );

        const del = (target: string, query = "") =>
          api(`${path}${target}${query}`, { method: "DELETE" }).then(answer);
        assert.deepEqual(await del(`/${ids[2]}`), {
          status: 200,
          body: { ok: true, ...listed[2], removed: 1 },
        });
        // Legacy: a trigger type removes every subscription of that type.
        const d = await post(api, path, { triggerType: "ci:build_finished" });
        const byType = await del("/ci:build_finished");
        assert.equal(byType.status, 200);
        assert.equal(byType.body.removed, 3);
        assert.equal(byType.body.triggerType, "ci:build_finished");
        assert.deepEqual(await subscriptions(api, main), []);
        assert.equal((await del(`/${d.body.subscriptionId}`)).status, 404);
        assert.equal((await del("/ci:build_finished")).status, 404);
        // By id in the query.
        const e = await post(api, path, { triggerType: "cron:tick" });
        const byQ = await del("", `?subscriptionId=${e.body.subscriptionId}`);
        assert.equal(byQ.body.removed, 1);
        assert.deepEqual(await subscriptions(api, main), []);
      },
    );

    await s.step(
      "the agent's own tools list the catalog, subscribe and list, and the relay shows the same",
      async () => {
        world.model.rules = [(req) => {
          if (!userTexts(req)[0]?.startsWith("I am session agent-subscriber")) return undefined;
          if (req.messages.at(-1)?.role === "user" && toolResults(req) > 0) return undefined;
          switch (toolResults(req)) {
            case 0:
              return { toolCalls: [{ name: "list_available_triggers", args: {} }] };
            case 1:
              return {
                toolCalls: [{
                  name: "subscribe_trigger",
                  args: {
                    triggerType: "ci:build_finished",
                    params: { branch: "release" },
                    filters: [{ field: "repo.owner.login", value: "acme" }],
                  },
                }],
              };
            case 2:
              return { toolCalls: [{ name: "list_trigger_subscriptions", args: {} }] };
            default:
              return undefined;
          }
        }];
        const id = await spawn(world, "I am session agent-subscriber: subscribe to release builds");
        await viewer.until(() => runs(viewer, id) === 1, "the subscribing run");
        world.model.rules = [];
        const mine = world.model.matching((r) => sessionName(r) === "agent-subscriber");
        assert.equal(mine.length, 4);
        const lastTool = (r: ChatRequest) => requestText({ ...r, messages: [r.messages.at(-1)!] });
        assert.match(
          lastTool(mine[1]!),
          /"type": "ci:build_finished"/,
          "the catalog reached the agent",
        );
        assert.match(lastTool(mine[1]!), /"name": "attempt"/);

        const subs = await subscriptions(api, id);
        assert.equal(subs.length, 1);
        assert.deepEqual(
          { ...subs[0], subscriptionId: "", createdAt: "" },
          {
            subscriptionId: "",
            createdAt: "",
            triggerType: "ci:build_finished",
            runnerId,
            params: { branch: "release" },
            filters: [{ field: "repo.owner.login", value: "acme" }],
            filterMode: "and",
          },
        );
        assert.ok(
          lastTool(mine[2]!).includes(subs[0]!.subscriptionId as string),
          "subscribe answered the id",
        );
        assert.ok(lastTool(mine[3]!).includes(subs[0]!.subscriptionId as string), "list shows it");
        assert.deepEqual(await subscriptions(api, main), [], "only its own session is subscribed");

        // Another agent updates and removes what it subscribed to, and meets a refusal.
        const idOf = (text: string) => text.match(/"subscriptionId": "([0-9a-f-]{36})"/)?.[1];
        world.model.rules = [(req) => {
          if (!userTexts(req)[0]?.startsWith("I am session agent-editor")) return undefined;
          if (req.messages.at(-1)?.role === "user" && toolResults(req) > 0) return undefined;
          const subscriptionId = idOf(requestText(req));
          const call = (name: string, args: Record<string, unknown>) => ({
            toolCalls: [{ name, args }],
          });
          switch (toolResults(req)) {
            case 0:
              return call("subscribe_trigger", { triggerType: "ci:deployed" });
            case 1:
              return call("subscribe_trigger", { triggerType: "cron:tick", params: { job: "a" } });
            case 2:
              return call("update_trigger_subscription", {
                subscriptionId,
                params: { job: "b" },
                filterMode: "or",
              });
            case 3:
              return call("list_trigger_subscriptions", {});
            case 4:
              return call("unsubscribe_trigger", { subscriptionId });
            default:
              return undefined;
          }
        }];
        const editor = await spawn(world, "I am session agent-editor");
        await viewer.until(() => runs(viewer, editor) === 1, "the editing run");
        world.model.rules = [];
        const edits = world.model.matching((r) => sessionName(r) === "agent-editor");
        assert.equal(edits.length, 6);
        assert.match(
          lastTool(edits[1]!),
          /Trigger type is not available on this runner: 'ci:deployed'/,
        );
        const subId = idOf(lastTool(edits[2]!));
        assert.ok(subId, lastTool(edits[2]!));
        assert.match(lastTool(edits[3]!), /"job": "b"/);
        assert.match(lastTool(edits[3]!), /"filterMode": "or"/);
        assert.ok(lastTool(edits[4]!).includes(subId!));
        assert.match(lastTool(edits[4]!), /"job": "b"/);
        assert.match(lastTool(edits[5]!), /"removed": 1/);
        assert.deepEqual(await subscriptions(api, editor), []);
      },
    );

    await s.step(
      "broadcast: key only, declared types only, fans out to matching running sessions and listeners",
      async () => {
        const base = `/api/runners/${runnerId}/trigger-broadcast`;
        const ci = (payload: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
          post(api, base, { type: "ci:build_finished", payload, ...extra });

        const cookie = await answer(
          await user.web(base, json("POST", { type: "ci:build_finished", payload: {} })),
        );
        assert.equal(cookie.status, 403, JSON.stringify(cookie.body));
        assert.equal(cookie.body.error.code, "key_required");
        const undeclared = await post(api, base, { type: "ci:deployed", payload: {} });
        assert.equal(undeclared.status, 400);
        assert.equal(undeclared.body.error.code, "unknown_trigger_type");
        for (
          const body of [
            { type: "ci:build_finished" },
            { type: "ci:build_finished", payload: [] },
            { payload: {} },
          ]
        ) {
          assert.equal((await post(api, base, body)).status, 400, JSON.stringify(body));
        }
        assert.equal(
          (await post(api, `/api/runners/no-such-runner/trigger-broadcast`, {
            type: "ci:build_finished",
            payload: {},
          }))
            .status,
          404,
        );

        // The subscribers, one rule each.
        const subscribe = async (name: string, body: Record<string, unknown>) => {
          const id = name === "main" ? main : await spawn(world, `I am session ${name}`);
          const res = await post(api, `/api/sessions/${id}/trigger-subscriptions`, body);
          assert.equal(res.status, 200, JSON.stringify(res.body));
          return id;
        };
        await subscribe("main", {
          triggerType: "ci:build_finished",
          params: { branch: "main", attempt: "2" },
        });
        const nested = await subscribe("nested", {
          triggerType: "ci:build_finished",
          filters: [{ field: "repo.owner.login", value: "acme" }, {
            field: "branch",
            value: "dev",
          }],
        });
        const array = await subscribe("array", {
          triggerType: "ci:build_finished",
          filters: [{ field: "status", value: ["failed", "errored"] }],
        });
        await subscribe("either", {
          triggerType: "ci:build_finished",
          filters: [{ field: "message", value: "flaky", op: "contains" }, {
            field: "attempt",
            value: 3,
          }],
          filterMode: "or",
        });
        const mail = await subscribe("mail", {
          triggerType: "mail:received",
          params: { subjectContains: "invoice", labels: "urgent" },
        });
        const gone = await subscribe("gone", { triggerType: "ci:build_finished" });
        await endSession(world, gone);
        const listener = await post(api, `/api/runners/${runnerId}/trigger-listeners`, {
          triggerType: "ci:build_finished",
          prompt: "LISTENER-FIX: fix the failed build",
          cwd: world.root,
          model: MODEL,
          params: { status: "failed" },
        });
        assert.equal(listener.status, 200, JSON.stringify(listener.body));

        const cases: {
          marker: string;
          send: () => Promise<{ status: number; body: Record<string, unknown> }>;
          to: string[];
          spawned: number;
        }[] = [
          {
            marker: "BC-P1",
            send: () =>
              ci({
                branch: "main",
                attempt: 2,
                status: "passed",
                repo: { owner: { login: "other" } },
                message: "all good",
                marker: "BC-P1",
              }),
            to: ["main"],
            spawned: 0,
          },
          {
            marker: "BC-P2",
            send: () =>
              ci({
                branch: "dev",
                attempt: 3,
                status: "failed",
                repo: { owner: { login: "acme" } },
                message: "a flaky test",
                marker: "BC-P2",
              }),
            to: ["array", "either", "listener:LISTENER-FIX:", "nested"],
            spawned: 1,
          },
          {
            marker: "BC-P3",
            send: async () => {
              // A runner token (what a service on the runner holds) may broadcast
              // too, on its own runner.
              const created = await user.api(
                "/api/keys",
                json("POST", { name: "runner-service", runnerId }),
              );
              const { key: token } = await created.json();
              return await answer(
                await fetch(`${world.relay.url}${base}`, {
                  ...json("POST", {
                    type: "ci:build_finished",
                    payload: {
                      branch: "main",
                      attempt: 1,
                      status: "passed",
                      repo: { owner: { login: "acme" } },
                      message: "fine",
                      marker: "BC-P3",
                    },
                  }),
                  headers: { "content-type": "application/json", "x-api-key": token },
                }),
              );
            },
            to: [],
            spawned: 0,
          },
          {
            marker: "BC-P4",
            send: () =>
              ci(
                {
                  branch: "release",
                  attempt: 1,
                  status: "errored",
                  repo: { owner: { login: "acme" } },
                  marker: "BC-P4",
                },
                { deliverAs: "steer", source: "ci-service", summary: "Release build errored" },
              ),
            to: ["agent-subscriber", "array"],
            spawned: 0,
          },
          {
            marker: "BC-M1",
            send: () =>
              post(api, base, {
                type: "mail:received",
                payload: {
                  from: "billing@x.test",
                  subject: "Your invoice #42",
                  labels: ["billing", "urgent"],
                  marker: "BC-M1",
                },
              }),
            to: ["mail"],
            spawned: 0,
          },
          {
            marker: "BC-M2",
            send: () =>
              post(api, base, {
                type: "mail:received",
                payload: { subject: "Invoice due", labels: ["urgent"], marker: "BC-M2" },
              }),
            to: [],
            spawned: 0,
          },
          {
            marker: "BC-M3",
            send: () =>
              post(api, base, {
                type: "mail:received",
                payload: { subject: "invoice", labels: "billing", marker: "BC-M3" },
              }),
            to: [],
            spawned: 0,
          },
        ];
        const triggerIds = new Map<string, string>();
        for (const c of cases) {
          const before = await allSessionIds(user);
          const res = await c.send();
          assert.equal(res.status, 200, `${c.marker}: ${JSON.stringify(res.body)}`);
          const { triggerId, ...counts } = res.body;
          assert.match(String(triggerId), /^[0-9a-f-]{36}$/);
          triggerIds.set(c.marker, triggerId as string);
          const delivered = c.to.filter((n) => !n.startsWith("listener:")).length;
          assert.deepEqual(counts, { ok: true, delivered, spawned: c.spawned }, c.marker);
          for (const name of c.to) {
            await world.model.until(
              () => sessionsWith(world, c.marker).includes(name),
              `${c.marker} to reach ${name}`,
            );
          }
          const after = await allSessionIds(user);
          assert.equal(after.length - before.length, c.spawned, `${c.marker}: sessions spawned`);
        }
        // Once everything expected arrived, nothing else did.
        for (const c of cases) assert.deepEqual(sessionsWith(world, c.marker), c.to, c.marker);

        // What the sessions' histories show.
        const [p2] = await history(api, nested);
        assert.equal(p2!.triggerId, triggerIds.get("BC-P2"));
        assert.equal(p2!.source, "ci", "the source defaults to the trigger's service");
        assert.equal(p2!.deliverAs, "followUp", "broadcasts default to followUp");
        const [p4] = await history(api, array);
        assert.deepEqual(
          [p4!.triggerId, p4!.source, p4!.summary, p4!.deliverAs],
          [triggerIds.get("BC-P4"), "ci-service", "Release build errored", "steer"],
        );
        assert.deepEqual(await history(api, gone), [], "an ended session got nothing");
        assert.equal((await history(api, mail)).length, 1);

        // The listener's session: its prompt, then the payload, on the listener's model and folder.
        const spawnedReq = world.model.matching((r) =>
          sessionName(r) === "listener:LISTENER-FIX:"
        )[0]!;
        const [block] = triggerBlocks(userTexts(spawnedReq)[0]!);
        assert.equal(block!.before, "LISTENER-FIX: fix the failed build");
        assert.equal(block!.id, triggerIds.get("BC-P2"));
        assert.equal((block!.payload as { marker: string }).marker, "BC-P2");
        assert.equal(spawnedReq.model, "mock-1");
        const known = [main, nested, array, mail];
        let fresh: { sessionId: string; cwd: string; model: unknown; runnerId: string } | undefined;
        for (const x of (await (await api("/api/sessions")).json()).sessions) {
          if (known.includes(x.sessionId)) continue;
          const [first] = await history(api, x.sessionId);
          if (first?.triggerId === triggerIds.get("BC-P2")) fresh = x;
        }
        assert.ok(fresh, "the listener's session is listed");
        assert.equal(fresh!.runnerId, runnerId);
        assert.equal(fresh!.cwd, world.root);
        assert.deepEqual(fresh!.model, MODEL);
        const del = await answer(
          await api(`/api/runners/${runnerId}/trigger-listeners/${listener.body.listenerId}`, {
            method: "DELETE",
          }),
        );
        assert.equal(del.body.removed, 1);
      },
    );

    await s.step(
      "listeners: validated on create; listed; updated and deleted by id or by type",
      async () => {
        const path = `/api/runners/${runnerId}/trigger-listeners`;
        const bad: [string, unknown][] = [
          ["no type", { prompt: "x" }],
          ["type not on the runner", { triggerType: "cron:yearly" }],
          ["unknown param", { triggerType: "cron:tick", params: { when: "now" } }],
          ["model without id", { triggerType: "cron:tick", model: { provider: "mock" } }],
        ];
        for (const [what, body] of bad) {
          assert.equal((await post(api, path, body)).status, 400, what);
        }
        assert.deepEqual(await listeners(api, runnerId), []);
        const a = await post(api, path, {
          triggerType: "cron:tick",
          prompt: "TICK-A",
          cwd: world.root,
          model: MODEL,
          params: { job: "backup" },
        });
        assert.equal(a.status, 200, JSON.stringify(a.body));
        assert.equal(a.body.ok, true);
        assert.equal(a.body.triggerType, "cron:tick");
        const b = await post(api, path, { triggerType: "cron:tick", prompt: "TICK-B" });
        const c = await post(api, path, { triggerType: "cron:tick" });
        const ids = [a.body.listenerId, b.body.listenerId, c.body.listenerId];
        const listed = await listeners(api, runnerId);
        assert.deepEqual(listed.map((l) => l.listenerId), ids);
        assert.deepEqual(
          listed.map(({ triggerType, prompt, cwd, model, params }) => ({
            triggerType,
            prompt,
            cwd,
            model,
            params,
          })),
          [
            {
              triggerType: "cron:tick",
              prompt: "TICK-A",
              cwd: world.root,
              model: MODEL,
              params: { job: "backup" },
            },
            { triggerType: "cron:tick", prompt: "TICK-B", cwd: null, model: null, params: {} },
            { triggerType: "cron:tick", prompt: "", cwd: null, model: null, params: {} },
          ],
        );
        for (const l of listed) assert.match(String(l.createdAt), /^\d{4}-\d\d-\d\dT/);
        const runnerView = await answer(await api(`/api/runners/${runnerId}/triggers`));
        assert.deepEqual(runnerView.body.listeners, listed);

        const put = (target: string, body: unknown) =>
          api(`${path}/${target}`, json("PUT", body)).then(answer);
        const updated = await put(ids[0], {
          prompt: "TICK-A2",
          params: { job: "restore" },
          model: null,
        });
        assert.equal(updated.status, 200, JSON.stringify(updated.body));
        assert.equal(updated.body.listenerId, ids[0]);
        assert.equal((await put(ids[0], { params: { when: "now" } })).status, 400);
        assert.equal((await put(ids[0], { triggerType: "cron:yearly" })).status, 400);
        assert.equal((await put(crypto.randomUUID(), { prompt: "x" })).status, 404);
        const [first] = await listeners(api, runnerId);
        assert.deepEqual(
          [first!.prompt, first!.params, first!.model, first!.cwd],
          ["TICK-A2", { job: "restore" }, null, world.root],
        );

        const del = (target: string) => api(`${path}/${target}`, { method: "DELETE" }).then(answer);
        assert.deepEqual(await del(ids[0]), {
          status: 200,
          body: { ok: true, listenerId: ids[0], triggerType: "cron:tick", removed: 1 },
        });
        const byType = await del("cron:tick");
        assert.equal(byType.status, 200);
        assert.equal(byType.body.removed, 2);
        assert.deepEqual(await listeners(api, runnerId), []);
        assert.equal((await del(ids[1])).status, 404);
        assert.equal((await del("cron:tick")).status, 404);
      },
    );

    await s.step(
      "another user's sessions, subscriptions, runners and listeners answer exactly like missing ones",
      async () => {
        const bob = await signUp(world.relay.url, { name: "Bob" });
        const bobRunner = await FakeRunner.connect(world.relay.url, { apiKey: bob.apiKey });
        try {
          // Bob's runner declares the same trigger types as Alice's.
          bobRunner.send({
            t: "service_announce",
            triggerDefs: DEFS.slice(0, 3),
            panels: [],
            sigils: [],
          });
          await bobRunner.barrier();
          const bobSession = await spawnSession(bob, bobRunner.runnerId);

          const sub = await post(api, `/api/sessions/${main}/trigger-subscriptions`, {
            triggerType: "ci:build_finished",
            params: { branch: "isolation" },
          });
          const listener = await post(api, `/api/runners/${runnerId}/trigger-listeners`, {
            triggerType: "cron:tick",
            prompt: "LISTENER-ISOLATION",
            cwd: world.root,
            model: MODEL,
          });
          const subId: string = sub.body.subscriptionId;
          const listenerId: string = listener.body.listenerId;
          const aliceBefore = {
            history: await history(api, main, "?limit=200"),
            subs: await subscriptions(api, main),
            listeners: await listeners(api, runnerId),
          };

          type Call = (as: Api, id: string) => Promise<Response>;
          const onSession: [string, Call][] = [
            [
              "POST trigger",
              (as, id) =>
                as(
                  `/api/sessions/${id}/trigger`,
                  json("POST", { type: "ci:build_finished", payload: { marker: "BOB" } }),
                ),
            ],
            ["GET triggers", (as, id) => as(`/api/sessions/${id}/triggers`)],
            [
              "DELETE triggers",
              (as, id) => as(`/api/sessions/${id}/triggers`, { method: "DELETE" }),
            ],
            ["GET available-triggers", (as, id) => as(`/api/sessions/${id}/available-triggers`)],
            ["GET subscriptions", (as, id) => as(`/api/sessions/${id}/trigger-subscriptions`)],
            [
              "POST subscription",
              (as, id) =>
                as(
                  `/api/sessions/${id}/trigger-subscriptions`,
                  json("POST", { triggerType: "ci:build_finished" }),
                ),
            ],
            [
              "PUT subscription",
              (as, id) =>
                as(
                  `/api/sessions/${id}/trigger-subscriptions/${subId}`,
                  json("PUT", { filterMode: "or" }),
                ),
            ],
            [
              "PUT subscription by query",
              (as, id) =>
                as(
                  `/api/sessions/${id}/trigger-subscriptions?subscriptionId=${subId}`,
                  json("PUT", { filterMode: "or" }),
                ),
            ],
            [
              "DELETE subscription",
              (as, id) =>
                as(`/api/sessions/${id}/trigger-subscriptions/${subId}`, { method: "DELETE" }),
            ],
            [
              "DELETE subscriptions by type",
              (as, id) =>
                as(`/api/sessions/${id}/trigger-subscriptions/ci:build_finished`, {
                  method: "DELETE",
                }),
            ],
          ];
          const onRunner: [string, Call][] = [
            ["GET triggers", (as, id) => as(`/api/runners/${id}/triggers`)],
            ["GET listeners", (as, id) => as(`/api/runners/${id}/trigger-listeners`)],
            [
              "POST listener",
              (as, id) =>
                as(
                  `/api/runners/${id}/trigger-listeners`,
                  json("POST", { triggerType: "cron:tick", prompt: "BOB" }),
                ),
            ],
            [
              "PUT listener",
              (as, id) =>
                as(
                  `/api/runners/${id}/trigger-listeners/${listenerId}`,
                  json("PUT", { prompt: "BOB" }),
                ),
            ],
            [
              "DELETE listener",
              (as, id) =>
                as(`/api/runners/${id}/trigger-listeners/${listenerId}`, { method: "DELETE" }),
            ],
            [
              "DELETE listeners by type",
              (as, id) =>
                as(`/api/runners/${id}/trigger-listeners/cron:tick`, { method: "DELETE" }),
            ],
            ["POST broadcast", (as, id) =>
              as(
                `/api/runners/${id}/trigger-broadcast`,
                json("POST", { type: "cron:tick", payload: { marker: "BOB" } }),
              )],
          ];
          const same = async (what: string, call: Call, foreign: string, missing: string) => {
            for (const [via, as] of [["key", bob.api], ["cookie", bob.web]] as const) {
              if (via === "cookie" && what === "POST broadcast") continue;
              const a = await answer(await call(as, foreign));
              const b = await answer(await call(as, missing));
              assert.equal(a.status, 404, `${what} via ${via}: ${JSON.stringify(a.body)}`);
              assert.deepEqual(a, b, `${what} via ${via}`);
            }
          };
          for (const [what, call] of onSession) await same(what, call, main, crypto.randomUUID());
          for (const [what, call] of onRunner) await same(what, call, runnerId, "no-such-runner");

          // Alice's subscription and listener ids mean nothing on Bob's own session and runner.
          const ownSession = await answer(
            await bob.api(`/api/sessions/${bobSession}/trigger-subscriptions/${subId}`, {
              method: "DELETE",
            }),
          );
          const ownMissing = await answer(
            await bob.api(
              `/api/sessions/${bobSession}/trigger-subscriptions/${crypto.randomUUID()}`,
              {
                method: "DELETE",
              },
            ),
          );
          assert.equal(ownSession.status, 404);
          assert.deepEqual(ownSession, ownMissing);
          const ownRunner = await answer(
            await bob.api(
              `/api/runners/${bobRunner.runnerId}/trigger-listeners/${listenerId}`,
              json("PUT", { prompt: "x" }),
            ),
          );
          assert.equal(ownRunner.status, 404);
          assert.deepEqual(
            ownRunner,
            await answer(
              await bob.api(
                `/api/runners/${bobRunner.runnerId}/trigger-listeners/${crypto.randomUUID()}`,
                json("PUT", { prompt: "x" }),
              ),
            ),
          );
          // Bob's broadcast of the same type on his own runner reaches none of Alice's sessions.
          const sessionsBefore = await allSessionIds(user);
          const bc = await post(bob.api, `/api/runners/${bobRunner.runnerId}/trigger-broadcast`, {
            type: "ci:build_finished",
            payload: { branch: "isolation", marker: "BOB" },
          });
          assert.deepEqual({ ...bc.body, triggerId: "" }, {
            ok: true,
            delivered: 0,
            spawned: 0,
            triggerId: "",
          });
          const cron = await post(bob.api, `/api/runners/${bobRunner.runnerId}/trigger-broadcast`, {
            type: "cron:tick",
            payload: { marker: "BOB" },
          });
          assert.equal(cron.body.spawned, 0, "Alice's listener is not Bob's");

          assert.deepEqual(await history(api, main, "?limit=200"), aliceBefore.history);
          assert.deepEqual(await subscriptions(api, main), aliceBefore.subs);
          assert.deepEqual(await listeners(api, runnerId), aliceBefore.listeners);
          assert.deepEqual(await allSessionIds(user), sessionsBefore);
          assert.equal(world.model.matching((r) => requestText(r).includes("BOB")).length, 0);
          assert.equal(bobRunner.requests.filter((r) => r.op === "trigger").length, 0);
        } finally {
          await bobRunner.close();
        }
      },
    );
  } finally {
    await closeWorld(w, s.ok);
  }
});

Deno.test("triggers posted at the same moment to an idle session each reach the agent", async () => {
  let w: World | undefined;
  let ok = false;
  try {
    w = await startWorld({ triggerDefs: DEFS });
    const world = w;
    const id = await spawn(world, "I am session burst");
    await world.viewer.until(() => runs(world.viewer, id) === 1, "the first run");
    const markers = ["BURST-1", "BURST-2", "BURST-3"];
    const answers = await Promise.all(
      markers.map((marker) =>
        post(world.user.api, `/api/sessions/${id}/trigger`, {
          type: "ci:build_finished",
          payload: { marker },
        })
      ),
    );
    for (const a of answers) assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal((await history(world.user.api, id)).length, 3);
    // Each accepted trigger must reach the model; none may be dropped as "already processing".
    for (const m of markers) await world.model.withText(m, 10_000);
    const errors = world.viewer.eventsOf(id).filter((e) => e.e.type === "session_error");
    assert.deepEqual(errors.map((e) => e.e.message), []);
    ok = true;
  } finally {
    await closeWorld(w, ok);
  }
});

Deno.test("listeners survive a runner restart and a relay restart, and still spawn sessions", async () => {
  const llm = MockLlm.start();
  const model = new ModelWatch(llm);
  const relay = await RelayProcess.start();
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    const home = await prepareHome(llm, DEFS);
    const root = join(home, "work");
    await Deno.mkdir(root);
    const env = { BATON_WORKSPACE_ROOTS: root };
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home, env });
    const [r] = await (await user.api("/api/runners")).json();
    const runnerId: string = r.id;
    await eventually("the runner's catalog", async () => {
      const { triggerDefs } = await (await user.api(`/api/runners/${runnerId}/triggers`)).json();
      return triggerDefs.length === 3 ? true : undefined;
    });
    const created = await post(user.api, `/api/runners/${runnerId}/trigger-listeners`, {
      triggerType: "cron:tick",
      prompt: "LISTENER-PERSIST: run the backup",
      cwd: root,
      model: MODEL,
      params: { job: "backup" },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const listed = await listeners(user.api, runnerId);
    assert.equal(listed.length, 1);

    const tick = async (marker: string, job = "backup") => {
      const res = await post(user.api, `/api/runners/${runnerId}/trigger-broadcast`, {
        type: "cron:tick",
        payload: { job, marker },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    const spawnedWith = async (marker: string) => {
      const req = await model.withText(marker, 30_000);
      const [block] = triggerBlocks(userTexts(req)[0]!);
      assert.equal(block!.before, "LISTENER-PERSIST: run the backup");
      assert.equal((block!.payload as { marker: string }).marker, marker);
    };

    // The runner daemon stops and starts again (same HOME, same runner id).
    await runner.stop();
    await eventually("the relay to see the runner gone", async () => {
      const [r] = await (await user.api("/api/runners")).json();
      return r.connected === false ? true : undefined;
    });
    // Meanwhile a broadcast reaches no one, and says so rather than counting
    // zeros: nothing is started, now or once the runner is back.
    const sessionsBefore = await allSessionIds(user);
    const offline = await post(user.api, `/api/runners/${runnerId}/trigger-broadcast`, {
      type: "cron:tick",
      payload: { job: "backup", marker: "WHILE-OFFLINE" },
    });
    assert.equal(offline.status, 503, JSON.stringify(offline.body));
    assert.equal(offline.body.error.code, "runner_offline");
    assert.match(offline.body.error.message, /^[A-Z].*[^.]$/);
    assert.deepEqual(await allSessionIds(user), sessionsBefore);
    runner = await startRunner({ relayUrl: relay.url, apiKey: user.apiKey, home, env });
    assert.deepEqual(await listeners(user.api, runnerId), listed, "kept across a runner restart");
    const afterRunner = await tick("AFTER-RUNNER-RESTART");
    assert.deepEqual([afterRunner.delivered, afterRunner.spawned], [0, 1]);
    await spawnedWith("AFTER-RUNNER-RESTART");

    // The relay crashes and comes back on the same data folder.
    await relay.kill("SIGKILL");
    await relay.restart();
    await runner.connected(2);
    assert.deepEqual(await listeners(user.api, runnerId), listed, "kept across a relay restart");
    const afterRelay = await tick("AFTER-RELAY-RESTART");
    assert.deepEqual([afterRelay.delivered, afterRelay.spawned], [0, 1]);
    await spawnedWith("AFTER-RELAY-RESTART");
    const other = await tick("OTHER-JOB", "cleanup");
    assert.equal(other.spawned, 0, "params still decide");
    assert.deepEqual(
      model.llm.requests.filter((r) => requestText(r).includes("WHILE-OFFLINE")),
      [],
      "the broadcast sent while the runner was offline started nothing",
    );
    ok = true;
  } finally {
    if (!ok) {
      if (runner) console.error(runner.proc.output());
      console.error(relay.proc.output());
    }
    await runner?.stop();
    await relay.stop();
    await llm.close();
  }
});
