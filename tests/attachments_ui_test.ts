/**
 * The composer takes files by picker, drag and drop and paste, shows each as
 * a chip (name, size, progress, error) that can be removed before sending,
 * and sends the rest with the message: the model sees the image, and the
 * text file is in the session's folder.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { json } from "./harness/client.ts";
import { DESKTOP, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";

/** Drops (or pastes) a file made in the page onto `selector`. */
async function dropFile(
  page: Page,
  selector: string,
  how: "drop" | "paste",
  file: { name: string; type: string; text: string },
) {
  // A string: the page's DOM types are not the test's.
  await page.evaluate(`(() => {
    const file = ${JSON.stringify(file)};
    const dt = new DataTransfer();
    dt.items.add(new File([file.text], file.name, { type: file.type }));
    const target = document.querySelector(${JSON.stringify(selector)});
    if (${JSON.stringify(how)} === "paste") {
      target.dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true }));
    } else {
      for (const type of ["dragover", "drop"]) {
        target.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    }
  })()`);
}

Deno.test("the composer attaches files by picker, drop and paste, and sends them with the message", async (t) => {
  await withStack({ name: "Ada" }, async ({ relay, user, runnerId, home, llm }) => {
    const project = join(home, "project");
    await Deno.mkdir(project);
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId, cwd: project, model: MODEL, prompt: "" }),
    );
    const { sessionId } = await res.json();
    const browser = await launchBrowser();
    try {
      for (const [viewport, name] of [[DESKTOP, "desktop"], [PHONE, "phone"]] as const) {
        await t.step(`on a ${name}`, async () => {
          const { page, errors } = await newPage(browser, { viewport });
          await page.goto(`${relay.url}/session/${sessionId}`);
          await signInUi(page, user);
          await page.locator("#composer-input").waitFor();

          // Picker: the paperclip's file input.
          const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 9, 9, 9]);
          await page.getByTestId("attach-input").setInputFiles([
            { name: "screenshot.png", mimeType: "image/png", buffer: png },
          ]);
          await dropFile(page, ".composer", "drop", {
            name: "build.log",
            type: "text/plain",
            text: "error: missing semicolon\n",
          });
          await dropFile(page, "#composer-input", "paste", {
            name: "unwanted.txt",
            type: "text/plain",
            text: "remove me",
          });
          const chips = page.locator(".attachment-chips .chip");
          await chips.nth(2).waitFor();
          await page.locator(".attachment-chips .chip.uploading").first()
            .waitFor({ state: "detached" });
          assert.deepEqual(await chips.locator(".chip-name").allTextContents(), [
            "screenshot.png",
            "build.log",
            "unwanted.txt",
          ]);
          assert.deepEqual(await chips.locator(".chip-meta").allTextContents(), [
            "11 B",
            "25 B",
            "9 B",
          ]);
          await page.getByRole("button", { name: "Remove unwanted.txt" }).click();
          await page.locator("#composer-input").fill("What went wrong?");
          await shot(page, `composer-attachments-${name}`);

          const before = llm.requests.length;
          llm.enqueue({ text: `A missing semicolon (${name}).` });
          await page.getByRole("button", { name: "Send" }).click();
          await llm.waitForRequests(before + 1);
          await page.locator(".attachment-chips").waitFor({ state: "detached" });
          const last = llm.requests.at(-1)!.messages.filter((m) => m.role === "user").at(-1)!;
          const parts = last.content as {
            type: string;
            text?: string;
            image_url?: { url: string };
          }[];
          const text = parts.filter((p) => p.type === "text").map((p) => p.text).join("\n");
          assert.match(text, /^What went wrong\?/);
          assert.ok(text.includes("build.log") && !text.includes("unwanted.txt"), text);
          assert.deepEqual(
            parts.filter((p) => p.type === "image_url").map((p) => p.image_url!.url),
            [`data:image/png;base64,${png.toString("base64")}`],
          );
          const path = /(\.baton\/attachments\/[0-9a-f-]+\/build\.log)/.exec(text)![1]!;
          assert.equal(await Deno.readTextFile(join(project, path)), "error: missing semicolon\n");
          await page.getByText(`A missing semicolon (${name}).`).waitFor();
          assert.deepEqual(errors, []);
          await page.context().close();
        });
      }

      await t.step("a file over the cap shows its error on its chip and is not sent", async () => {
        const { page } = await newPage(browser, { viewport: DESKTOP });
        await page.goto(`${relay.url}/session/${sessionId}`);
        await signInUi(page, user);
        await page.getByTestId("attach-input").setInputFiles([
          {
            name: "huge.bin",
            mimeType: "application/octet-stream",
            buffer: Buffer.alloc(11 * 1024 * 1024),
          },
        ]);
        const failed = page.locator(".attachment-chips .chip.failed");
        await failed.waitFor();
        assert.match(await failed.textContent() ?? "", /larger than 10485760 bytes/);
        assert.equal(await page.getByRole("button", { name: "Send" }).isDisabled(), true);
        await page.context().close();
      });
    } finally {
      await browser.close();
    }
  });
});
