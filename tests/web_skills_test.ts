/**
 * The runner settings page in a real Chromium, against a real relay and
 * runner: from Settings → Runners to a runner's skills, a skill written in
 * the Markdown editor (with its preview) lands in the runner's
 * `~/.baton/skills`, is changed and deleted after a confirmation; agents and
 * plugins are shown. On a desktop and a phone.
 *
 * With BATON_UPDATE_SCREENSHOTS=1 it also writes docs/screenshots/runner-*.png.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { DESKTOP, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { withStack } from "./harness/in_process.ts";
import { ROOT } from "./harness/procs.ts";
import { json } from "./harness/client.ts";

const UPDATE = Deno.env.get("BATON_UPDATE_SCREENSHOTS") === "1";

async function keep(page: Page, name: string): Promise<void> {
  await shot(page, name);
  if (!UPDATE) return;
  await page.screenshot({ path: join(ROOT, "docs", "screenshots", `${name}.png`) });
}

const SKILL_BODY = `---
name: release-notes
description: Writes release notes from the git log. Use when asked for a changelog.
---

# Release notes

1. Read \`git log\` since the last tag.
2. Group the commits as **Features**, **Fixes** and **Other**.
`;

async function fileText(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

Deno.test("runner settings: a skill is written, previewed, saved, changed and deleted from the browser", async (t) => {
  await withStack({ name: "Ada" }, async (s) => {
    const ext = join(s.home, ".baton", "extensions", "marker");
    await Deno.mkdir(ext, { recursive: true });
    await Deno.writeTextFile(join(ext, "index.ts"), "export default function () {}\n");
    await s.user.api(
      `/api/runners/${s.runnerId}/agents`,
      json("POST", {
        name: "reviewer",
        content: "---\nname: reviewer\ndescription: Reviews a diff for bugs\n---\n\nReview.\n",
      }),
    );
    const browser = await launchBrowser();
    try {
      const file = join(s.home, ".baton", "skills", "release-notes", "SKILL.md");
      await t.step("desktop: create with the editor and its live preview", async () => {
        const { page, errors } = await newPage(browser, { viewport: DESKTOP });
        await page.goto(`${s.relay.url}/settings`);
        await signInUi(page, s.user);
        await page.getByRole("link", { name: "Skills & agents" }).click();
        await page.waitForURL(/\/settings\/runners\//);
        await page.getByText("No skills yet").waitFor();
        await page.getByRole("button", { name: "New skill" }).click();
        await page.getByLabel("Name").fill("release-notes");
        await page.getByLabel("skill Markdown").fill(SKILL_BODY);
        await page.locator(".doc-preview h1", { hasText: "Release notes" }).waitFor();
        assert.equal(await page.locator(".doc-preview strong", { hasText: "Features" }).count(), 1);
        await keep(page, "runner-skill-editor-desktop");
        await page.getByRole("button", { name: "Create" }).click();
        await page.getByRole("button", { name: /release-notes/ }).waitFor();
        assert.equal(await fileText(file), SKILL_BODY);

        await page.getByLabel("skill Markdown").fill(SKILL_BODY + "\n3. Link each pull request.\n");
        await page.getByRole("button", { name: "Save" }).click();
        await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
        assert.match((await fileText(file))!, /Link each pull request/);

        await page.getByRole("tab", { name: "Agents" }).click();
        await page.getByRole("button", { name: /reviewer/ }).waitFor();
        await page.getByText("Reviews a diff for bugs").waitFor();
        await page.getByRole("tab", { name: "Plugins" }).click();
        await page.locator(".history strong", { hasText: "marker" }).waitFor();
        await keep(page, "runner-plugins-desktop");
        assert.deepEqual(errors, []);
        await page.context().close();
      });

      await t.step(
        "phone: the list, then the editor with Edit and Preview, delete after confirming",
        async () => {
          const { page, errors } = await newPage(browser, { viewport: PHONE });
          await page.goto(`${s.relay.url}/settings/runners/${s.runnerId}`);
          await signInUi(page, s.user);
          await page.getByRole("button", { name: /release-notes/ }).click();
          await page.getByLabel("skill Markdown").waitFor();
          assert.equal(await page.locator(".doc-preview").isVisible(), false);
          await keep(page, "runner-skill-edit-phone");
          await page.getByRole("tab", { name: "Preview" }).click();
          await page.locator(".doc-preview h1", { hasText: "Release notes" }).waitFor();
          assert.equal(await page.getByLabel("skill Markdown").isVisible(), false);
          await keep(page, "runner-skill-preview-phone");

          await page.getByRole("button", { name: "Delete" }).click();
          const confirm = page.getByRole("group", { name: "Confirm delete" });
          await confirm.waitFor();
          assert.ok(await fileText(file), "nothing is deleted before the confirmation");
          await keep(page, "runner-skill-delete-phone");
          await confirm.getByRole("button", { name: "Delete" }).click();
          await page.getByText("No skills yet").waitFor();
          assert.equal(await fileText(file), null);
          await page.getByRole("tab", { name: "Plugins" }).click();
          await page.locator(".history strong", { hasText: "marker" }).waitFor();
          await keep(page, "runner-plugins-phone");
          assert.deepEqual(errors, []);
          await page.context().close();
        },
      );
    } finally {
      await browser.close();
    }
  });
});
