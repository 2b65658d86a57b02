/**
 * Regenerates docs/screenshots/ (`deno task screenshots`): a real relay, a
 * real runner, the scripted model and Chromium, walking through the main
 * screens on a desktop and a phone, in light and dark.
 *
 * @module
 */
import { join } from "node:path";
import { json, signUp } from "../harness/client.ts";
import { DESKTOP, launchBrowser, newPage, PHONE } from "../harness/browser.ts";
import { startTestRelay } from "../harness/in_process.ts";
import { MockLlm, MODEL, type Turn } from "../harness/mock_llm.ts";
import { ROOT, startRunner, tempDir } from "../harness/procs.ts";

const OUT = join(ROOT, "docs", "screenshots");

const ANSWER = `I found the failing test. The parser drops the last line when the input has no
trailing newline:

\`\`\`ts
export function lines(text: string): string[] {
  return text.split("\\n").filter((l, i, all) => i < all.length - 1 || l !== "");
}
\`\`\`

I changed it, ran the suite again and **all 42 tests pass** now.

| file | before | after |
| --- | --- | --- |
| \`parse.ts\` | 1 failing | passing |
`;

export async function takeScreenshots(): Promise<string[]> {
  await Deno.mkdir(OUT, { recursive: true });
  const llm = MockLlm.start();
  const relay = await startTestRelay();
  const home = await tempDir("baton-shots-");
  const project = join(home, "src", "parser");
  await Deno.mkdir(project, { recursive: true });
  await Deno.writeTextFile(join(project, "parse.ts"), "export const x = 1;\n");
  const user = await signUp(relay.url, { email: "ada@example.com", name: "Ada" });
  await llm.writeModelsJson(home, ["mock-1", "mock-large"]);
  await Deno.writeTextFile(
    join(home, ".baton", "triggers.json"),
    JSON.stringify([{
      type: "ci:build_failed",
      label: "Build failed",
      description: "A CI job failed on a branch",
      params: [{ name: "branch", type: "string" }],
    }]),
  );
  const runner = await startRunner({
    relayUrl: relay.url,
    apiKey: user.apiKey,
    home,
    env: { BATON_RUNNER_NAME: "workstation" },
  });
  const browser = await launchBrowser();
  const saved: string[] = [];
  try {
    const [r] = await (await user.api("/api/runners")).json();
    const spawn = async (prompt: string) =>
      (await (await user.api(
        "/api/runners/spawn",
        json("POST", {
          runnerId: r.id,
          cwd: project,
          model: MODEL,
          prompt,
        }),
      )).json()).sessionId as string;

    // Answers depend on the session's first prompt, so sessions can run at once.
    const script: Record<string, Turn[]> = {
      parser: [
        {
          thinking: "The test output mentions a missing last line; let me look at the parser.",
          text: "Let me run the tests first.",
          toolCalls: [{ name: "bash", args: { command: "ls -la && echo '41 passed, 1 failed'" } }],
        },
        { text: ANSWER },
      ],
      readme: [{ text: "Done: the README now documents the CLI flags." }],
      fixtures: [
        {
          text: "Let me look at the fixtures first.",
          toolCalls: [{
            name: "bash",
            args: { command: "ls test/fixtures/csv && wc -l test/fixtures/csv/*.txt" },
          }],
        },
        {
          text: "There is no `test/fixtures/csv` folder yet: I will create it with three cases.",
        },
      ],
      migration: [{
        text: Array.from({ length: 600 }, (_, i) => `column ${i}, `),
        chunkDelayMs: 40,
      }],
      tokenizer: [{ text: Array.from({ length: 2000 }, (_, i) => `step ${i} `), chunkDelayMs: 30 }],
    };
    llm.responder = (req) => {
      const first = JSON.stringify(req.messages.find((m) => m.role === "user")?.content ?? "");
      const key = Object.keys(script).find((k) => first.toLowerCase().includes(k));
      const turns = req.messages.filter((m) => m.role === "assistant").length;
      return key ? script[key]![turns] ?? { text: "OK." } : undefined;
    };
    const main = await spawn("The parser test fails on files without a trailing newline. Fix it.");
    await spawn("Document the CLI flags in the README");
    const working = await spawn("Refactor the tokenizer into its own module");
    const failing = await spawn("Add fixtures for the CSV reader tests");
    await user.api(`/api/sessions/${main}/pin`, { method: "PUT" });
    await user.api(
      "/api/webhooks",
      json("POST", {
        name: "GitHub issues",
        source: "github",
        runnerId: r.id,
        cwd: project,
        prompt: "Triage the new issue and label it.",
        eventFilter: ["issues.opened"],
      }),
    );
    await user.api(
      `/api/runners/${r.id}/trigger-listeners`,
      json("POST", {
        triggerType: "ci:build_failed",
        prompt: "A build failed: find out why and fix it.",
        cwd: project,
        params: { branch: "main" },
      }),
    );
    await user.api(
      `/api/sessions/${main}/trigger`,
      json("POST", {
        type: "ci:build_failed",
        source: "ci",
        summary: "main is red: test job failed",
        payload: { branch: "main", job: "test", url: "https://ci.example.com/run/812" },
        deliverAs: "followUp",
      }),
    );

    for (const dark of [false, true]) {
      const suffix = dark ? "-dark" : "";
      const { page } = await newPage(browser, { viewport: DESKTOP, dark });
      await page.goto(relay.url);
      await page.getByLabel("Email").fill(user.email);
      await page.getByLabel("Password").fill(user.password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForSelector(".session-item");

      await page.goto(`${relay.url}/session/${main}`);
      await page.waitForSelector("text=all 42 tests pass");
      await page.locator("details.tool summary").first().click();
      await shot(page, `session-desktop${suffix}`);
      // The question a delete asks first (answered Keep: nothing is deleted).
      await page.getByRole("button", { name: "Delete session" }).click();
      await page.getByRole("group", { name: "Delete session" }).waitFor();
      await shot(page, `session-delete-desktop${suffix}`);
      await page.getByRole("button", { name: "Keep" }).click();
      await page.getByRole("button", { name: "Triggers" }).click();
      await page.waitForSelector(".history li");
      await page.locator(".msg.trigger").scrollIntoViewIfNeeded();
      await shot(page, `session-triggers-desktop${suffix}`);

      await page.goto(`${relay.url}/automations`);
      await page.waitForSelector(".webhook-item");
      await shot(page, `automations-desktop${suffix}`);
      if (!dark) {
        await page.getByRole("button", { name: "New webhook" }).click();
        await page.getByLabel("Name").fill("Deploys");
        await page.getByRole("checkbox", { name: "Refuse replayable deliveries" }).waitFor();
        await shot(page, "webhook-editor-desktop");
      }

      await page.goto(`${relay.url}/session/${working}`);
      await page.waitForSelector(".seg");
      await page.locator("#composer-input").fill("Keep the public API unchanged");
      await shot(page, `session-working-desktop${suffix}`);

      await page.goto(`${relay.url}/session/${failing}`);
      await page.waitForSelector("text=three cases");
      await shot(page, `tool-failed-desktop${suffix}`);

      await page.goto(`${relay.url}/new`);
      await page.waitForSelector("option:has-text('mock/mock-large')", { state: "attached" });
      await shot(page, `new-session-desktop${suffix}`);

      await page.goto(`${relay.url}/settings`);
      await page.waitForSelector("table.keys");
      await shot(page, `settings-desktop${suffix}`);
      await page.context().close();
    }

    {
      // Queued messages (the tokenizer still works): a steer and a follow-up.
      const { page } = await newPage(browser, { viewport: DESKTOP });
      await page.goto(`${relay.url}/session/${working}`);
      await page.getByLabel("Email").fill(user.email);
      await page.getByLabel("Password").fill(user.password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForSelector(".seg");
      await page.locator("#composer-input").fill("Keep the public API unchanged");
      await page.locator("#composer-input").press("Enter");
      await page.getByRole("radio", { name: "Follow-up" }).click();
      await page.locator("#composer-input").fill("Then update the changelog");
      await page.locator("#composer-input").press("Enter");
      await page.locator(".queue li").nth(1).waitFor();
      await shot(page, "session-queue-desktop");
      await page.context().close();
    }

    const { page: phone } = await newPage(browser, { viewport: PHONE });
    await phone.goto(relay.url);
    await shot(phone, "sign-in-phone");
    await phone.getByLabel("Email").fill(user.email);
    await phone.getByLabel("Password").fill(user.password);
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.waitForSelector(".session-item");
    await shot(phone, "sessions-phone");
    await phone.goto(`${relay.url}/session/${main}`);
    await phone.waitForSelector("text=all 42 tests pass");
    await shot(phone, "session-phone");
    await phone.getByRole("button", { name: "Delete session" }).click();
    await phone.getByRole("group", { name: "Delete session" }).waitFor();
    await shot(phone, "session-delete-phone");
    await phone.getByRole("button", { name: "Keep" }).click();
    await phone.goto(`${relay.url}/session/${failing}`);
    await phone.waitForSelector("text=three cases");
    await shot(phone, "tool-failed-phone");
    await phone.goto(`${relay.url}/automations`);
    await phone.getByRole("button", { name: "New webhook" }).click();
    await phone.getByLabel("Name").fill("Deploys");
    await phone.getByRole("checkbox", { name: "Refuse replayable deliveries" })
      .scrollIntoViewIfNeeded();
    await shot(phone, "webhook-editor-phone");
    await user.api(`/api/sessions/${working}/input`, json("POST", { kind: "abort" }));

    // Last, as it restarts the runner: a first turn cut short by a crash.
    const cut = await spawn("Write the migration for the new columns");
    const { page } = await newPage(browser, { viewport: DESKTOP });
    await page.goto(relay.url);
    await page.getByLabel("Email").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForSelector(".session-item");
    await page.goto(`${relay.url}/session/${cut}`);
    await page.waitForSelector("text=column 40,");
    const daemon = Number((await runner.proc.waitFor(/\[daemon\] runner .* pid (\d+)/))[1]);
    Deno.kill(daemon, "SIGKILL");
    await runner.connected(2);
    await page.waitForSelector("text=Interrupted by a runner restart");
    await shot(page, "session-interrupted-desktop");
    await phone.goto(`${relay.url}/session/${cut}`);
    await phone.waitForSelector("text=Interrupted by a runner restart");
    await shot(phone, "session-interrupted-phone");
    await phone.context().close();
    await page.context().close();
  } finally {
    await browser.close();
    await runner.stop();
    await relay[Symbol.asyncDispose]();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
  return saved;

  async function shot(page: import("playwright-core").Page, name: string) {
    // Wait for fonts and the last frame so the picture is stable.
    await page.evaluate("document.fonts.ready.then(() => true)");
    await page.waitForTimeout(150);
    const path = join(OUT, `${name}.png`);
    await page.screenshot({ path });
    saved.push(path);
  }
}

if (import.meta.main) {
  for (const p of await takeScreenshots()) console.log(p);
}
