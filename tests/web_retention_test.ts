/**
 * Pinning and deleting sessions in the web client (issue 17), in a real
 * Chromium against a real relay, a real runner and the scripted model: the
 * pin from the header reaches the sidebar, a delete asks first, a running
 * session is ended and deleted, and every tab follows, on a desktop and a
 * phone.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep a screenshot of each state, light and
 * dark, to look at.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import type { SessionResponse } from "../shared/api.ts";
import { json, Viewer } from "./harness/client.ts";
import { axeViolations, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { type Stack, withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";

/** Starts a session and waits for its first answer. */
async function spawn(s: Stack, viewer: Viewer, prompt: string): Promise<string> {
  const res = await s.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: s.runnerId, cwd: s.home, model: MODEL, prompt }),
  );
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  viewer.subscribe(body.sessionId);
  await viewer.waitForEvent(body.sessionId, "agent_end");
  return body.sessionId;
}

/** The sidebar's session groups as shown: heading, then the titles under it. */
function sidebarGroups(page: Page): Promise<[string, string[]][]> {
  return page.evaluate(`[...document.querySelectorAll(".side-sessions .side-group")].map((g) => [
    g.querySelector(".side-heading").textContent.trim(),
    [...g.querySelectorAll(".session-title")].map((t) => t.textContent),
  ])`) as Promise<[string, string[]][]>;
}

async function until<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 15_000;
  while (true) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

Deno.test("a session is pinned from its header and deleted after a question; every tab follows, on a desktop and a phone", async (t) => {
  await withStack({ name: "Ada" }, async (s) => {
    const browser = await launchBrowser();
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      const keep = await spawn(s, viewer, "Keep this one");
      const doomed = await spawn(s, viewer, "Delete this one");
      const phoneDoomed = await spawn(s, viewer, "Delete from the phone");

      const { page, errors } = await newPage(browser, { audit: true });
      await page.goto(`${s.relay.url}/session/${keep}`);
      await signInUi(page, s.user);
      const other = await newPage(browser);
      await other.page.goto(`${s.relay.url}/session/${doomed}`);
      await signInUi(other.page, s.user);

      await t.step(
        "the pin in the header pins it, and the sidebar shows it under Pinned",
        async () => {
          await page.locator(".session-head h1", { hasText: "Keep this one" }).waitFor();
          await page.locator(".session-head").getByRole("button", { name: "Pin session" }).click();
          await page.locator(".session-head").getByRole("button", { name: "Unpin session" })
            .waitFor();
          await until("the pinned group", async () => {
            const g = await sidebarGroups(page);
            return g[0]?.[0] === "Pinned" && g[0][1].join() === "Keep this one" ? g : undefined;
          });
          const res = await s.user.api(`/api/sessions/${keep}`);
          assert.equal(((await res.json()) as SessionResponse).session.isPinned, true);
        },
      );

      await t.step("Delete asks first; Keep leaves it as it was", async () => {
        await page.goto(`${s.relay.url}/session/${doomed}`);
        await page.locator(".session-head h1", { hasText: "Delete this one" }).waitFor();
        await page.getByRole("button", { name: "Delete session" }).click();
        const question = page.getByRole("group", { name: "Delete session" });
        await question.getByText("End and delete?").waitFor();
        await shot(page, "session-delete-confirm-desktop");
        assert.deepEqual(await axeViolations(page), []);
        await question.getByRole("button", { name: "Keep" }).click();
        await question.waitFor({ state: "detached" });
        const res = await s.user.api(`/api/sessions/${doomed}`);
        assert.equal(res.status, 200, "nothing was deleted");
        await res.body?.cancel();
      });

      await t.step(
        "Delete deletes the running session, its runner stops it, and every tab follows",
        async () => {
          await page.getByRole("button", { name: "Delete session" }).click();
          await page.getByRole("group", { name: "Delete session" })
            .getByRole("button", { name: "Delete" }).click();
          // This tab goes home; the other, which had it open, says it was deleted.
          await page.waitForURL(`${s.relay.url}/`);
          await other.page.getByRole("heading", { name: "Session deleted" }).waitFor();
          await shot(other.page, "session-deleted-desktop");
          for (const p of [page, other.page]) {
            await until("the sidebar to drop it", async () => {
              const titles = (await sidebarGroups(p)).flatMap(([, list]) => list);
              return titles.includes("Delete this one") ? undefined : titles;
            });
          }
          await viewer.waitFor((m) => m.t === "session_deleted" && m.sessionId === doomed);
          await s.runner.proc.waitFor(new RegExp(`session ${doomed} was deleted on the relay`));
          const res = await s.user.api(`/api/sessions/${doomed}`);
          assert.equal(res.status, 404);
          await res.body?.cancel();
        },
      );

      await t.step("on a phone the question fits the header, and Delete goes home", async () => {
        const phone = await newPage(browser, { viewport: PHONE, audit: true });
        const p = phone.page;
        await p.goto(`${s.relay.url}/session/${phoneDoomed}`);
        await signInUi(p, s.user);
        await p.locator(".topbar-title", { hasText: "Delete from the phone" }).waitFor();
        await p.getByRole("button", { name: "Delete session" }).click();
        const question = p.getByRole("group", { name: "Delete session" });
        await question.getByText("End and delete?").waitFor();
        const box = await question.boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= PHONE.width, "on screen");
        assert.equal(
          await p.evaluate("document.documentElement.scrollWidth > innerWidth + 1"),
          false,
          "the page does not scroll sideways",
        );
        await shot(p, "session-delete-confirm-phone");
        assert.deepEqual(await axeViolations(p), []);
        await question.getByRole("button", { name: "Delete" }).click();
        await p.waitForURL(`${s.relay.url}/`);
        const res = await s.user.api(`/api/sessions/${phoneDoomed}`);
        assert.equal(res.status, 404);
        await res.body?.cancel();
        assert.deepEqual(phone.errors, []);
      });
      assert.deepEqual(errors, []);
      assert.deepEqual(other.errors, []);
    } finally {
      await viewer.close();
      await browser.close();
    }
  });
});
