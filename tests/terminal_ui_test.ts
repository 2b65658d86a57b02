/**
 * The terminal panel of a session in a real Chromium, on a desktop and a
 * phone, over a real relay and runner with a real PTY: a shell opens in the
 * session's folder, what is typed runs there and its output shows, and a
 * phone gets a key bar (Esc, Tab, Ctrl, arrows) that sends those keys.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep a screenshot of each state, light
 * and dark (docs/screenshots/terminal-*.png come from it).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { json } from "./harness/client.ts";
import {
  axeViolations,
  DESKTOP,
  launchBrowser,
  newPage,
  PHONE,
  shot,
  signInUi,
} from "./harness/browser.ts";
import { withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";

Deno.test("a session's terminal panel opens a shell in its folder, runs what is typed and has a key bar on a phone", async () => {
  await withStack({ name: "Ada", runnerEnv: { SHELL: "/bin/bash" } }, async (w) => {
    const project = join(w.home, "src", "webapp");
    await Deno.mkdir(project, { recursive: true });
    const res = await w.user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: w.runnerId, cwd: project, model: MODEL, prompt: "" }),
    );
    const { sessionId } = await res.json();
    assert.equal(res.status, 200);

    const browser = await launchBrowser();
    try {
      for (const [device, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
        const { page, errors } = await newPage(browser, { viewport, audit: device === "desktop" });
        await page.goto(`${w.relay.url}/session/${sessionId}`);
        await signInUi(page, w.user);
        await page.goto(`${w.relay.url}/session/${sessionId}`);

        // On a phone the header has Terminal under "More actions", beside Files and Changes.
        if (device === "phone") await page.getByRole("button", { name: "More actions" }).click();
        const button = page.getByRole("button", { name: "Terminal", exact: true });
        await button.waitFor();
        // xterm.js is its own file, fetched only once a terminal shows.
        assert.equal(await page.locator('script[src="/assets/xterm.js"]').count(), 0);
        await button.click();
        const panel = page.getByRole("complementary", { name: "Terminal" });
        await panel.locator(".xterm-rows").waitFor();
        await waitForText(page, "webapp"); // the shell's prompt names its folder

        // Typed into the terminal as a person would: it runs in the session's folder.
        await panel.locator(".xterm").click();
        await page.keyboard.type(`echo hi-from-ui-${device}; pwd\n`);
        await waitForText(page, `hi-from-ui-${device}`, 2); // typed, then printed
        await waitForText(page, project);

        // Fitted to the panel: the runner's PTY got the size the panel holds (not the 80×24 it opened at).
        const size = await panel.locator(".xterm-rows").evaluate((el) => el.children.length);
        const listed = await (await w.user.api(`/api/runners/${w.runnerId}/terminals`)).json();
        assert.equal(listed.terminals[0].rows, size);
        assert.notEqual(listed.terminals[0].cols, 80);

        // xterm's own styles apply under the app's CSP (the phone's page keeps it): monospace rows.
        assert.match(
          await panel.locator(".xterm-rows").evaluate((el) => {
            type Css = { getComputedStyle(e: unknown): { fontFamily: string } };
            return (globalThis as unknown as Css).getComputedStyle(el).fontFamily;
          }),
          /monospace/,
        );

        const keys = panel.getByRole("toolbar", { name: "Terminal keys" });
        if (device === "phone") {
          for (const k of ["Escape", "Tab", "Ctrl", "Left", "Up", "Down", "Right"]) {
            assert.ok(await keys.getByRole("button", { name: k }).isVisible(), k);
          }
          // Up brings back the last command; Ctrl then "c" cancels it, as a key bar should.
          await keys.getByRole("button", { name: "Up" }).click();
          await waitForText(page, `hi-from-ui-${device}`, 3);
          await keys.getByRole("button", { name: "Ctrl" }).click();
          await page.keyboard.type("c");
          await waitForText(page, "^C");
        } else {
          assert.equal(await keys.isVisible(), false, "no key bar on a desktop");
          assert.deepEqual(await axeViolations(page), [], "no accessibility violations");
        }
        await shot(page, `terminal-${device}`);

        // A second tab, then ending it leaves the first.
        await panel.getByRole("button", { name: "New terminal" }).click();
        await panel.getByRole("button", { name: "Shell 2", exact: true }).waitFor();
        await panel.getByRole("button", { name: "End shell 2" }).click();
        await panel.getByRole("button", { name: "Shell 2", exact: true }).waitFor({
          state: "detached",
        });
        assert.deepEqual(errors, []);
        await page.context().close();
      }
      // The desktop's shell was kept and the phone re-attached to it: one per folder still.
      const list = await (await w.user.api(`/api/runners/${w.runnerId}/terminals`)).json();
      assert.equal(list.terminals.length, 1);
      assert.equal(list.terminals[0].cwd, project);
    } finally {
      await browser.close();
    }
  });
});

/**
 * Waits until the shown terminal's rows hold `text` at least `times` times
 * (a line the terminal wrapped counts as one). Polled from here: the app's
 * CSP forbids evaluating a string in the page.
 */
async function waitForText(page: Page, text: string, times = 1): Promise<void> {
  const rows = page.locator(".term-view:not([hidden]) .xterm-rows");
  const deadline = Date.now() + 15_000;
  let shown = "";
  while (Date.now() < deadline) {
    shown = (await rows.innerText()).replace(/\u00a0/g, " ");
    const count = (t: string) => ("\n" + t).split(text).length - 1;
    if (Math.max(count(shown), count(shown.replace(/\n/g, ""))) >= times) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`terminal never showed ${JSON.stringify(text)} ${times} times:\n${shown}`);
}
