/**
 * Questions and approvals in a real Chromium, against a real relay and
 * runner: the agent's question waits above the message box (also after a
 * reload), one tap on an option answers it; a held bash call shows Approve
 * and Deny, and a denial's reason reaches the agent; collab mode switched
 * from the session's header. On a desktop and a phone.
 *
 * With BATON_UPDATE_SCREENSHOTS=1 it also writes docs/screenshots/questions-*.png.
 *
 * @module
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import {
  axeViolations,
  DESKTOP,
  launchBrowser,
  newPage,
  PHONE,
  shot,
  signInUi,
} from "./harness/browser.ts";
import { json, Viewer } from "./harness/client.ts";
import { type Stack, withStack } from "./harness/in_process.ts";
import type { ChatRequest } from "./harness/mock_llm.ts";
import { ROOT } from "./harness/procs.ts";

const UPDATE = Deno.env.get("BATON_UPDATE_SCREENSHOTS") === "1";

async function keep(page: Page, name: string): Promise<void> {
  await shot(page, name);
  if (!UPDATE) return;
  await page.screenshot({ path: join(ROOT, "docs", "screenshots", `${name}.png`) });
}

/** axe's findings in the cards of this feature (the rest of the page has its own audit). */
async function mine(page: Page): Promise<string[]> {
  return (await axeViolations(page)).filter((v) => /question|pending|approv/.test(v));
}

const QUESTION = {
  questions: [{
    question: "Which database should the service use?",
    header: "Database",
    options: [
      { label: "PostgreSQL", description: "Runs as a server, scales out" },
      { label: "SQLite", description: "One file next to the service" },
    ],
  }],
};

function toolResult(requests: ChatRequest[], toolCallId: string): string {
  for (const r of requests) {
    for (const m of r.messages) {
      if (m.role === "tool" && m.tool_call_id === toolCallId) return JSON.stringify(m.content);
    }
  }
  return "";
}

/** Each session's script, by its prompt: the tool call first, then `after` once it has a result. */
const SCRIPTS = new Map<string, { call: Record<string, unknown>; after: string }>();

function respond(req: ChatRequest) {
  const prompt = JSON.stringify(req.messages.find((m) => m.role === "user")?.content ?? "");
  const script = [...SCRIPTS].find(([p]) => prompt.includes(p))?.[1];
  if (!script) return undefined;
  if (req.messages.at(-1)?.role === "tool") return { text: script.after };
  return { text: "Before I go on:", toolCalls: [script.call as never] };
}

async function spawn(s: Stack, prompt: string, call: Record<string, unknown>, after: string) {
  SCRIPTS.set(prompt, { call, after });
  const res = await s.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: s.runnerId, prompt, cwd: s.home }),
  );
  const { sessionId } = await res.json();
  const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
  viewer.subscribe(sessionId);
  await viewer.waitForEvent(sessionId, "question", 60_000);
  return { sessionId, viewer };
}

Deno.test("questions in the browser: answered with a tap, approvals denied with a reason, collab switched", async (t) => {
  await withStack({ name: "Ada", responder: respond }, async (s) => {
    const policy = await s.user.web(
      `/api/runners/${s.runnerId}/approvals`,
      json("PUT", { mode: "ask", commands: ["git push*"] }),
    );
    assert.equal(policy.status, 200, await policy.text());
    const q = await spawn(
      s,
      "Set up the service",
      { id: "call_ui_q", name: "ask_user", args: QUESTION },
      "SQLite it is.",
    );
    const a = await spawn(
      s,
      "Publish the branch",
      { id: "call_ui_a", name: "bash", args: { command: "git push origin feature/search" } },
      "Understood, I will not push.",
    );

    const browser = await launchBrowser();
    try {
      const pages: Record<string, Page> = {};
      for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
        await t.step(`${label}: the waiting question and approval`, async () => {
          const { page, errors } = await newPage(browser, { viewport, audit: true });
          pages[label] = page;
          await page.goto(`${s.relay.url}/session/${q.sessionId}`);
          await signInUi(page, s.user);
          const card = page.getByRole("form", { name: "The agent asks" });
          await card.waitFor();
          await card.getByText("Which database should the service use?").waitFor();
          await keep(page, `questions-pending-${label}`);
          assert.deepEqual(await mine(page), [], "the question card passes axe");
          // A reload shows it again: it is an event of the session.
          await page.reload();
          await card.waitFor();

          await page.goto(`${s.relay.url}/session/${a.sessionId}`);
          const approval = page.getByRole("group", { name: "Approve bash?" });
          await approval.waitFor();
          assert.match(await approval.innerText(), /git push origin feature\/search/);
          await keep(page, `questions-approval-${label}`);
          assert.deepEqual(await mine(page), [], "the approval card passes axe");
          assert.deepEqual(errors, []);
        });
      }

      await t.step("phone: one tap on an option answers the question", async () => {
        const page = pages.phone!;
        await page.goto(`${s.relay.url}/session/${q.sessionId}`);
        await page.getByRole("button", { name: /^SQLite/ }).click();
        await page.getByText("SQLite it is.").waitFor({ timeout: 60_000 });
        await page.getByRole("form", { name: "The agent asks" }).waitFor({ state: "detached" });
        assert.match(toolResult(s.llm.requests, "call_ui_q"), /The user answered:\\nSQLite/);
      });

      await t.step("phone: the Approvals panel is under More actions", async () => {
        const page = pages.phone!;
        await page.goto(`${s.relay.url}/session/${a.sessionId}`);
        await page.getByRole("button", { name: "More actions" }).click();
        await page.getByRole("button", { name: "Approvals" }).click();
        const panel = page.getByRole("complementary", { name: "Approvals" });
        await panel.getByText("follows the runner's (ask)").waitFor();
        await keep(page, "questions-settings-phone");
        await panel.getByRole("button", { name: "Close the approvals panel" }).click();
      });

      await t.step("desktop: collab mode from the header, then Deny with a reason", async () => {
        const page = pages.desktop!;
        await page.goto(`${s.relay.url}/session/${a.sessionId}`);
        await page.getByRole("button", { name: "Approvals" }).click();
        const dialog = page.getByRole("complementary", { name: "Approvals" });
        await dialog.getByLabel(/Collab mode/).check();
        await s.user.web(`/api/sessions/${a.sessionId}/collab`).then(async (r) =>
          assert.deepEqual(await r.json(), { collab: true })
        );
        await keep(page, "questions-settings-desktop");
        await dialog.getByRole("button", { name: "Close the approvals panel" }).click();

        await page.getByLabel("Reason to deny (optional)").fill("push after the review");
        await page.getByRole("button", { name: "Deny" }).click();
        await page.getByText("Understood, I will not push.").waitFor({ timeout: 60_000 });
        await page.getByRole("group", { name: "Approve bash?" }).waitFor({ state: "detached" });
        assert.match(
          toolResult(s.llm.requests, "call_ui_a"),
          /The user denied this bash call: push after the review/,
        );
      });
    } finally {
      await q.viewer.close();
      await a.viewer.close();
      await browser.close();
    }
  });
});
