/**
 * The web client in a real Chromium against a real relay, a real runner and
 * the scripted model.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { json, signUp } from "./harness/client.ts";
import {
  axeViolations,
  DESKTOP,
  launchBrowser,
  newPage,
  PHONE,
  signInUi,
} from "./harness/browser.ts";
import { type Stack, startTestRelay, withStack } from "./harness/in_process.ts";
import { type ChatRequest, MODEL, type Turn } from "./harness/mock_llm.ts";
import { ROOT, tempDir } from "./harness/procs.ts";
import { eventually } from "./harness/wait.ts";
import { buildWeb } from "../web/build.ts";

const XSS = [
  "Here is what the page said:",
  '<img src="x" onerror="window.__xss = 1">',
  "<script>window.__xss = 2</script>",
  "[click me](javascript:window.__xss=3)",
  '<svg onload="window.__xss = 4"><circle r="1"/></svg>',
  '<iframe src="javascript:window.__xss=5"></iframe>',
  '<a href="#" onclick="window.__xss = 6">plain link</a>',
  '<details open ontoggle="window.__xss = 7"><summary>x</summary></details>',
  '<form action="javascript:window.__xss=8"><button>go</button></form>',
  "SAFE-END",
].join("\n\n");

/** Scripted answers chosen by a keyword of the session's first prompt. */
function responder(req: ChatRequest): Turn | undefined {
  const first = JSON.stringify(req.messages.find((m) => m.role === "user")?.content ?? "");
  const answered = req.messages.filter((m) => m.role === "assistant").length;
  if (first.includes("TOOL-RUN")) {
    return [
      {
        text: "Listing files.",
        toolCalls: [{ name: "bash", args: { command: "sleep 0.3; echo tool-output-line" } }],
      },
      { text: "The folder has **one** file." },
    ][answered] ?? { text: "OK." };
  }
  if (first.includes("QUEUE-RUN")) {
    // Long enough that a loaded machine still queues, removes and stops within it.
    return { text: Array.from({ length: 600 }, (_, i) => `q${i} `), chunkDelayMs: 50 };
  }
  if (first.includes("LONG-RUN")) {
    if (answered === 0) {
      return { text: Array.from({ length: 150 }, (_, i) => `w${i} `), chunkDelayMs: 40 };
    }
    return { text: `answer-${answered}` };
  }
  if (first.includes("XSS")) return { text: XSS };
  if (first.includes("FAIL-TOOL")) {
    return [
      {
        text: "Looking.",
        toolCalls: [{ name: "bash", args: { command: `ls /nope-dir-${"x".repeat(60)}` } }],
      },
      { text: "That folder is missing." },
    ][answered] ?? { text: "OK." };
  }
  return undefined;
}

interface World extends Stack {
  browser: Browser;
}

function withWorld(fn: (w: World) => Promise<void>): Promise<void> {
  return withStack({ responder, name: "Ada" }, async (s) => {
    const browser = await launchBrowser();
    try {
      await fn({ ...s, browser });
    } finally {
      await browser.close();
    }
  });
}

async function spawnApi(w: World, prompt: string): Promise<string> {
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", {
      runnerId: w.runnerId,
      cwd: w.home,
      model: MODEL,
      prompt,
    }),
  );
  return (await res.json()).sessionId;
}

/** The visible text of the conversation. */
function conversationText(page: Page): Promise<string> {
  return page.locator(".conversation").innerText();
}

function count(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

Deno.test("a new relay shows the owner screen; the owner signs in and out", async () => {
  const relay = await startTestRelay();
  const browser = await launchBrowser();
  try {
    const { page, errors } = await newPage(browser);
    await page.goto(relay.url);
    await page.getByRole("heading", { name: "Create the owner account" }).waitFor();
    await page.getByLabel("Name").fill("Grace");
    await page.getByLabel("Email").fill("grace@example.com");
    await page.getByLabel("Password").fill("short");
    await page.getByRole("button", { name: "Create account" }).click();
    // The browser refuses a short password before anything is sent.
    assert.equal(await relay.relay.store.accounts.count(), 0);
    await page.getByLabel("Password").fill("long enough password");
    await page.getByRole("button", { name: "Create account" }).click();
    await page.getByRole("link", { name: "New session" }).waitFor();
    assert.equal(await relay.relay.store.accounts.count(), 1);
    await page.getByText("Connect a runner first").waitFor();

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    await page.getByLabel("Email").fill("grace@example.com");
    await page.getByLabel("Password").fill("wrong password!");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").waitFor();
    assert.match(await page.getByRole("alert").innerText(), /invalid/i);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await relay[Symbol.asyncDispose]();
  }
});

Deno.test("an address typed by hand opens the app, not JSON; /settings/ lands on Settings", async () => {
  const relay = await startTestRelay();
  const browser = await launchBrowser();
  try {
    const user = await signUp(relay.url);
    const { page, errors } = await newPage(browser);
    await page.goto(`${relay.url}/login`);
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    await page.getByLabel("Email").fill(user.email);
    await page.getByLabel("Password").fill(user.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForSelector(".sidebar");
    // Signed in from /login, one lands at home, not on a missing page.
    await page.waitForURL(`${relay.url}/`);

    await page.goto(`${relay.url}/settings/`);
    await page.getByRole("heading", { name: "Settings", level: 1 }).waitFor();
    assert.equal(new URL(page.url()).pathname, "/settings");
    for (const path of ["/sessions", "/no/such/page"]) {
      await page.goto(`${relay.url}${path}`);
      await page.waitForSelector(".sidebar");
      assert.doesNotMatch(await page.locator("body").innerText(), /not_found|"error"/, path);
      // The app's own page says so, and leads home.
      await page.getByRole("heading", { name: "Page not found" }).waitFor();
      assert.match(await page.locator("main").innerText(), new RegExp(path));
    }
    await page.getByRole("link", { name: "Start a session" }).click();
    await page.getByRole("heading", { name: "Start a session" }).waitFor();
    assert.equal(new URL(page.url()).pathname, "/");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    await relay[Symbol.asyncDispose]();
  }
});

Deno.test("the web client spawns a session, streams a tool call, steers, aborts and survives a reload", async (t) => {
  await withWorld(async (w) => {
    const { page, errors, dialogs } = await newPage(w.browser);
    await page.goto(w.relay.url);
    await signInUi(page, w.user);

    await t.step("runner is listed live", async () => {
      await page.locator(".runner-item", { hasText: "0 live" }).waitFor();
      assert.match(await page.locator(".runner-item").innerText(), /linux|darwin|win32/);
    });

    await t.step("a spawn error is shown in words and starts nothing", async () => {
      await page.getByRole("link", { name: "New session" }).click();
      await page.getByLabel("Folder").fill(join(w.home, "does-not-exist"));
      await page.getByLabel("Prompt").fill("TOOL-RUN");
      await page.getByRole("button", { name: "Start session" }).click();
      await page.getByRole("alert").waitFor();
      assert.match(await page.getByRole("alert").innerText(), /does not exist/);
      const list = await (await w.user.api("/api/sessions")).json();
      assert.equal(list.sessions.length, 0);
    });

    await t.step("spawn from the form and watch the tool call stream", async () => {
      await page.getByLabel("Folder").fill(w.home);
      await page.getByLabel("Model").selectOption("mock/mock-1");
      await page.getByRole("button", { name: "Start session" }).click();
      await page.waitForURL(/\/session\/[0-9a-f-]{36}$/);
      const card = page.locator("details.tool");
      await card.locator("summary", { hasText: "bash" }).waitFor();
      await card.locator(".badge.done").waitFor();
      assert.match(await card.innerText(), /tool-output-line/);
      await page.getByText("The folder has one file.").waitFor();
      assert.equal(await page.locator(".msg.assistant strong", { hasText: "one" }).count(), 1);
      await page.locator(".pill", { hasText: "idle" }).waitFor();
      assert.match(await page.locator(".usage").innerText(), /200 in · 40 out · \$0\.0003/);
    });

    await t.step("Enter sends, Shift+Enter makes a new line", async () => {
      const box = page.locator("#composer-input");
      await box.fill("line one");
      await box.press("Shift+Enter");
      await box.pressSequentially("line two");
      assert.equal(await box.inputValue(), "line one\nline two");
      const before = w.llm.requests.length;
      await box.press("Enter");
      await page.locator(".msg.user .bubble", { hasText: "line two" }).waitFor();
      assert.equal(await box.inputValue(), "");
      await w.llm.waitForRequests(before + 1);
      assert.match(JSON.stringify(w.llm.requests[before]?.messages), /line one\\nline two/);
    });

    const long = await spawnApi(w, "LONG-RUN please");
    await t.step("steer while the agent works", async () => {
      await page.goto(`${w.relay.url}/session/${long}`);
      await page.locator(".pill", { hasText: "working" }).waitFor();
      // "working" can show before the model got the prompt: count from after that request.
      await eventually(
        "the long run's request at the model",
        () =>
          w.llm.requests.some((r) => JSON.stringify(r.messages).includes("LONG-RUN please")) ||
          undefined,
      );
      await page.getByRole("radio", { name: "Steer" }).click();
      // The words say what happens: a steer waits for the agent's current step.
      await page.getByPlaceholder("Steer the agent (it reads this after its current step)…")
        .waitFor();
      await page.locator("#composer-input").fill("STEER-FROM-UI");
      const before = w.llm.requests.length;
      await page.getByRole("button", { name: "Send steer" }).click();
      await w.llm.waitForRequests(before + 1);
      assert.match(JSON.stringify(w.llm.requests[before]?.messages), /STEER-FROM-UI/);
      await page.getByText("answer-1").waitFor();
    });

    const another = await spawnApi(w, "LONG-RUN again");
    await t.step("reload mid-stream shows every piece once", async () => {
      await page.goto(`${w.relay.url}/session/${another}`);
      await page.getByText("w10 ").waitFor();
      await page.reload();
      await page.getByText("w149").waitFor({ timeout: 20_000 });
      const text = await conversationText(page);
      for (const piece of ["w0 ", "w10 ", "w75 ", "w149"]) {
        assert.equal(count(text, piece), 1, piece);
      }
      assert.equal(count(text, "LONG-RUN again"), 1);
    });

    const third = await spawnApi(w, "LONG-RUN to abort");
    await t.step("the stop button aborts the run", async () => {
      await page.goto(`${w.relay.url}/session/${third}`);
      await page.getByText("w5 ").waitFor();
      await page.getByRole("button", { name: "Stop the agent" }).click();
      await page.getByText("Stopped").waitFor();
      await page.locator(".pill", { hasText: "idle" }).waitFor();
      assert.equal(await page.getByText("w149").count(), 0);
    });

    await t.step("the share URL opens the session after sign-in", async () => {
      const { page: fresh } = await newPage(w.browser);
      await fresh.goto(`${w.relay.url}/session/${third}`);
      await signInUi(fresh, w.user);
      await fresh.getByRole("heading", { name: "LONG-RUN to abort" }).waitFor();
      assert.ok(fresh.url().endsWith(`/session/${third}`));
      await fresh.context().close();
    });

    await t.step("keyboard: Alt+ArrowDown switches sessions, / focuses the composer", async () => {
      await page.locator("body").click();
      const before = page.url();
      await page.keyboard.press("Alt+ArrowDown");
      await page.waitForURL((u) => u.toString() !== before);
      await page.locator("body").click();
      await page.keyboard.press("/");
      assert.equal(await page.evaluate("document.activeElement?.id"), "composer-input");
    });

    assert.deepEqual(errors, [], "no uncaught errors in the page");
    assert.deepEqual(dialogs, []);
  });
});

Deno.test("agent output never runs script in the page", async () => {
  await withWorld(async (w) => {
    const id = await spawnApi(w, "XSS test");
    const { page, errors, dialogs } = await newPage(w.browser);
    await page.goto(`${w.relay.url}/session/${id}`);
    await signInUi(page, w.user);
    await page.getByText("SAFE-END").waitFor();
    await page.waitForTimeout(300); // let any injected handler fire (img error, svg load)
    assert.equal(await page.evaluate("window.__xss"), undefined);
    // No handler attribute, no script-bearing URL and no active element survived.
    const found = await page.evaluate(`[...document.querySelectorAll(".msg.assistant .md *")]
      .flatMap((el) => [
        ...(/^(SCRIPT|IFRAME|OBJECT|EMBED|FORM)$/.test(el.tagName) ? [el.tagName] : []),
        ...[...el.attributes]
          .filter((a) => /^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value))
          .map((a) => el.tagName + " " + a.name + "=" + a.value),
      ])`);
    assert.deepEqual(found, []);
    const text = await page.locator(".msg.assistant .md").innerText();
    assert.match(text, /plain link/, "harmless content is kept");
    assert.match(text, /click me/);
    assert.deepEqual(dialogs, []);
    assert.deepEqual(errors, []);
    // The page itself forbids inline script.
    const res = await fetch(`${w.relay.url}/session/${id}`);
    assert.match(res.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    await res.body?.cancel();
  });
});

Deno.test("on a phone the app fits the screen and the menu opens the session list", async () => {
  await withWorld(async (w) => {
    const id = await spawnApi(w, "TOOL-RUN on a phone");
    const { page, errors } = await newPage(w.browser, { viewport: PHONE });
    await page.goto(w.relay.url);
    await signInUi(page, w.user);
    const fits = () =>
      page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1");
    assert.equal(await fits(), true, "the session list fits");
    await page.locator(".session-item a").first().click();
    await page.getByText("The folder has one file.").waitFor();
    assert.ok(page.url().endsWith(`/session/${id}`));
    assert.equal(await fits(), true, "the session view fits");
    const box = await page.locator("#composer-input").boundingBox();
    assert.ok(box && box.y + box.height <= PHONE.height, "the composer is on screen");
    await page.getByRole("button", { name: "Open the menu" }).click();
    await page.getByRole("link", { name: "New session" }).click();
    await page.getByRole("heading", { name: "Start a session" }).waitFor();
    assert.equal(await fits(), true, "the form fits");
    assert.deepEqual(errors, []);
  });
});

Deno.test("settings: a new key is shown once, revoking waits 3 seconds and can be undone", async () => {
  await withWorld(async (w) => {
    const { page, errors } = await newPage(w.browser);
    await page.goto(`${w.relay.url}/settings`);
    await signInUi(page, w.user);
    await page.getByRole("heading", { name: "Settings" }).waitFor();
    // A read-only API key bound to the runner, made here, is listed as such.
    await page.locator(".key-form select").first().selectOption("read");
    await page.locator(".key-form select").nth(1).selectOption(w.runnerId);
    await page.getByLabel("Name", { exact: true }).fill("dashboard");
    await page.getByRole("button", { name: "Create" }).click();
    assert.match(await page.locator("#new-key-value").innerText(), /^bk_/);
    await page.getByRole("button", { name: "Done" }).click();
    await page.locator("tr", { hasText: "dashboard" }).getByText(/read-only · /).waitFor();
    const dashboard = (await (await w.user.api("/api/keys")).json()).keys
      .find((k: { name: string }) => k.name === "dashboard");
    assert.equal(dashboard?.scope, "read");
    assert.equal(dashboard?.runnerId, w.runnerId);
    await page.locator(".key-form select").first().selectOption("runner");
    await page.locator(".key-form select").nth(1).selectOption("");

    await page.getByLabel("Name", { exact: true }).fill("ci-box");
    await page.getByRole("button", { name: "Create" }).click();
    const value = await page.locator("#new-key-value").innerText();
    assert.match(value, /^brt_[A-Za-z0-9_-]{43}$/);
    const listed = await (await w.user.api("/api/keys")).json();
    const created = listed.keys.find((k: { name: string }) => k.name === "runner-ci-box");
    assert.ok(created, "named as a runner token");
    await page.getByRole("button", { name: "Done" }).click();
    assert.equal(await page.locator("#new-key-value").count(), 0, "shown once");
    assert.doesNotMatch(await page.locator("table.keys").innerText(), new RegExp(value));

    const row = page.locator("tr", { hasText: "runner-ci-box" });
    await row.getByRole("button", { name: "Revoke" }).click();
    await row.getByRole("button", { name: "Undo" }).click();
    await page.waitForTimeout(3500);
    // Still valid: a runner token is known (403 forbidden_scope: the runner
    // list is beyond its scope), not refused as unknown (401).
    assert.equal(
      (await fetch(`${w.relay.url}/api/runners`, { headers: { "x-api-key": value } })).status,
      403,
    );

    await row.getByRole("button", { name: "Revoke" }).click();
    await row.getByText(/Revoking runner-ci-box in \d/).waitFor();
    await row.waitFor({ state: "detached", timeout: 6000 });
    assert.equal(
      (await fetch(`${w.relay.url}/api/runners`, { headers: { "x-api-key": value } })).status,
      401,
    );

    // The runner can be restarted from here: it comes back with the same id.
    const runnerRow = page.locator("li", { has: page.getByText("connected", { exact: true }) });
    await runnerRow.getByRole("button", { name: "Restart" }).click();
    await page.getByText("is restarting.").waitFor();
    await w.runner.connected(2);
    assert.equal((await (await w.user.api("/api/runners")).json())[0].id, w.runnerId);

    // Hidden models leave the spawn form's list.
    await page.getByRole("checkbox", { name: "mock/mock-1" }).uncheck();
    await page.getByText("hidden", { exact: true }).waitFor();
    const hidden = await (await w.user.api("/api/settings/hidden-models")).json();
    assert.deepEqual(hidden.hiddenModels, ["mock/mock-1"]);
    await page.goto(`${w.relay.url}/new`);
    await page.getByText("This runner has no model configured").waitFor();
    assert.deepEqual(errors, []);
  });
});

Deno.test("main screens pass an accessibility audit in light and dark", async () => {
  await withWorld(async (w) => {
    const id = await spawnApi(w, "TOOL-RUN for the audit");
    for (const dark of [false, true]) {
      for (const viewport of [DESKTOP, PHONE]) {
        const context = await w.browser.newContext({
          viewport,
          colorScheme: dark ? "dark" : "light",
          bypassCSP: true, // to inject axe-core; the app itself runs under its CSP elsewhere
        });
        const page = await context.newPage();
        await page.goto(`${w.relay.url}/session/${id}`);
        await page.getByLabel("Email").fill(w.user.email);
        await page.getByLabel("Password").fill(w.user.password);
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.getByText("The folder has one file.").waitFor();
        for (const path of [`/session/${id}`, "/new", "/settings", "/automations"]) {
          await page.goto(`${w.relay.url}${path}`);
          await page.locator("main").first().waitFor();
          await page.waitForLoadState("networkidle");
          assert.deepEqual(
            await axeViolations(page),
            [],
            `${path} ${dark ? "dark" : "light"} ${viewport.width}px`,
          );
        }
        await context.close();
      }
    }
  });
});

Deno.test("the committed web bundle is current and its core stays under 150 KB gzipped", async () => {
  const out = await tempDir("baton-web-build-");
  try {
    await buildWeb(out);
    for (
      const f of [
        "app.js",
        "app.css",
        "xterm.js",
        "xterm.css",
        "icon-192.png",
        "icon-512.png",
        "icons.ts",
      ]
    ) {
      const fresh = await Deno.readFile(join(out, f));
      const committed = await Deno.readFile(join(ROOT, "web", "dist", f));
      assert.ok(
        fresh.length === committed.length && fresh.every((b, i) => b === committed[i]),
        `web/dist/${f} is stale: run 'deno task build:web'`,
      );
    }
    const js = await Deno.readFile(join(out, "app.js"));
    const gz = await new Response(
      new Blob([js]).stream().pipeThrough(new CompressionStream("gzip")),
    ).arrayBuffer();
    assert.ok(gz.byteLength < 150 * 1024, `app.js is ${gz.byteLength} bytes gzipped`);
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("automations: a webhook is created with its secret shown once, toggled and deleted; triggers show in the session", async () => {
  await withWorld(async (w) => {
    await Deno.writeTextFile(
      join(w.home, ".baton", "triggers.json"),
      JSON.stringify([{
        type: "ci:build_failed",
        label: "Build failed",
        params: [{ name: "branch", type: "string" }],
      }]),
    );
    // The runner announces its catalog when it connects: reconnect it.
    w.relay.relay.hub.link(w.runnerId)?.close(1012, "reload");
    await w.runner.connected(2);
    const { page, errors } = await newPage(w.browser);
    await page.goto(`${w.relay.url}/automations`);
    await signInUi(page, w.user);
    await page.getByRole("button", { name: "New webhook" }).click();
    await page.getByLabel("Name").fill("Issues");
    // A source is any label; markup in it is shown as text.
    await page.getByLabel("Source").fill("GitHub <b>Actions</b>");
    await page.getByLabel("Folder").first().fill(w.home);
    await page.getByLabel("Event filter").fill("issues.opened");
    const replay = page.getByRole("checkbox", { name: "Refuse replayable deliveries" });
    assert.equal(await replay.isChecked(), true, "a new webhook refuses replayable signing");
    await page.getByRole("button", { name: "Create webhook" }).click();
    const secret = await page.locator("#new-key-value").innerText();
    assert.match(secret, /^[0-9a-f]{64}$/);
    assert.match(await page.locator(".new-key pre").innerText(), /openssl dgst -sha256 -hmac/);
    const [hook] = (await (await w.user.api("/api/webhooks")).json()).webhooks;
    assert.equal(hook.name, "Issues");
    assert.equal(hook.source, "GitHub <b>Actions</b>");
    assert.deepEqual(hook.eventFilter, ["issues.opened"]);
    assert.equal(hook.runnerId, w.runnerId);
    await page.getByRole("button", { name: "Done" }).click();
    assert.equal(await page.locator("#new-key-value").count(), 0, "the secret is shown once");
    const head = page.locator(".webhook-item", { hasText: "Issues" }).locator(".webhook-head");
    await head.getByText("GitHub <b>Actions</b>", { exact: true }).waitFor();
    assert.equal(await head.locator("b").count(), 0);

    assert.equal(hook.requireReplayProtection, true);
    // The editor turns the replay protection off, and the list says so.
    await page.locator(".webhook-item", { hasText: "Issues" }).getByRole("button", { name: "Edit" })
      .click();
    await page.getByRole("checkbox", { name: "Refuse replayable deliveries" }).uncheck();
    await page.getByRole("button", { name: "Save" }).click();
    await head.getByText("replayable", { exact: true }).waitFor();
    assert.equal(
      (await (await w.user.api(`/api/webhooks/${hook.id}`)).json()).webhook.requireReplayProtection,
      false,
    );

    await page.getByRole("checkbox", { name: "Enabled" }).uncheck();
    await page.getByText("disabled", { exact: true }).waitFor();
    assert.equal(
      (await (await w.user.api(`/api/webhooks/${hook.id}`)).json()).webhook.enabled,
      false,
    );

    // Listener through the UI.
    await page.getByLabel("Trigger").selectOption("ci:build_failed");
    await page.getByLabel("Only when branch is").fill("main");
    await page.getByLabel("Prompt").last().fill("Fix the build");
    await page.getByRole("button", { name: "Add listener" }).click();
    await page.locator(".history code", { hasText: "ci:build_failed" }).waitFor();
    const { listeners } = await (await w.user.api(`/api/runners/${w.runnerId}/trigger-listeners`))
      .json();
    assert.deepEqual(listeners.map((l: { params: unknown }) => l.params), [{ branch: "main" }]);

    const item = page.locator(".webhook-item", { hasText: "Issues" });
    await item.getByRole("button", { name: "Delete" }).click();
    await item.getByText(/Deleting Issues in \d/).waitFor();
    await item.waitFor({ state: "detached", timeout: 6000 });
    assert.deepEqual((await (await w.user.api("/api/webhooks")).json()).webhooks, []);

    // A trigger posted into a session shows as a card and in the panel's history.
    const id = await spawnApi(w, "TOOL-RUN with a trigger");
    await page.goto(`${w.relay.url}/session/${id}`);
    await page.getByText("The folder has one file.").waitFor();
    await w.user.api(
      `/api/sessions/${id}/trigger`,
      json("POST", {
        type: "ci:build_failed",
        source: "external:GitHub <b>Actions</b>",
        summary: "main is red",
        payload: { branch: "main" },
      }),
    );
    const card = page.locator(".msg.trigger", { hasText: "main is red" });
    await card.getByText("external:GitHub <b>Actions</b>", { exact: true }).waitFor();
    assert.equal(await card.locator("b").count(), 0);
    await page.getByRole("button", { name: "Triggers" }).click();
    await page.locator(".history li", { hasText: "main is red" }).waitFor();
    assert.deepEqual(errors, []);
  });
});

Deno.test("a turn cut off by a runner crash ends visibly, and a forgotten prompt can be sent again", async () => {
  await withWorld(async (w) => {
    const id = await spawnApi(w, "LONG-RUN cut short");
    const { page, errors } = await newPage(w.browser);
    await page.goto(`${w.relay.url}/session/${id}`);
    await signInUi(page, w.user);
    await page.getByText("w5 ").waitFor();
    await page.getByRole("button", { name: "Stop the agent" }).waitFor();

    const daemon = Number((await w.runner.proc.waitFor(/\[daemon\] runner .* pid (\d+)/))[1]);
    Deno.kill(daemon, "SIGKILL");
    await w.runner.connected(2);

    // The turn is over: idle, no streaming cursor, no Stop, and the answer says why.
    await page.getByText("Interrupted by a runner restart").waitFor();
    await page.locator(".pill", { hasText: "idle" }).waitFor();
    assert.equal(await page.locator(".md.streaming").count(), 0);
    assert.equal(await page.getByRole("button", { name: "Stop the agent" }).count(), 0);
    await page.getByRole("button", { name: "Send", exact: true }).waitFor();
    await page.getByText(/restarted during this turn/).waitFor();
    // It was the first turn: pi had saved nothing, so the prompt is not the agent's any more.
    const prompt = page.locator(".msg.user.forgotten");
    await prompt.getByText("Not remembered by the agent").waitFor();
    await page.reload();
    await page.locator(".msg.user.forgotten").waitFor();
    await page.locator(".pill", { hasText: "idle" }).waitFor();

    const before = w.llm.requests.length;
    await page.getByRole("button", { name: "Send again" }).click();
    await w.llm.waitForRequests(before + 1);
    const sent = w.llm.requests[before]!.messages.filter((m) => m.role === "user");
    assert.equal(JSON.stringify(sent.at(-1)?.content).includes("LONG-RUN cut short"), true);
    await page.locator(".msg.user:not(.forgotten)", { hasText: "LONG-RUN cut short" }).waitFor();
    await page.getByRole("button", { name: "Stop the agent" }).click();
    await page.locator(".pill", { hasText: "idle" }).waitFor();
    assert.deepEqual(errors, []);
  });
});

Deno.test("Stop drops queued messages and gives their text back; each one can be removed", async () => {
  await withWorld(async (w) => {
    const id = await spawnApi(w, "QUEUE-RUN with a queue");
    const { page, errors } = await newPage(w.browser);
    await page.goto(`${w.relay.url}/session/${id}`);
    await signInUi(page, w.user);
    await page.getByText("q3 ").waitFor();
    const box = page.locator("#composer-input");
    await page.getByRole("radio", { name: "Steer" }).click();
    await box.fill("STEER-ONE");
    await box.press("Enter");
    const chips = page.locator(".queue li");
    await chips.filter({ hasText: "STEER-ONE" }).waitFor();
    await page.getByRole("radio", { name: "Follow-up" }).click();
    await box.fill("FOLLOW-TWO");
    await box.press("Enter");
    await chips.filter({ hasText: "FOLLOW-TWO" }).waitFor();
    await box.fill("FOLLOW-THREE");
    await box.press("Enter");
    await chips.filter({ hasText: "FOLLOW-THREE" }).waitFor();
    assert.equal(await chips.count(), 3);

    await page.getByRole("button", { name: "Remove queued follow-up: FOLLOW-TWO" }).click();
    await chips.filter({ hasText: "FOLLOW-TWO" }).waitFor({ state: "detached" });
    assert.equal(await chips.count(), 2);

    await page.getByRole("button", { name: "Stop the agent" }).click();
    await page.locator(".queue").waitFor({ state: "detached" });
    // The text comes back once the relay has confirmed the stop, which may be after the queue
    // event has already emptied the list.
    await page.getByText("Stop cleared the queued messages").waitFor();
    assert.equal(await box.inputValue(), "STEER-ONE\n\nFOLLOW-THREE");
    await page.reload();
    await page.locator(".pill", { hasText: "idle" }).waitFor();
    await page.getByText("Stopped").waitFor();
    assert.equal(await page.locator(".queue").count(), 0, "no queued message after a reload");
    assert.deepEqual(errors, []);
  });
});

Deno.test("a failed tool call renders as a card with its command once, on a desktop and a phone", async (t) => {
  await withWorld(async (w) => {
    const id = await spawnApi(w, "FAIL-TOOL please");
    for (const [name, viewport] of [["desktop", DESKTOP], ["phone", PHONE]] as const) {
      await t.step(name, async () => {
        const { page, errors } = await newPage(w.browser, { viewport });
        await page.goto(`${w.relay.url}/session/${id}`);
        await signInUi(page, w.user);
        await page.getByText("That folder is missing.").waitFor();
        const card = page.locator("details.tool.error");
        await card.locator(".badge", { hasText: "failed" }).waitFor();
        const look = await page.evaluate(`(() => {
          const card = document.querySelector("details.tool.error");
          const name = card.querySelector(".tool-name");
          return {
            display: getComputedStyle(card).display,
            background: getComputedStyle(card).backgroundColor,
            panel: getComputedStyle(document.querySelector(".composer")).backgroundColor,
            nameCut: name.scrollWidth > name.clientWidth,
          };
        })()`) as { display: string; background: string; panel: string; nameCut: boolean };
        assert.equal(look.display, "block", "header and body are stacked, not side by side");
        assert.equal(look.background, look.panel, "a failed card keeps the card background");
        assert.equal(look.nameCut, false, "the tool name is not cut");
        assert.equal(await card.locator(".tool-name").innerText(), "bash");
        const head = (await card.locator("summary").boundingBox())!;
        const body = (await card.locator(".tool-body").boundingBox())!;
        assert.ok(body.y >= head.y + head.height - 1, "the output sits under the header");
        assert.ok(head.width > viewport.width * 0.6, "the header spans the card");
        const text = await card.innerText();
        assert.equal(count(text, "ls /nope-dir-"), 1, "the command is shown once");
        assert.match(text, /No such file or directory/);
        assert.equal(
          await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"),
          true,
        );
        assert.deepEqual(errors, []);
        await page.context().close();
      });
    }
  });
});
