/**
 * Steers and follow-ups sent while the agent works wait in a queue: Stop
 * empties it, and each queued message can be taken back before it is read.
 */
import assert from "node:assert/strict";
import { applyEvents, emptyConversation } from "../shared/conversation.ts";
import { json, Viewer } from "./harness/client.ts";
import { type Stack, withStack } from "./harness/in_process.ts";
import { MODEL, type Turn } from "./harness/mock_llm.ts";
import { userTexts } from "./harness/trigger_world.ts";

/**
 * A text-only answer that keeps streaming until `release` (or 60 s), so messages queue
 * meanwhile however slow the machine is (a steer waits for its end).
 */
function slowAnswer(): { turn: Turn; release: () => void } {
  let release!: () => void;
  const hold = new Promise<void>((r) => {
    const timer = setTimeout(r, 60_000);
    release = () => {
      clearTimeout(timer);
      r();
    };
  });
  return { turn: { text: ["q0 ", "q1 "], chunkDelayMs: 50, hold }, release };
}

async function slowSession(w: Stack, viewer: Viewer, turn: Turn): Promise<string> {
  w.llm.enqueue(turn);
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: w.runnerId, cwd: w.home, model: MODEL, prompt: "a slow answer" }),
  );
  const id = (await res.json()).sessionId as string;
  viewer.subscribe(id);
  await viewer.waitForEvent(id, "message_update");
  return id;
}

async function input(w: Stack, id: string, kind: string, text = "") {
  const res = await w.user.api(`/api/sessions/${id}/input`, json("POST", { kind, text }));
  return { status: res.status, body: await res.json() };
}

function queueOf(viewer: Viewer, id: string) {
  return applyEvents(emptyConversation(), viewer.eventsOf(id)).queue;
}

Deno.test("stop drops queued steers and follow-ups, so the next prompt goes alone", async () => {
  await withStack({}, async (w) => {
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    const slow = slowAnswer();
    try {
      const id = await slowSession(w, viewer, slow.turn);
      assert.equal((await input(w, id, "steer", "STEER-X")).status, 200);
      assert.equal((await input(w, id, "followUp", "FOLLOW-Y")).status, 200);
      await viewer.until(
        () =>
          queueOf(viewer, id).followUp.length === 1 && queueOf(viewer, id).steering.length === 1,
        "both queued",
      );
      assert.equal((await input(w, id, "abort")).status, 200);
      await viewer.waitForEvent(id, "agent_end");
      await viewer.until(() => queueOf(viewer, id).steering.length === 0, "the queue emptied");
      assert.deepEqual(queueOf(viewer, id), { steering: [], followUp: [] });

      w.llm.enqueue({ text: "fresh answer" });
      const before = w.llm.requests.length;
      assert.equal((await input(w, id, "prompt", "NEXT-PROMPT")).status, 200);
      await w.llm.waitForRequests(before + 1);
      const said = userTexts(w.llm.requests[before]!);
      assert.equal(said.at(-1), "NEXT-PROMPT");
      assert.equal(said.some((t) => /STEER-X|FOLLOW-Y/.test(t)), false, String(said));
      // A reader who reloads sees no queued message either.
      const stored = await (await w.user.api(`/api/sessions/${id}/events?since=0&limit=5000`))
        .json();
      assert.deepEqual(applyEvents(emptyConversation(), stored.events).queue, {
        steering: [],
        followUp: [],
      });
    } finally {
      slow.release();
      await viewer.close();
    }
  });
});

Deno.test("a queued message can be taken back until the agent reads it", async () => {
  await withStack({}, async (w) => {
    const viewer = await Viewer.connect(w.relay.url, { apiKey: w.user.apiKey });
    const slow = slowAnswer();
    try {
      const id = await slowSession(w, viewer, slow.turn);
      for (
        const [kind, text] of [["steer", "KEEP-A"], ["steer", "DROP-B"], ["followUp", "KEEP-C"]]
      ) {
        assert.equal((await input(w, id, kind!, text)).status, 200);
      }
      await viewer.until(() => queueOf(viewer, id).followUp.length === 1, "all three queued");
      assert.equal((await input(w, id, "dequeue", "DROP-B")).status, 200);
      await viewer.until(() => queueOf(viewer, id).steering.length === 1, "one steer left");
      assert.deepEqual(queueOf(viewer, id), { steering: ["KEEP-A"], followUp: ["KEEP-C"] });

      const gone = await input(w, id, "dequeue", "NEVER-QUEUED");
      assert.equal(gone.status, 409);
      assert.equal(gone.body.error.code, "not_queued");

      // The rest is delivered as queued once the answer ends: the steer, then the follow-up.
      const before = w.llm.requests.length;
      slow.release();
      await w.llm.waitForRequests(before + 2);
      const all = w.llm.requests.slice(before).flatMap(userTexts).join("\n");
      assert.match(all, /KEEP-A/);
      assert.match(all, /KEEP-C/);
      assert.doesNotMatch(all, /DROP-B/);
    } finally {
      slow.release();
      await viewer.close();
    }
  });
});
