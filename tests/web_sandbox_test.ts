/**
 * The sandbox in a real Chromium, against a real relay and runner: a tool
 * call the sandbox blocks shows inline in the conversation, `/sandbox` typed
 * in the composer is answered there, and the runner settings' Sandbox tab
 * shows the status (with the provider key its tools do not get) and saves the
 * mode and lists into `~/.baton/config.json`.
 * On a desktop and a phone.
 *
 * With BATON_UPDATE_SCREENSHOTS=1 it also writes docs/screenshots/sandbox-*.png.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { DESKTOP, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { withStack } from "./harness/in_process.ts";
import { ROOT } from "./harness/procs.ts";
import { json, Viewer } from "./harness/client.ts";

const UPDATE = Deno.env.get("BATON_UPDATE_SCREENSHOTS") === "1";

async function keep(page: Page, name: string): Promise<void> {
  await shot(page, name);
  if (!UPDATE) return;
  await page.screenshot({ path: join(ROOT, "docs", "screenshots", `${name}.png`) });
}

Deno.test("sandbox in the browser: violations inline, /sandbox answered, settings tab saves", async (t) => {
  // The provider's key comes from a variable, which the agent's tools do not get.
  const stack = {
    name: "Ada",
    modelsApiKey: "MOCK_PROVIDER_KEY",
    runnerEnv: { MOCK_PROVIDER_KEY: "mock-key-from-the-environment" },
  };
  await withStack(stack, async (s) => {
    // A session whose agent tries to read ~/.ssh and write outside its folder.
    s.llm.enqueue(
      {
        text: "Let me look at the keys.",
        toolCalls: [
          { id: "r", name: "read", args: { path: "~/.ssh/id_rsa" } },
          { id: "w", name: "write", args: { path: "/etc/baton-demo", content: "x" } },
        ],
      },
      { text: "The sandbox stopped both; I will work inside the project instead." },
    );
    const res = await s.user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: s.runnerId, prompt: "Read my SSH key" }),
    );
    const { sessionId } = await res.json();
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    viewer.subscribe(sessionId);
    await viewer.waitForEvent(sessionId, "agent_end", 60_000);
    await viewer.close();

    const browser = await launchBrowser();
    try {
      for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
        await t.step(`${label}: the conversation and the settings tab`, async () => {
          const { page, errors } = await newPage(browser, { viewport });
          await page.goto(`${s.relay.url}/session/${sessionId}`);
          await signInUi(page, s.user);
          const blocked = page.locator(".msg.sandbox.violation");
          await blocked.first().waitFor();
          assert.equal(await blocked.count(), 2);
          await page.getByText(/Sandbox blocked a read of .*\.ssh/).waitFor();
          await page.getByText("Sandbox blocked a write to /etc/baton-demo").waitFor();

          await page.getByLabel("Message").fill(
            label === "desktop" ? "/sandbox" : "/sandbox violations",
          );
          await page.getByLabel("Message").press("Enter");
          // The desktop step's answer stays in the conversation: wait for this step's own.
          const expected = label === "desktop"
            ? /mode basic, active, platform linux, 2 violations; provider keys kept from tools: MOCK_PROVIDER_KEY/
            : /\/etc\/baton-demo/;
          const info = page.locator(".msg.sandbox.info").filter({ hasText: expected }).last();
          await info.waitFor();
          assert.match(await info.innerText(), expected);
          await keep(page, `sandbox-session-${label}`);

          await page.goto(`${s.relay.url}/settings/runners/${s.runnerId}`);
          await page.getByRole("tab", { name: "Sandbox" }).click();
          await page.getByRole("list", { name: "Recent violations" }).waitFor();
          assert.match(
            await page.locator(".sandbox-facts").innerText(),
            label === "desktop"
              ? /basic[\s\S]*active[\s\S]*linux[\s\S]*Kept from tools\s*MOCK_PROVIDER_KEY[\s\S]*2 since/
              : /full[\s\S]*MOCK_PROVIDER_KEY[\s\S]*2 since/,
          );
          if (label === "desktop") {
            await page.getByRole("combobox").selectOption("full");
            await page.getByLabel(/Allowed domains/).fill("*.github.com\nregistry.npmjs.org");
            await page.getByRole("button", { name: "Save" }).click();
            await page.getByRole("status").filter({ hasText: "sessions started from now on" })
              .waitFor();
            const file = JSON.parse(
              await Deno.readTextFile(join(s.home, ".baton", "config.json")),
            );
            assert.deepEqual(file.sandbox, {
              mode: "full",
              filesystem: {},
              network: { allowedDomains: ["*.github.com", "registry.npmjs.org"] },
            });
          }
          await keep(page, `sandbox-settings-${label}`);
          assert.deepEqual(errors, []);
          await page.context().close();
        });
      }
    } finally {
      await browser.close();
    }
  });
});
