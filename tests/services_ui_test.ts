/**
 * Runner services in a real Chromium, on a desktop and a phone: the example
 * Notes service's panel shows in the session view in a sandboxed iframe 280
 * px tall, served through the tunnel, and works (a note added in it reaches
 * the service); sigils in the agent's answer render as pills resolved by the
 * service, aliases honoured, params checked, unknown types left as text.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep screenshots (docs/screenshots/services-*.png).
 */
import assert from "node:assert/strict";
import { join, resolve } from "node:path";
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
import { ROOT } from "./harness/procs.ts";
import { answer, closeWorld, spawn, startWorld, type World } from "./harness/trigger_world.ts";
import { eventually } from "./harness/wait.ts";

const EXAMPLE = resolve(ROOT, "examples", "services", "notes");

async function services(home: string): Promise<void> {
  const dir = join(home, ".baton", "services");
  await Deno.mkdir(join(dir, "throws"), { recursive: true });
  await Deno.symlink(EXAMPLE, join(dir, "notes"));
  await Deno.writeTextFile(
    join(dir, "throws", "manifest.json"),
    JSON.stringify({ id: "throws", label: "Flaky" }),
  );
  await Deno.writeTextFile(
    join(dir, "throws", "index.ts"),
    "export default class { id = 'throws'; init() { throw new Error('no database'); } dispose() {} }",
  );
}

async function openServices(page: Page, phone: boolean): Promise<void> {
  if (phone) await page.getByRole("button", { name: "More actions" }).click();
  await page.getByRole("button", { name: "Services", exact: true }).click();
}

Deno.test("a service's panel shows in a sandboxed iframe through the tunnel, and sigils render as pills (Chromium)", async () => {
  let w: World | undefined;
  let ok = false;
  try {
    w = await startWorld({ beforeRunner: services });
    const world = w;
    const view = await eventually("the runner's services", async () => {
      const r = await answer(await world.user.web(`/api/runners/${world.runnerId}/services`));
      return r.body?.panels?.length === 1 ? r.body : undefined;
    });
    const port = view.panels[0].port;
    const base = `/api/tunnel/runner/${world.runnerId}/${port}`;
    const added = await answer(
      await world.user.web(`${base}/api/notes`, json("POST", { text: "Rotate the API keys" })),
    );
    assert.equal(added.status, 201);
    const id = added.body.note.id;

    // Streamed in pieces that cut the tokens: the pills follow the text as it grows.
    world.llm.enqueue({
      text: [
        `Noted as [[no`,
        `te:${id}]]; short form [[n:${id} mode=short]]; `,
        `bad [[note:${id} mode=huge]]; unknown [[ticket:T-1]]; in code \`[[note:${id}]]\``,
        `. The end.`,
      ],
      chunkDelayMs: 150,
    });
    const sessionId = await spawn(world, "Keep a note of the key rotation.");
    await world.viewer.waitForEvent(sessionId, "agent_end");

    const browser = await launchBrowser();
    try {
      for (const [device, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
        const { page, errors } = await newPage(browser, { viewport, audit: device === "desktop" });
        await page.goto(`${world.relay.url}/session/${sessionId}`);
        await signInUi(page, world.user);
        await page.goto(`${world.relay.url}/session/${sessionId}`);

        // Sigils: two pills (type and alias), resolved by the service through the tunnel.
        const pills = page.locator(".msg.assistant .sigil");
        const resolved = page.locator(".msg.assistant .sigil-title", {
          hasText: "Rotate the API keys",
        });
        await resolved.nth(1).waitFor();
        assert.equal(await resolved.count(), 2);
        assert.equal(await pills.count(), 2);
        assert.equal(await pills.first().locator(".sigil-label").textContent(), "Note");
        assert.match((await pills.first().getAttribute("title"))!, /Rotate the API keys/);
        // Params outside the schema: the token stays text, with the reason on hover.
        const bad = page.locator(".msg.assistant .sigil-invalid");
        assert.equal(await bad.count(), 1);
        assert.match((await bad.getAttribute("title"))!, /must be one of: short, full/);
        const text = (await page.locator(".msg.assistant").textContent())!;
        assert.match(text, /\[\[ticket:T-1\]\]/); // unknown type: plain text
        assert.match(text, /The end\.\s*$/); // the last piece shows, after the pills
        assert.match(text, new RegExp(`\\[\\[note:${id}\\]\\]`)); // in code: left alone
        await shot(page, `services-sigils-${device}`);

        // The panel: an iframe 280 px tall, sandboxed, loaded through the tunnel.
        await openServices(page, device === "phone");
        const panel = page.getByRole("complementary", { name: "Services" });
        const frameEl = panel.locator("iframe.service-frame");
        await frameEl.waitFor();
        assert.equal(
          await frameEl.getAttribute("sandbox"),
          "allow-scripts allow-forms allow-popups",
        );
        assert.equal(await frameEl.getAttribute("src"), `${base}/`);
        assert.equal((await frameEl.boundingBox())!.height, 280);
        const frame = page.frameLocator("iframe.service-frame");
        await frame.getByText("Rotate the API keys").waitFor();
        // The panel cannot reach the relay's cookie (an opaque origin).
        const cookie = await frame.locator("body").evaluate(
          `(() => { try { return document.cookie; } catch (e) { return "threw " + e.name; } })()`,
        ) as string;
        assert.ok(cookie === "" || cookie.startsWith("threw"), cookie);
        // Baton's page makes a panel's requests for it only under that panel's own prefix.
        for (const path of ["/api/sessions", "../../../../sessions", "%2e%2e/%2e%2e/x"]) {
          const reply = await frame.locator("body").evaluate(`new Promise((done) => {
            addEventListener("message", (e) => e.data && e.data.id === 999 && done(e.data));
            parent.postMessage({ type: "baton:fetch", id: 999, path: ${
            JSON.stringify(path)
          } }, "*");
          })`) as { error?: string; status?: number };
          assert.equal(reply.error, "A panel may only call its own service", path);
        }
        // A service that failed shows why.
        await panel.getByText("no database").waitFor();

        // Adding a note in the panel reaches the service (its relative ./api/notes call).
        const note = `From the ${device} panel`;
        await frame.getByPlaceholder("Add a note").fill(note);
        await frame.getByRole("button", { name: "Add" }).click();
        await frame.getByText(/^Added/).waitFor();
        const listed = await answer(await world.user.web(`${base}/api/notes`));
        assert.ok(listed.body.notes.some((n: { text: string }) => n.text === note));
        await shot(page, `services-panel-${device}`);
        if (device === "desktop") assert.deepEqual(await axeViolations(page), []);
        assert.deepEqual(errors, []);
        await page.context().close();
      }
    } finally {
      await browser.close();
    }
    ok = true;
  } finally {
    await closeWorld(w, ok);
  }
});
