/**
 * Live previews end to end in a real Chromium, on a desktop and a phone: a
 * mock-model session runs a bash tool that serves a folder over HTTP (under
 * the runner's sandbox), the runner notices the port, the session view offers "Open
 * preview" for it, and the link opens the server through the tunnel in a
 * new tab. Any port can also be opened by number.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep screenshots (docs/screenshots/previews-*.png).
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

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = l.addr.port;
  l.close();
  return port;
}

Deno.test("a server a session starts shows as a live preview that opens through the tunnel, on a desktop and a phone", async () => {
  const port = freePort();
  const other = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      new Response("<!doctype html><title>other</title><h1>by number</h1>", {
        headers: { "content-type": "text/html" },
      }),
  );
  try {
    await withStack({ name: "Ada" }, async (w) => {
      const site = join(w.home, "site");
      await Deno.mkdir(site, { recursive: true });
      await Deno.writeTextFile(
        join(site, "index.html"),
        "<!doctype html><title>Preview</title><h1>hello from the preview</h1>",
      );
      w.llm.enqueue(
        {
          toolCalls: [{
            name: "bash",
            args: {
              // In the foreground, as `npm run dev` would be: the tool call lasts while it serves
              // (under the runner's sandbox, whose process tree the runner follows).
              command: `exec python3 -m http.server ${port} --bind 127.0.0.1`,
              timeout: 120,
            },
          }],
        },
        { text: "Stopped." },
      );
      const res = await w.user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: w.runnerId, cwd: site, model: MODEL, prompt: "serve the site" }),
      );
      assert.equal(res.status, 200);
      const { sessionId } = await res.json();

      // The runner announces the port as a session event, in the session's stored log.
      const end = Date.now() + 20_000;
      let ports: unknown = null;
      while (Date.now() < end) {
        const page = await (await w.user.api(`/api/sessions/${sessionId}/events?since=0`)).json();
        const events: { e: { type: string; ports?: unknown } }[] = page.events ?? page;
        const last = events.filter((e) => e.e.type === "preview_ports").at(-1);
        if (last) {
          ports = last.e.ports;
          break;
        }
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.deepEqual(ports, [{ port, process: "python3" }]);

      const browser = await launchBrowser();
      try {
        for (const [device, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
          const { page, errors } = await newPage(browser, {
            viewport,
            audit: device === "desktop",
          });
          await page.goto(`${w.relay.url}/session/${sessionId}`);
          await signInUi(page, w.user);
          await page.goto(`${w.relay.url}/session/${sessionId}`);

          const bar = page.getByRole("navigation", { name: "Live previews" });
          const link = bar.getByRole("link", { name: new RegExp(`Open preview :${port}`) });
          await link.waitFor();
          assert.equal(
            await link.getAttribute("href"),
            `/api/tunnel/runner/${w.runnerId}/${port}/`,
          );
          assert.equal(await link.getAttribute("target"), "_blank");
          if (device === "desktop") {
            // Only the bar's: a turn in flight has findings of its own elsewhere (see the report).
            const found = (await axeViolations(page)).filter((v) => /preview/.test(v));
            assert.deepEqual(found, [], "no accessibility violations in the previews bar");
          }
          await shot(page, `previews-${device}`);

          // The link opens the server in a new tab, through the tunnel: the baton cookie
          // opens it, and the page lands on a preview address of its own (docs/security.md).
          const opened = await openedTab(page, () => link.click());
          await opened.getByRole("heading", { name: "hello from the preview" }).waitFor();
          assert.match(new URL(opened.url()).pathname, /^\/api\/tunnel\/g\/[\w-]{20,}\/$/);
          await opened.close();

          // Any port, by number: a bad one is refused in place, a good one opens.
          await bar.getByRole("button", { name: "Open a port…" }).click();
          const field = bar.getByLabel("Port");
          await field.fill("70000");
          await bar.getByRole("button", { name: "Open", exact: true }).click();
          await bar.getByRole("alert").filter({ hasText: "1 to 65535" }).waitFor();
          await field.fill(String(other.addr.port));
          if (device === "phone") await shot(page, "previews-port-phone");
          const byNumber = await openedTab(
            page,
            () => bar.getByRole("button", { name: "Open", exact: true }).click(),
          );
          await byNumber.getByRole("heading", { name: "by number" }).waitFor();
          await byNumber.close();
          assert.deepEqual(errors, []);
          await page.context().close();
        }
      } finally {
        await browser.close();
      }

      // Stopping the turn stops the server: the preview is withdrawn from the stored state too.
      const abort = await w.user.api(
        `/api/sessions/${sessionId}/input`,
        json("POST", { kind: "abort" }),
      );
      assert.equal(abort.status, 200, await abort.clone().text());
      const gone = Date.now() + 20_000;
      for (;;) {
        const page = await (await w.user.api(`/api/sessions/${sessionId}/events?since=0`)).json();
        const events: { e: { type: string; ports?: unknown[] } }[] = page.events ?? page;
        const last = events.filter((e) => e.e.type === "preview_ports").at(-1);
        if (last?.e.ports?.length === 0) break;
        if (Date.now() > gone) throw new Error("the closed port was never withdrawn");
        await new Promise((r) => setTimeout(r, 200));
      }
    });
  } finally {
    await other.shutdown();
  }
});

/** The tab that `action` opens from `page`. */
async function openedTab(page: Page, action: () => Promise<void>): Promise<Page> {
  const [tab] = await Promise.all([page.context().waitForEvent("page"), action()]);
  await tab.waitForLoadState();
  return tab;
}
