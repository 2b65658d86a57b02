/**
 * The service worker's side of `agent_needs_input`, in a real Chromium:
 * a push message with a question's buttons and reply is shown with them, a
 * tap on a button and an inline reply answer the waiting agent through
 * `/api/push/answer` (the worker's fetch carries the browser's cookie and
 * passes the Origin check), a refused answer says so in a notification, and
 * a question answered elsewhere has its notification quietly replaced.
 *
 * No push service is reachable from the tests, so the push and the click are
 * dispatched inside the worker (`PushEvent`, `NotificationEvent`); the
 * payload is the one the relay sends (tests/questions_test.ts checks that).
 *
 * @module
 */
import assert from "node:assert/strict";
import { launchBrowser, newPage, signInUi } from "./harness/browser.ts";
import { json, Viewer } from "./harness/client.ts";
import { withStack } from "./harness/in_process.ts";
import type { ChatRequest } from "./harness/mock_llm.ts";

const QUESTION = {
  questions: [{
    question: "Which database should the service use?",
    options: [{ label: "PostgreSQL" }, { label: "SQLite" }],
  }],
};

/** Asks twice (call_sw1, then call_sw2), then is done. */
function respond(req: ChatRequest) {
  const results = req.messages.filter((m) => m.role === "tool").length;
  if (results >= 2) return { text: "Done." };
  return { toolCalls: [{ id: `call_sw${results + 1}`, name: "ask_user", args: QUESTION }] };
}

function payload(sessionId: string, toolCallId: string) {
  return {
    kind: "agent_needs_input",
    sessionId,
    title: "baton: Set up",
    body: 'agent in "Set up" asks: Which database should the service use?',
    url: `/session/${sessionId}`,
    tag: `session-${sessionId}`,
    ts: Date.now(),
    toolCallId,
    actions: [
      { action: "option0", title: "PostgreSQL", answer: "PostgreSQL" },
      { action: "option1", title: "SQLite", answer: "SQLite" },
      { action: "reply", title: "Reply", type: "text", placeholder: "Your answer" },
    ],
  };
}

Deno.test("service worker: a question's buttons and inline reply answer the agent", async () => {
  await withStack({ responder: respond }, async (s) => {
    const res = await s.user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: s.runnerId, prompt: "Set up", cwd: s.home }),
    );
    const { sessionId } = await res.json();
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    viewer.subscribe(sessionId);
    const answered = (id: string) =>
      viewer.eventsOf(sessionId).find((e) =>
        e.e.type === "question_answered" && e.e.toolCallId === id
      )?.e;
    await viewer.waitForEvent(sessionId, "question", 60_000);
    await s.user.web(`/api/sessions/${sessionId}/collab`, json("PUT", { enabled: true }));

    const browser = await launchBrowser();
    try {
      const { page } = await newPage(browser);
      const context = page.context();
      await context.grantPermissions(["notifications"], { origin: s.relay.url });
      await page.goto(`${s.relay.url}/`);
      await signInUi(page, s.user);
      const sw = context.serviceWorkers()[0] ?? await context.waitForEvent("serviceworker");
      await sw.evaluate(async () => {
        const g = self as unknown as { registration: { active: unknown } };
        for (let i = 0; i < 100 && !g.registration.active; i++) {
          await new Promise((r) => setTimeout(r, 50));
        }
      });

      /** Dispatches a push in the worker; the notification it showed. */
      const push = (p: unknown) =>
        sw.evaluate(async (p) => {
          // deno-lint-ignore no-explicit-any
          const g = self as any;
          try {
            g.dispatchEvent(new g.PushEvent("push", { data: JSON.stringify(p) }));
          } catch { /* waitUntil refuses a script's event; the notification is shown */ }
          for (let i = 0; i < 100; i++) {
            const [n] = await g.registration.getNotifications({ tag: p.tag });
            if (n) {
              return {
                title: n.title,
                actions: n.actions.map((a: { action: string }) => a.action),
                data: n.data,
              };
            }
            await new Promise((r) => setTimeout(r, 50));
          }
          return null;
        }, p as Record<string, unknown>);
      /** Taps `action` (with `reply`) on the session's notification. */
      const click = (tag: string, action: string, reply?: string) =>
        sw.evaluate(async ({ tag, action, reply }) => {
          // deno-lint-ignore no-explicit-any
          const g = self as any;
          const [n] = await g.registration.getNotifications({ tag });
          try {
            g.dispatchEvent(
              new g.NotificationEvent("notificationclick", {
                notification: n,
                action,
                ...(reply ? { reply } : {}),
              }),
            );
          } catch { /* as above */ }
        }, { tag, action, reply });

      const tag = `session-${sessionId}`;
      const shown = await push(payload(sessionId, "call_sw1"));
      assert.ok(shown, "the notification is shown");
      assert.deepEqual(shown.actions.slice(0, 2), ["option0", "option1"]);
      assert.equal(shown.data.toolCallId, "call_sw1");
      await click(tag, "option1");
      await viewer.until(() => !!answered("call_sw1"), "the button's answer", 30_000);
      assert.equal(answered("call_sw1")?.answer, "SQLite");
      assert.equal(answered("call_sw1")?.via, "push");

      // The agent asks again: this time the inline reply answers.
      await viewer.until(
        () => viewer.eventsOf(sessionId).some((e) => e.e.toolCallId === "call_sw2"),
        "the second question",
        60_000,
      );
      await push(payload(sessionId, "call_sw2"));
      await click(tag, "reply", "Use SQLite, with WAL");
      await viewer.until(() => !!answered("call_sw2"), "the inline reply", 30_000);
      assert.equal(answered("call_sw2")?.answer, "Use SQLite, with WAL");

      // A stale notification's button: the relay refuses, the worker says so.
      await push(payload(sessionId, "call_sw1"));
      await click(tag, "option0");
      const refusal = await sw.evaluate(async (tag) => {
        // deno-lint-ignore no-explicit-any
        const g = self as any;
        for (let i = 0; i < 100; i++) {
          const [n] = await g.registration.getNotifications({ tag });
          if (n?.title === "baton: the answer was not sent") return n.body;
          await new Promise((r) => setTimeout(r, 50));
        }
        return null;
      }, tag);
      assert.match(String(refusal), /already answered/);

      // Answered in a session view: the relay's withdrawal (relay/push_test.ts) quietly
      // replaces the question's notification, and adds none where it is not shown.
      /**
       * The notifications shown under `tag` once `until` holds (at most 2 s),
       * after `act` ran in the worker and `p` was pushed.
       */
      const shownAfter = (
        act: "clear" | "other" | "",
        p: unknown,
        until: "empty" | "answered" | "some" | "never",
      ) =>
        sw.evaluate(async ({ act, p, tag, until }) => {
          // deno-lint-ignore no-explicit-any
          const g = self as any;
          if (act === "clear") {
            for (const n of await g.registration.getNotifications()) n.close();
            // close() does not wait: a push handled before the list is empty would still see
            // a notification there (and rightly add none).
            for (let i = 0; i < 40 && (await g.registration.getNotifications()).length > 0; i++) {
              await new Promise((r) => setTimeout(r, 25));
            }
          } else if (act === "other") {
            await g.registration.showNotification("baton: another session", { tag: "other" });
          }
          if (p) {
            try {
              g.dispatchEvent(new g.PushEvent("push", { data: JSON.stringify(p) }));
            } catch { /* as above */ }
          }
          let list: { body: string; actions: number; toolCallId?: string }[] = [];
          for (let i = 0; i < 40; i++) {
            list = (await g.registration.getNotifications({ tag })).map((
              n: { body: string; actions: unknown[]; data: { toolCallId?: string } },
            ) => ({ body: n.body, actions: n.actions.length, toolCallId: n.data?.toolCallId }));
            const done = until === "empty"
              ? list.length === 0
              : until === "some"
              ? list.length > 0
              : until === "answered" && list.some((n) => /answered/.test(n.body));
            if (done) break;
            await new Promise((r) => setTimeout(r, 50));
          }
          return list;
        }, { act, p: p as Record<string, unknown>, tag, until });
      const withdrawal = (toolCallId: string) => ({
        kind: "agent_needs_input",
        sessionId,
        title: "baton: Set up",
        body: 'agent in "Set up": the question was answered',
        url: `/session/${sessionId}`,
        tag,
        ts: Date.now(),
        toolCallId,
        resolved: "answered",
      });
      await shownAfter("clear", null, "empty");
      await push(payload(sessionId, "call_sw3"));
      assert.deepEqual(
        await shownAfter("", withdrawal("call_sw3"), "answered"),
        [{
          body: 'agent in "Set up": the question was answered',
          actions: 0,
          toolCallId: undefined,
        }],
      );
      // Not shown here (dismissed), while another notification is: nothing is added.
      await shownAfter("clear", null, "empty");
      assert.deepEqual(await shownAfter("other", withdrawal("call_sw3"), "never"), []);
      // The push service delivered the withdrawal before its question: the question stays over.
      await shownAfter("clear", withdrawal("call_sw9"), "some");
      assert.deepEqual(await shownAfter("clear", payload(sessionId, "call_sw9"), "some"), [{
        body: 'agent in "Set up": the question was answered',
        actions: 0,
        toolCallId: undefined,
      }]);
      // Nothing of baton's shown at all: a push must show something, so the quiet one does.
      assert.equal(
        (await shownAfter("clear", withdrawal("call_sw3"), "some")).length,
        1,
      );
    } finally {
      await viewer.close();
      await browser.close();
    }
  });
});
