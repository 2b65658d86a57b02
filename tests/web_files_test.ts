/**
 * The files panel of a session in a real Chromium, on a desktop and a
 * phone: the session's folder listed, a folder opened, a file read with line
 * numbers, an image drawn, a too-large file named as such, a search by name.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep a screenshot of each state, light
 * and dark (docs/screenshots/files-*.png come from it).
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
import { ROOT } from "./harness/procs.ts";

const APP_TS = `import { serve } from "./server.ts";

/** Starts the app on the port given, or 8080. */
export function main(args: string[]): void {
  const port = Number(args[0] ?? 8080);
  serve({ port });
  console.log(\`listening on \${port}\`);
}
`;

Deno.test("a session's files panel lists its folder, opens files read-only with line numbers, shows images and says when a file is too large", async () => {
  await withStack({ name: "Ada" }, async (w) => {
    const project = join(w.home, "src", "webapp");
    await Deno.mkdir(join(project, "src"), { recursive: true });
    await Deno.mkdir(join(project, "assets"), { recursive: true });
    await Deno.writeTextFile(join(project, "README.md"), "# webapp\n\nA small web app.\n");
    await Deno.writeTextFile(join(project, "src", "main.ts"), APP_TS);
    await Deno.writeTextFile(join(project, "src", "server.ts"), "export function serve() {}\n");
    await Deno.copyFile(join(ROOT, "web/dist/icon-192.png"), join(project, "assets", "logo.png"));
    await Deno.writeTextFile(join(project, "server.log"), "x".repeat(600 * 1024));
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

        // "Attach files" (the composer's paperclip) is another button: the header's is "Files".
        const filesButton = page.getByRole("button", { name: "Files", exact: true });
        // A phone's header has room for Files only under "More actions", as a user finds it.
        if (device === "phone") await page.getByRole("button", { name: "More actions" }).click();
        await filesButton.waitFor();
        await shot(page, `files-button-${device}`);
        await filesButton.click();
        const listing = page.getByRole("list", { name: "Folder contents" });
        await listing.getByRole("button", { name: "README.md" }).waitFor();
        assert.deepEqual(await names(page), ["assets", "src", "README.md", "server.log"]);
        await shot(page, `files-${device}`);

        // Into a folder, and a file with line numbers.
        await listing.getByRole("button", { name: "src" }).click();
        await listing.getByRole("button", { name: "main.ts" }).click();
        const dialog = page.getByRole("dialog");
        await dialog.locator(".code-text").waitFor();
        assert.equal(await dialog.locator(".code-text").textContent(), APP_TS.slice(0, -1));
        assert.equal(
          await dialog.locator(".code-gutter").textContent(),
          "1\n2\n3\n4\n5\n6\n7\n8",
        );
        await dialog.getByText("read-only").waitFor();
        if (device === "desktop") {
          assert.deepEqual(await axeViolations(page), [], "no accessibility violations");
        }
        await shot(page, `files-viewer-${device}`);
        await dialog.getByRole("button", { name: "Close the file" }).click();
        await dialog.waitFor({ state: "detached" });

        // Back up, an image.
        await page.getByRole("button", { name: "Session folder" }).click();
        await listing.getByRole("button", { name: "assets" }).click();
        await listing.getByRole("button", { name: "logo.png" }).click();
        const img = dialog.getByRole("img", { name: "logo.png" });
        await img.waitFor();
        await page.waitForFunction(
          "document.querySelector('.file-image img')?.naturalWidth === 192",
        );
        await shot(page, `files-image-${device}`);
        await page.keyboard.press("Escape");
        await dialog.waitFor({ state: "detached" });

        // A file over the text cap.
        await page.getByRole("button", { name: "Up one folder" }).click();
        await listing.getByRole("button", { name: "server.log" }).click();
        await dialog.getByText("Too large to show").waitFor();
        assert.match(await dialog.textContent() ?? "", /512 KB/);
        await page.keyboard.press("Escape");

        // Search by name.
        await page.getByRole("searchbox", { name: "Find a file by name" }).fill("srvr");
        const found = page.getByRole("list", { name: "Files found" });
        await found.getByRole("button", { name: "src/server.ts" }).waitFor();
        await shot(page, `files-search-${device}`);
        await found.getByRole("button", { name: "src/server.ts" }).click();
        await dialog.locator(".code-text").waitFor();
        assert.equal(
          await dialog.locator(".code-text").textContent(),
          "export function serve() {}",
        );

        assert.deepEqual(errors, []);
        await page.context().close();
      }
    } finally {
      await browser.close();
    }
  });
});

async function names(page: Page): Promise<string[]> {
  return await page.locator(".files-list .file-name").allTextContents();
}
