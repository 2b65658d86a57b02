/**
 * An uploaded file a browser could run (HTML, SVG, an HTML page declared as
 * text) does not run when its address is opened in Chromium: nothing of its
 * script reaches a server listening for it.
 */
import assert from "node:assert/strict";
import type { UploadAttachmentsResponse } from "../shared/attachments_api.ts";
import { signUp } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay } from "./harness/in_process.ts";
import { launchBrowser, newPage } from "./harness/browser.ts";

Deno.test("an uploaded HTML or SVG file opened in Chromium runs no script", async () => {
  // Whatever the file's script manages to send lands here.
  const hits: string[] = [];
  const beacon = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    hits.push(new URL(req.url).pathname);
    return new Response("ok", { headers: { "access-control-allow-origin": "*" } });
  });
  const spy = `http://127.0.0.1:${beacon.addr.port}`;
  const script = (tag: string) =>
    `fetch("${spy}/fetch-${tag}");new Image().src="${spy}/img-${tag}";` +
    `document.title="ran-${tag}";`;
  const relay = await startTestRelay();
  const browser = await launchBrowser();
  let fake: FakeRunner | undefined;
  try {
    const user = await signUp(relay.url);
    fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    const sessionId = await spawnSession(user, fake.runnerId);
    const files = [
      {
        name: "page.html",
        type: "text/html",
        body: `<!doctype html><title>x</title><script>${script("html")}</script>` +
          `<img src="x" onerror='${script("onerror")}'>`,
      },
      {
        name: "drawing.svg",
        type: "image/svg+xml",
        body: `<svg xmlns="http://www.w3.org/2000/svg"><script>${script("svg")}</script></svg>`,
      },
      {
        name: "feed.xml",
        type: "application/xhtml+xml",
        body: `<html xmlns="http://www.w3.org/1999/xhtml"><script>${
          script("xhtml")
        }</script></html>`,
      },
      // A page that claims to be text: shown as text (nosniff), never parsed as HTML.
      { name: "notes.txt", type: "text/plain", body: `<script>${script("text")}</script>` },
    ];
    const fd = new FormData();
    for (const f of files) fd.append("files", new File([f.body], f.name, { type: f.type }));
    const res = await user.api(`/api/sessions/${sessionId}/attachments`, {
      method: "POST",
      body: fd,
    });
    assert.equal(res.status, 200);
    const { attachments } = await res.json() as UploadAttachmentsResponse;

    const { page } = await newPage(browser);
    for (const a of attachments) {
      const url = `${relay.url}/api/attachments/${a.attachmentId}?apiKey=${user.apiKey}`;
      const downloaded = page.waitForEvent("download", { timeout: 5000 }).then(
        () => true,
        () => false,
      );
      const shown = await page.goto(url).then(() => true, (err: Error) => {
        // Chromium turns the navigation into a download.
        assert.match(err.message, /Download is starting|net::ERR_ABORTED/, a.filename);
        return false;
      });
      if (a.mimeType === "text/plain") {
        assert.ok(shown, "plain text is shown");
        assert.equal(await page.evaluate("document.contentType"), "text/plain");
        assert.match(await page.evaluate("document.body.innerText") as string, /<script>/);
      } else {
        assert.equal(shown, false, `${a.filename} is not shown`);
        assert.ok(await downloaded, `${a.filename} is downloaded`);
      }
      assert.doesNotMatch(await page.title(), /ran-/, a.filename);
    }
    // Give a script that did run time to be heard.
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(hits, [], "no script of an attachment ran");
  } finally {
    await browser.close();
    await fake?.close();
    await relay[Symbol.asyncDispose]();
    await beacon.shutdown();
  }
});
