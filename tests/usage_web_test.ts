/**
 * The Usage page in a real Chromium against a real relay and runner: the
 * totals, the cost per day chart and the top sessions and models shown are
 * the numbers of the pi session files on the runner, on a desktop and a
 * phone, reachable from the sidebar and the Runners card.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep a screenshot of each state, light and
 * dark, to look at.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { axeViolations, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { withStack } from "./harness/in_process.ts";

const DAY = 86_400_000;

/** A pi session file with one assistant message per `[daysAgo, cost]`. */
function piFile(id: string, cwd: string, model: string, turns: [number, number][]): string {
  const now = Date.now();
  const first = now - turns[0]![0] * DAY;
  let text = JSON.stringify({
    type: "session",
    version: 3,
    id,
    timestamp: new Date(first).toISOString(),
    cwd,
  }) + "\n";
  for (const [ago, cost] of turns) {
    const at = now - ago * DAY;
    text += JSON.stringify({
      type: "message",
      id: crypto.randomUUID().slice(0, 8),
      parentId: null,
      timestamp: new Date(at).toISOString(),
      message: {
        role: "assistant",
        content: [{ type: "text", text: "ok" }],
        provider: "anthropic",
        model,
        usage: {
          input: Math.round(cost * 200_000),
          output: Math.round(cost * 20_000),
          cacheRead: 0,
          cacheWrite: 0,
          totalTokens: Math.round(cost * 220_000),
          cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: cost },
        },
        stopReason: "stop",
        timestamp: at,
      },
    }) + "\n";
  }
  return text;
}

Deno.test("the usage page shows a runner's totals, cost per day, models and sessions, on a desktop and a phone", async () => {
  await withStack({ name: "Ada" }, async (s) => {
    const dir = join(s.home, ".baton", "sessions", "--src-app--");
    await Deno.mkdir(dir, { recursive: true });
    const files: [string, string, string, [number, number][]][] = [
      ["a", "/src/app", "claude-sonnet-4-5", [[20, 1.5], [19, 0.75], [3, 2]]],
      ["b", "/src/site", "claude-sonnet-4-5", [[12, 0.5], [2, 1.25]]],
      ["c", "/src/parser", "gpt-4o", [[6, 0.25], [1, 0.5], [0, 0.25]]],
      ["d", "/src/old", "gpt-4o", [[45, 3]]],
    ];
    for (const [id, cwd, model, turns] of files) {
      await Deno.writeTextFile(join(dir, `2026_${id}.jsonl`), piFile(id, cwd, model, turns));
    }
    // 30 days by hand: 1.5 + 0.75 + 2 + 0.5 + 1.25 + 0.25 + 0.5 + 0.25 = 7; 7 days: 4.25.
    const browser = await launchBrowser();
    try {
      const { page, errors } = await newPage(browser, { audit: true });
      await page.goto(s.relay.url);
      await signInUi(page, s.user);
      await page.getByRole("link", { name: "Usage" }).click();
      await page.waitForURL(`**/runners/${s.runnerId}/usage`);
      const stat = (label: string) =>
        page.locator(".usage-stat", { hasText: label }).locator(".usage-stat-value").textContent();
      await page.waitForSelector(".chart svg");
      assert.equal(await stat("Cost"), "$7.00");
      assert.equal(await stat("Sessions"), "3");
      assert.equal(await page.locator(".chart .bar").count(), 30, "one bar per day of 30");
      const models = await page.locator("[aria-labelledby=usage-models-title] .usage-name")
        .allTextContents();
      assert.deepEqual(models, ["claude-sonnet-4-5", "gpt-4o"]);
      const top = await page.locator("[aria-labelledby=usage-sessions-title] li strong")
        .allTextContents();
      assert.deepEqual(top, ["$4.25", "$1.75", "$1.00"]);
      assert.deepEqual(await axeViolations(page), []);
      await shot(page, "usage-desktop");

      await page.getByRole("radio", { name: "7 days" }).click();
      // The bars and the totals may land in different frames: wait for both.
      await page.waitForFunction(`document.querySelectorAll(".chart .bar").length === 7`);
      await page.waitForFunction(
        `document.querySelector(".usage-stat-value")?.textContent === "$4.25"`,
      );
      assert.equal(await stat("Cost"), "$4.25");
      await page.getByRole("radio", { name: "All" }).click();
      await page.waitForFunction(
        `document.querySelector(".usage-stat-value")?.textContent === "$10.00"`,
      );

      // From the Runners card in Settings too.
      await page.goto(`${s.relay.url}/settings`);
      await page.getByRole("link", { name: "Usage" }).last().click();
      await page.waitForURL(`**/runners/${s.runnerId}/usage`);
      await page.waitForSelector(".chart svg");

      const phone = await newPage(browser, { viewport: PHONE, audit: true });
      await phone.page.goto(`${s.relay.url}/runners/${s.runnerId}/usage`);
      await signInUi(phone.page, s.user);
      await phone.page.waitForSelector(".chart svg");
      const overflow = await phone.page.evaluate(`
        document.documentElement.scrollWidth > document.documentElement.clientWidth ||
        [...document.querySelectorAll(".page")].some((p) => p.scrollWidth > p.clientWidth)
      `);
      assert.equal(overflow, false, "the page scrolls sideways on a phone");
      const width = await phone.page.evaluate(
        `document.querySelector(".chart svg").getBoundingClientRect().width`,
      ) as number;
      assert.ok(width <= PHONE.width, `chart ${width}px wide on a ${PHONE.width}px phone`);
      assert.deepEqual(await axeViolations(phone.page), []);
      await shot(phone.page, "usage-phone");
      assert.deepEqual([...errors, ...phone.errors], []);
    } finally {
      await browser.close();
    }
  });
});
