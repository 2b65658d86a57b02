/**
 * Push notifications in a real Chromium: the Settings card subscribes this
 * device and changes its kinds at the relay; the service worker shows a
 * pushed message (delivered through the DevTools protocol, since headless
 * Chromium has no push service here); and a session open on a visible page
 * holds its notifications at the relay.
 *
 * Chromium's own `pushManager.subscribe()` needs Google's push service,
 * which a test cannot reach: the page's `subscribe` is replaced by one that
 * answers with a subscription of the test push service. Everything after
 * it (the relay's routes, encryption, the push service's checks) is real.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep screenshots of the card.
 */
import assert from "node:assert/strict";
import type { PushSubscriptionsResponse } from "../shared/api.ts";
import { launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { signUp } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { PushService } from "./harness/push_service.ts";
import { eventually } from "./harness/wait.ts";

/** Replaces PushManager.subscribe with one that returns `sub` (see the module doc). */
function fakePushManager(sub: { endpoint: string; keys: { p256dh: string; auth: string } }) {
  return `(() => {
    const sub = ${JSON.stringify(sub)};
    let current = null;
    const make = (key) => ({
      endpoint: sub.endpoint,
      options: { applicationServerKey: key, userVisibleOnly: true },
      toJSON: () => ({ endpoint: sub.endpoint, expirationTime: null, keys: sub.keys }),
      unsubscribe: async () => { current = null; return true; },
    });
    PushManager.prototype.subscribe = async function (o) {
      current = make(o.applicationServerKey);
      return current;
    };
    PushManager.prototype.getSubscription = async function () { return current; };
  })();`;
}

Deno.test("the Settings card subscribes this device, sets its kinds, and the service worker shows a push", async () => {
  await using service = new PushService();
  await using relay = await startTestRelay({ pushAllowedOrigins: [service.origin] });
  const user = await signUp(relay.url, { name: "Ada" });
  const browser = await launchBrowser();
  try {
    for (const [name, viewport] of [["desktop", undefined], ["phone", PHONE]] as const) {
      const sub = await service.subscribe();
      const { page, errors } = await newPage(browser, viewport ? { viewport } : {});
      await page.context().grantPermissions(["notifications"], { origin: relay.url });
      await page.addInitScript(fakePushManager(sub));
      await page.goto(`${relay.url}/settings`);
      await signInUi(page, user);
      const card = page.locator("section", {
        has: page.getByRole("heading", { name: "Notifications" }),
      });
      await card.getByRole("button", { name: "Notify this device" }).click();
      await card.getByRole("checkbox", { name: "An agent finished its task" }).waitFor();
      const mine = async () => {
        const res = await fetch(`${relay.url}/api/push/subscriptions`, {
          headers: { cookie: user.cookie },
        });
        const list = ((await res.json()) as PushSubscriptionsResponse).subscriptions;
        return list.find((s) => s.endpoint === sub.endpoint);
      };
      assert.equal((await mine())?.enabledEvents, "*");

      // Unticking a kind and ticking child suppression reach the relay.
      // Saved at the relay, then shown: a click, not uncheck() (which wants it at once).
      await card.getByRole("checkbox", { name: "An agent finished its task" }).click();
      await eventually(
        "kinds saved",
        async () => (await mine())?.enabledEvents === "agent_error" ? true : undefined,
      );
      await card.getByRole("checkbox", { name: /Skip subagents/ }).click();
      await eventually(
        "child suppression saved",
        async () => (await mine())?.suppressChildNotifications ? true : undefined,
      );
      const skip = card.getByRole("checkbox", { name: /Skip subagents/ });
      await eventually("the box shows it", async () => (await skip.isChecked()) || undefined);
      await card.scrollIntoViewIfNeeded();
      await shot(page, `settings-notifications-${name}`);

      if (name === "desktop") {
        // The service worker shows a push as a notification tagged by session.
        await page.evaluate("navigator.serviceWorker.ready");
        const cdp = await page.context().newCDPSession(page);
        await cdp.send("ServiceWorker.enable");
        const registrationId = await new Promise<string>((resolve) => {
          cdp.on("ServiceWorker.workerRegistrationUpdated", (ev) => {
            const r = (ev.registrations as { registrationId: string; isDeleted: boolean }[])
              .find((x) => !x.isDeleted);
            if (r) resolve(r.registrationId);
          });
        });
        await cdp.send("ServiceWorker.deliverPushMessage", {
          origin: relay.url,
          registrationId,
          data: JSON.stringify({
            kind: "agent_finished",
            sessionId: "abc",
            title: "baton: fix the tests",
            body: 'agent in "fix the tests" finished its task',
            url: "/session/abc",
            tag: "session-abc",
            ts: Date.now(),
          }),
        });
        const shown = await eventually("the notification", async () => {
          const list = await page.evaluate(`navigator.serviceWorker.ready
            .then((r) => r.getNotifications())
            .then((ns) => ns.map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data })))`) as {
            title: string;
            body: string;
            tag: string;
            data: { url: string };
          }[];
          return list.length > 0 ? list : undefined;
        }, 10_000);
        assert.deepEqual(shown, [{
          title: "baton: fix the tests",
          body: 'agent in "fix the tests" finished its task',
          tag: "session-abc",
          data: { url: "/session/abc", kind: "agent_finished", sessionId: "abc" },
        }]);
      }

      // Stopping removes it at the relay.
      await card.getByRole("button", { name: "Stop notifications on this device" }).click();
      await card.getByRole("button", { name: "Notify this device" }).waitFor();
      assert.equal(await mine(), undefined);
      assert.deepEqual(errors, []);
      await page.context().close();
    }
  } finally {
    await browser.close();
  }
});

Deno.test("the web client tells the relay while a session is open on a visible page (no push then)", async () => {
  await using service = new PushService();
  await using relay = await startTestRelay({ pushAllowedOrigins: [service.origin] });
  const user = await signUp(relay.url);
  const fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
  const browser = await launchBrowser();
  try {
    const id = await spawnSession(user, fake.runnerId);
    const fanout = relay.relay.hub.fanout;
    const { page } = await newPage(browser);
    await page.goto(`${relay.url}/session/${id}`);
    await signInUi(page, user);
    await eventually(
      "the relay sees the session on screen",
      () => fanout.onScreen(id) || undefined,
    );
    // Another page of the app: the session is no longer on screen.
    await page.goto(`${relay.url}/settings`);
    await eventually("off screen after leaving", () => !fanout.onScreen(id) || undefined);
    await page.goto(`${relay.url}/session/${id}`);
    await eventually("on screen again", () => fanout.onScreen(id) || undefined);
    // A hidden page (a background tab, a locked phone) is not looking.
    await page.evaluate(
      `Object.defineProperty(document, "visibilityState", { value: "hidden", configurable: true });
      document.dispatchEvent(new Event("visibilitychange"))`,
    );
    await eventually("off screen once hidden", () => !fanout.onScreen(id) || undefined);
  } finally {
    await browser.close();
    await fake.close();
  }
});
