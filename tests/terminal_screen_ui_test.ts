/**
 * The terminal panel beyond a prompt, in a real Chromium over a real relay,
 * runner and PTY: a full-screen program (vi) draws on the alternate screen
 * and leaving it brings the shell's screen back; copy and paste go through
 * the clipboard; on a phone the key bar sends the exact bytes of its keys.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Locator, Page } from "playwright-core";
import { json } from "./harness/client.ts";
import { DESKTOP, launchBrowser, newPage, PHONE, signInUi } from "./harness/browser.ts";
import { type Stack, withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";

async function openPanel(
  w: Stack,
  viewport: typeof DESKTOP,
  browser: Awaited<ReturnType<typeof launchBrowser>>,
) {
  const project = join(w.home, "proj");
  await Deno.mkdir(project, { recursive: true });
  await Deno.writeTextFile(join(project, "notes.txt"), "first line of the notes\nsecond line\n");
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: w.runnerId, cwd: project, model: MODEL, prompt: "" }),
  );
  assert.equal(res.status, 200);
  const { sessionId } = await res.json();
  const { page, errors } = await newPage(browser, { viewport });
  await page.context().grantPermissions(["clipboard-read", "clipboard-write"], {
    origin: w.relay.url,
  });
  await page.goto(`${w.relay.url}/session/${sessionId}`);
  await signInUi(page, w.user);
  await page.goto(`${w.relay.url}/session/${sessionId}`);
  if (viewport === PHONE) await page.getByRole("button", { name: "More actions" }).click();
  await page.getByRole("button", { name: "Terminal", exact: true }).click();
  const panel = page.getByRole("complementary", { name: "Terminal" });
  await panel.locator(".xterm-rows").waitFor();
  await waitForText(page, "proj");
  await panel.locator(".xterm").click();
  return { page, errors, panel };
}

Deno.test("a full-screen program draws in the terminal panel, and copy and paste use the clipboard", async () => {
  await withStack({ runnerEnv: { SHELL: "/bin/bash", TERM: "xterm-256color" } }, async (w) => {
    const browser = await launchBrowser();
    try {
      const { page, errors } = await openPanel(w, DESKTOP, browser);
      await page.keyboard.type("echo before-vi\n");
      await waitForText(page, "before-vi", 2);

      // vi switches to the alternate screen: the file fills it, the shell's lines are gone.
      await page.keyboard.type("vi -u NONE notes.txt\n");
      await waitForText(page, "first line of the notes");
      await waitForText(page, '"notes.txt"');
      const inVi = await screen(page);
      assert.doesNotMatch(inVi, /before-vi/, "the shell's screen is not shown under vi");
      assert.match(inVi, /^second line$/m);
      // Editing works through the panel: a new line at the top, then written out.
      await page.keyboard.type("ggOadded in vi");
      await page.keyboard.press("Escape");
      await page.keyboard.type(":wq\n");
      // Back on the normal screen: what was there before vi is there again.
      await waitForText(page, "before-vi", 2);
      assert.equal(
        await Deno.readTextFile(join(w.home, "proj", "notes.txt")),
        "added in vi\nfirst line of the notes\nsecond line\n",
      );

      // Copy: select a word (double-click) and Ctrl+Shift+C; Ctrl+C alone stays the interrupt.
      await page.keyboard.type("echo copyme-7\n");
      await waitForText(page, "copyme-7", 2);
      const row = page.locator(".term-view:not([hidden]) .xterm-rows > div").filter({
        hasText: /^copyme-7\s*$/,
      });
      // xterm's screen layer takes the mouse above the rows: click where the word is drawn.
      const box = (await row.boundingBox())!;
      await page.mouse.dblclick(box.x + 12, box.y + box.height / 2);
      await page.keyboard.press("Control+Shift+C");
      assert.equal(await clipboard(page), "copyme-7");

      // Paste: what the clipboard holds goes to the shell (Ctrl+Shift+V).
      await setClipboard(page, "echo pasted-$((40+2))");
      await page.locator(".term-view:not([hidden]) .xterm").click();
      await page.keyboard.press("Control+Shift+V");
      await page.keyboard.press("Enter");
      await waitForText(page, "pasted-42");
      assert.deepEqual(errors, []);
      await page.context().close();
    } finally {
      await browser.close();
    }
  });
});

Deno.test("on a phone the terminal's key bar sends Esc, Tab and the arrows as their bytes, and pastes", async () => {
  await withStack({ runnerEnv: { SHELL: "/bin/bash" } }, async (w) => {
    const browser = await launchBrowser();
    try {
      const { page, errors, panel } = await openPanel(w, PHONE, browser);
      const keys = panel.getByRole("toolbar", { name: "Terminal keys" });
      // cat -vT prints each byte it reads visibly: ^[ for Esc, ^I for Tab.
      await page.keyboard.type("cat -vT\n");
      await new Promise((r) => setTimeout(r, 300));
      for (const k of ["Escape", "Tab", "Left", "Up", "Down", "Right"]) await press(keys, k);
      await page.keyboard.press("Enter");
      await waitForText(page, "^[^I^[[D^[[A^[[B^[[C");
      // Ctrl from the bar, then d: end of input, cat exits.
      await press(keys, "Ctrl");
      await page.keyboard.type("d");
      await page.keyboard.type("echo cat-$((1+1))-done\n");
      await waitForText(page, "cat-2-done");

      await setClipboard(page, "echo from-the-bar");
      await press(keys, "Paste");
      // Paste reads the clipboard first: Enter before the text shows would run an empty line.
      await waitForText(page, "echo from-the-bar");
      await page.keyboard.press("Enter");
      await waitForText(page, "from-the-bar", 2);
      assert.deepEqual(errors, []);
      await page.context().close();
    } finally {
      await browser.close();
    }
  });
});

async function press(keys: Locator, name: string): Promise<void> {
  await keys.getByRole("button", { name, exact: true }).click();
}

/** The page's clipboard (a page's `navigator`; Deno's types have no clipboard). */
type Clip = { clipboard: { readText(): Promise<string>; writeText(t: string): Promise<void> } };

function clipboard(page: Page): Promise<string> {
  return page.evaluate(() => (navigator as unknown as Clip).clipboard.readText());
}

async function setClipboard(page: Page, text: string): Promise<void> {
  await page.evaluate((t) => (navigator as unknown as Clip).clipboard.writeText(t), text);
}

async function screen(page: Page): Promise<string> {
  const rows = page.locator(".term-view:not([hidden]) .xterm-rows");
  return (await rows.innerText()).replace(/\u00a0/g, " ").replace(/ +$/gm, "");
}

/** Waits until the shown terminal's rows hold `text` at least `times` times. */
async function waitForText(page: Page, text: string, times = 1): Promise<void> {
  const deadline = Date.now() + 15_000;
  let shown = "";
  while (Date.now() < deadline) {
    shown = await screen(page);
    const count = (t: string) => ("\n" + t).split(text).length - 1;
    if (Math.max(count(shown), count(shown.replace(/\n/g, ""))) >= times) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`terminal never showed ${JSON.stringify(text)} ${times} times:\n${shown}`);
}
