/**
 * The Changes panel and the review loop in a real Chromium, against a real
 * relay, a real runner, a real repository and the scripted model: the list
 * is live, a file is staged and committed, its diff is side by side on a
 * desktop and unified on a phone, and comments on diff lines reach the
 * model as one review message.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep screenshots (light and dark).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { json } from "./harness/client.ts";
import { axeViolations, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { git, makeRepo } from "./harness/git_repo.ts";
import { withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";

Deno.test("the Changes panel: live list, stage, diff side by side and unified, review to the agent, commit", async () => {
  await withStack({}, async (s) => {
    const { repo } = await makeRepo(s.home);
    await Deno.writeTextFile(
      join(repo, "a.txt"),
      "one\ntwo, now longer\nthree\nfour\n",
    );
    await git(repo, "mv", "b.txt", "c.txt");
    await Deno.writeTextFile(
      join(repo, "parse.ts"),
      'export function lines(text: string): string[] {\n  return text.split("\\n");\n}\n',
    );
    s.llm.enqueue({ text: "I changed the parser." });
    const res = await s.user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: s.runnerId, cwd: repo, model: MODEL, prompt: "Fix the parser" }),
    );
    const { sessionId } = await res.json();
    await s.llm.waitForRequests(1);
    const browser = await launchBrowser();
    try {
      const { page, errors } = await newPage(browser, { audit: true });
      await page.goto(`${s.relay.url}/session/${sessionId}`);
      await signInUi(page, s.user);
      await page.getByText("I changed the parser.").waitFor();
      await page.getByRole("button", { name: "Changes" }).click();
      const panel = page.getByRole("complementary", { name: "Changes" });
      const changes = panel.getByRole("region", { name: "Changes" });
      await changes.getByText("parse.ts").waitFor();
      const a = changes.locator("li", { hasText: "a.txt" });
      assert.equal(await a.locator(".plus").textContent(), "+2");
      assert.equal(await a.locator(".minus").textContent(), "−1");
      const staged = panel.getByRole("region", { name: "Staged" });
      assert.match(await staged.textContent() ?? "", /c\.txt/);

      // The list is live: a file written now shows up without a reload.
      await Deno.writeTextFile(join(repo, "notes.md"), "# Notes\n");
      await changes.getByText("notes.md").waitFor({ timeout: 15_000 });
      await shot(page, "git-changes-desktop");
      assert.deepEqual(await axeViolations(page), []);

      await panel.getByRole("button", { name: "Stage a.txt" }).click();
      await staged.getByText("a.txt").waitFor();

      // Side by side on a wide screen, coloured, with a comment on a line.
      await panel.getByRole("button", { name: "parse.ts", exact: true }).click();
      await panel.locator(".diff.split").waitFor();
      assert.ok(await panel.locator(".diff .hljs-keyword").count() > 0, "no syntax colours");
      await panel.locator(".diff .line.add", { hasText: "return text.split" }).first().click();
      await panel.getByPlaceholder(/Comment on line 2/).fill("Handle a missing last newline");
      await panel.getByRole("button", { name: "Add comment" }).click();
      await panel.getByText("1 comment").waitFor();
      await shot(page, "git-review-desktop");
      assert.deepEqual(await axeViolations(page), []);

      const before = s.llm.requests.length;
      s.llm.enqueue({ text: "Done." });
      await panel.getByRole("button", { name: "Send review" }).click();
      await s.llm.waitForRequests(before + 1);
      const users = s.llm.requests[before]!.messages.filter((m) => m.role === "user");
      const last = JSON.stringify(users[users.length - 1]!.content);
      assert.match(last, /# Code review: 1 comment/);
      assert.match(last, /parse\.ts:line 2/);
      assert.match(last, /Handle a missing last newline/);
      await panel.getByText("1 comment").waitFor({ state: "detached" });

      // A changed line pairs with the line it replaced.
      await panel.getByRole("button", { name: "All changes" }).click();
      await staged.getByRole("button", { name: "a.txt", exact: true }).click();
      const row = panel.locator(".diff.split .row", { hasText: "two, now longer" });
      assert.equal(await row.locator(".line.del").textContent(), "2two");
      await shot(page, "git-diff-desktop");

      // Commit what is staged.
      await panel.getByRole("button", { name: "All changes" }).click();
      await panel.getByPlaceholder("Commit message").fill("Rename b, longer a");
      await panel.getByRole("button", { name: "Commit" }).click();
      await staged.waitFor({ state: "detached" });
      assert.equal((await git(repo, "log", "-1", "--format=%s")).trim(), "Rename b, longer a");
      assert.deepEqual(errors, []);

      // A phone gets the unified diff, full screen.
      const phone = await newPage(browser, { viewport: PHONE });
      await phone.page.goto(`${s.relay.url}/session/${sessionId}`);
      await signInUi(phone.page, s.user);
      // The header keeps every action on screen: Changes waits under "More actions" on a phone.
      const endButton = phone.page.locator(".session-head").getByRole("button", { name: /^End/ });
      await endButton.waitFor();
      const end = await endButton.boundingBox();
      assert.ok(end && end.x + end.width <= PHONE.width, "End is pushed off the screen");
      // Changes is under "More actions" on a phone, where a user finds it.
      await phone.page.getByRole("button", { name: "More actions" }).click();
      await phone.page.getByRole("button", { name: "Changes" }).click();
      const p2 = phone.page.getByRole("complementary", { name: "Changes" });
      await shot(phone.page, "git-changes-phone");
      await p2.getByRole("button", { name: "parse.ts", exact: true }).click();
      await p2.locator(".diff.unified").waitFor();
      await shot(phone.page, "git-diff-phone");
      assert.deepEqual(phone.errors, []);
    } finally {
      await browser.close();
    }
  });
});
