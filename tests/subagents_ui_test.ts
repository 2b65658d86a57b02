/**
 * Subagents in a real Chromium, against a real relay and runner: the
 * parent's `subagent` tool call links each child, a child's header links its
 * parent, and the sidebar lists the children under their parent. On a
 * desktop and a phone.
 *
 * With BATON_UPDATE_SCREENSHOTS=1 it also writes docs/screenshots/subagents-*.png.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { DESKTOP, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { json, Viewer } from "./harness/client.ts";
import { withStack } from "./harness/in_process.ts";
import type { ChatRequest } from "./harness/mock_llm.ts";
import { ROOT } from "./harness/procs.ts";

const UPDATE = Deno.env.get("BATON_UPDATE_SCREENSHOTS") === "1";

async function keep(page: Page, name: string): Promise<void> {
  await shot(page, name);
  if (!UPDATE) return;
  await page.screenshot({ path: join(ROOT, "docs", "screenshots", `${name}.png`) });
}

const PARENT = "Review the lexer and the parser";

function text(m: ChatRequest["messages"][number]): string {
  return typeof m.content === "string"
    ? m.content
    : Array.isArray(m.content)
    ? m.content.map((p) => String((p as { text?: unknown }).text ?? "")).join("")
    : "";
}

function script(req: ChatRequest) {
  const first = text(req.messages.find((m) => m.role === "user")!);
  if (req.messages.at(-1)?.role === "tool") {
    return { text: "Both reviews are in: the lexer is fine, the parser misses one error case." };
  }
  if (first === PARENT) {
    return {
      text: "I will ask two reviewers.",
      toolCalls: [{
        name: "subagent",
        args: {
          tasks: [
            { task: "Review src/lexer.ts", agent: "reviewer" },
            { task: "Review src/parser.ts", agent: "reviewer" },
          ],
        },
      }],
    };
  }
  if (first.includes("lexer")) return { text: "The lexer handles every token; no problem found." };
  return { text: "The parser does not report an unclosed bracket (src/parser.ts:88)." };
}

Deno.test("subagents in the browser: the tool call links its children, a child links its parent", async (t) => {
  await withStack({ name: "Ada", responder: script }, async (s) => {
    await Deno.mkdir(join(s.home, ".baton", "agents"), { recursive: true });
    await Deno.writeTextFile(
      join(s.home, ".baton", "agents", "reviewer.md"),
      "---\nname: reviewer\ndescription: Reviews code\ntools: read, ls\n---\n\nReview; change nothing.\n",
    );
    const res = await s.user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: s.runnerId, prompt: PARENT }),
    );
    const { sessionId } = await res.json();
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    viewer.subscribe(sessionId);
    await viewer.waitForEvent(sessionId, "agent_end", 120_000);
    await viewer.close();
    const kids = (await (await s.user.api(`/api/sessions/${sessionId}/children`)).json())
      .sessions as { sessionId: string; title: string }[];
    assert.equal(kids.length, 2);
    // Both children start at once: pick each by its task, not by the listing's order.
    const lexer = kids.find((k) => /lexer/.test(k.title));
    const parser = kids.find((k) => /parser/.test(k.title));
    assert.ok(lexer && parser, `one child per task: ${kids.map((k) => k.title)}`);

    const browser = await launchBrowser();
    try {
      for (const [label, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
        await t.step(`${label}: links from the parent to its children and back`, async () => {
          const { page, errors } = await newPage(browser, { viewport });
          await page.goto(`${s.relay.url}/session/${sessionId}`);
          await signInUi(page, s.user);
          const calls = page.getByRole("list", { name: "Subagents of this call" });
          await calls.waitFor();
          const links = calls.getByRole("link");
          assert.equal(await links.count(), 2);
          assert.match(await links.nth(0).innerText(), /1\. Review src\/lexer\.ts/);
          assert.match(await links.nth(1).innerText(), /reviewer/);
          assert.equal(
            await links.nth(0).getAttribute("href"),
            `/session/${lexer.sessionId}`,
          );
          if (label === "desktop") {
            // The sidebar lists the children under their parent, not on their own.
            const nested = page.locator(".session-item").filter({ hasText: PARENT })
              .getByRole("list", { name: "Subagents" });
            await nested.waitFor();
            assert.equal(await nested.getByRole("link").count(), 2);
          }
          await keep(page, `subagents-parent-${label}`);

          await links.nth(1).click();
          await page.waitForURL(`**/session/${parser.sessionId}`);
          const back = page.locator(".subagent-parent");
          await back.waitFor();
          assert.match(await back.innerText(), /Subagent \(reviewer\) of Review the lexer/);
          await page.getByText("does not report an unclosed bracket").waitFor();
          await keep(page, `subagents-child-${label}`);
          await back.getByRole("link").click();
          await page.waitForURL(`**/session/${sessionId}`);
          assert.deepEqual(errors, []);
          await page.context().close();
        });
      }
    } finally {
      await browser.close();
    }
  });
});
