/**
 * What a newcomer hit in the web client (issue 15), in a real Chromium
 * against a real relay, a real runner and the scripted model: changing the
 * password, the Models card's words, empty and huge prompts, long messages,
 * the session header, the sidebar's groups, renaming sessions and the phone
 * composer while the agent works.
 *
 * Set BATON_TEST_SHOTS=<folder> to keep a screenshot of each state, light and
 * dark, to look at.
 */
import assert from "node:assert/strict";
import { basename, join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { json, signIn, Viewer } from "./harness/client.ts";
import { axeViolations, launchBrowser, newPage, PHONE, shot, signInUi } from "./harness/browser.ts";
import { type Stack, withStack } from "./harness/in_process.ts";
import { type ChatRequest, MODEL, type Turn } from "./harness/mock_llm.ts";
import type { SessionPatch } from "../relay/store/mod.ts";

/** An answer slow enough (30 s) to look at a working session. */
const SLOW: Turn = { text: Array.from({ length: 600 }, (_, i) => `slow${i} `), chunkDelayMs: 50 };

/** Scripted answers chosen by a keyword of the session's first prompt. */
function responder(req: ChatRequest): Turn | undefined {
  const first = JSON.stringify(req.messages.find((m) => m.role === "user")?.content ?? "");
  const answered = req.messages.filter((m) => m.role === "assistant").length;
  if (first.includes("HOLD")) return answered === 0 ? SLOW : { text: "OK." };
  if (first.includes("TWO-STEP")) return answered === 1 ? SLOW : { text: "Ready." };
  return undefined;
}

interface World extends Stack {
  browser: Browser;
  /** A viewer of the user's, to wait for session events. */
  viewer: Viewer;
}

function withWorld(fn: (w: World) => Promise<void>): Promise<void> {
  return withStack({ responder, name: "Ada" }, async (s) => {
    const browser = await launchBrowser();
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      await fn({ ...s, browser, viewer });
    } finally {
      await viewer.close();
      await browser.close();
    }
  });
}

/** Starts a session through the API and subscribes the world's viewer to it. */
async function spawn(w: World, prompt: string, cwd = w.home): Promise<string> {
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: w.runnerId, cwd, model: MODEL, prompt }),
  );
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  w.viewer.subscribe(body.sessionId);
  return body.sessionId;
}

/** Resolves once the session's first run has ended. */
async function settled(w: World, id: string): Promise<void> {
  await w.viewer.waitForEvent(id, "agent_end");
}

Deno.test("settings: the Models card's words match its boxes, and the password can be changed", async (t) => {
  await withWorld(async (w) => {
    const here = await newPage(w.browser, { audit: true });
    const page = here.page;
    await page.goto(`${w.relay.url}/settings`);
    await signInUi(page, w.user);

    await t.step("a checked box means shown, and the card says so", async () => {
      const card = page.locator("section", {
        has: page.getByRole("heading", { name: "Models" }),
      });
      await card.getByText("Checked models are offered when you start a session").waitFor();
      const box = card.getByRole("checkbox", { name: "mock/mock-1" });
      assert.equal(await box.isChecked(), true);
      assert.equal(await card.getByText("hidden", { exact: true }).count(), 0);
      await box.uncheck();
      await card.getByText("hidden", { exact: true }).waitFor();
      const hidden = await (await w.user.api("/api/settings/hidden-models")).json();
      assert.deepEqual(hidden.hiddenModels, ["mock/mock-1"]);
      await shot(page, "settings-models-hidden");
      await box.check();
      await card.getByText("hidden", { exact: true }).waitFor({ state: "detached" });
      const shown = await (await w.user.api("/api/settings/hidden-models")).json();
      assert.deepEqual(shown.hiddenModels, []);
    });

    const id = await spawn(w, "A session to see the feed");
    await settled(w, id);
    const there = await newPage(w.browser, { viewport: PHONE });
    await there.page.goto(`${w.relay.url}/session/${id}`);
    await signInUi(there.page, w.user);
    const card = page.locator("form", { has: page.getByRole("heading", { name: "Password" }) });
    const current = card.getByLabel("Current password");
    const fresh = card.getByLabel("New password", { exact: true });
    const again = card.getByLabel("New password again");
    const change = card.getByRole("button", { name: "Change password" });
    const NEW = "a brand new password";

    await t.step("bad input is refused in words and changes nothing", async () => {
      await current.fill(w.user.password);
      await fresh.fill("short");
      await again.fill("short");
      await change.click();
      await card.getByRole("alert").getByText("at least 8 characters").waitFor();
      assert.equal(await fresh.getAttribute("aria-invalid"), "true");

      await fresh.fill(NEW);
      await again.fill(NEW + "!");
      await change.click();
      await card.getByRole("alert").getByText("The new passwords do not match").waitFor();

      await current.fill("not my password");
      await again.fill(NEW);
      await change.click();
      await card.getByRole("alert").getByText("The current password is wrong").waitFor();
      assert.equal(await current.getAttribute("aria-invalid"), "true");
      await shot(page, "settings-password-error");
      assert.deepEqual(await axeViolations(page), []);
      // The old password still signs in, and the other browser is still in.
      await signIn(w.relay.url, w.user.email, w.user.password);
      assert.equal(await there.page.locator(".sidebar").count(), 1);
    });

    await t.step("a change signs the other browsers out and keeps this one", async () => {
      await current.fill(w.user.password);
      await change.click();
      await card.getByRole("status").getByText("Password changed").waitFor();
      assert.equal(await current.inputValue(), "");
      assert.equal(await fresh.inputValue(), "");
      // The other browser lands on sign-in by itself: its live socket was closed.
      await there.page.getByRole("heading", { name: "Sign in" }).waitFor();
      // This one stays signed in and live: a change elsewhere reaches it.
      const renamed = await w.user.api(
        `/api/sessions/${id}`,
        json("PATCH", { title: "Seen after the change" }),
      );
      assert.equal(renamed.status, 200);
      await renamed.body?.cancel();
      await page.locator(".session-title", { hasText: "Seen after the change" }).waitFor();
      assert.equal(await page.getByRole("heading", { name: "Sign in" }).count(), 0);
      await page.reload();
      await page.getByRole("heading", { name: "Settings" }).waitFor();
      await shot(page, "settings-password-changed");
      await assert.rejects(signIn(w.relay.url, w.user.email, w.user.password));
      await signIn(w.relay.url, w.user.email, NEW);
    });
    assert.deepEqual(here.errors, []);
    assert.deepEqual(there.errors, []);
  });
});

/** Sets a session's listed state by hand, as the runner's sleeping workers will report it. */
function force(w: World, id: string, patch: Pick<SessionPatch, "status" | "activity">) {
  const { store, hub } = w.relay.relay;
  store.sessions.update(id, patch, new Date().toISOString());
  hub.sessionChanged(id);
}

/** The sidebar's session groups as shown: heading, then the titles under it. */
function sidebarGroups(page: Page): Promise<[string, string[]][]> {
  return page.evaluate(`[...document.querySelectorAll(".side-sessions .side-group")].map((g) => [
    g.querySelector(".side-heading").textContent.trim(),
    [...g.querySelectorAll(".session-title")].map((t) => t.textContent),
  ])`) as Promise<[string, string[]][]>;
}

type Box = { x: number; y: number; width: number; height: number };

async function boxOf(l: Locator): Promise<Box> {
  const box = await l.boundingBox();
  assert.ok(box, "the element is on screen");
  return box;
}

/** Whether the page scrolls sideways. */
function overflowsSideways(page: Page): Promise<boolean> {
  return page.evaluate("document.documentElement.scrollWidth > innerWidth + 1") as Promise<boolean>;
}

Deno.test("the sidebar groups sessions by what they do: working, idle, asleep, ended", async (t) => {
  await withWorld(async (w) => {
    const working = await spawn(w, "HOLD: a working one");
    const idle = await spawn(w, "An idle one");
    const pinned = await spawn(w, "A pinned one");
    const ended = await spawn(w, "An ended one");
    const sleepy = await spawn(w, "A sleepy one");
    for (const id of [idle, pinned, ended, sleepy]) await settled(w, id);
    await w.viewer.waitForEvent(working, "message_update");
    await (await w.user.api(`/api/sessions/${pinned}/pin`, { method: "PUT" })).body?.cancel();
    await (await w.user.api(
      `/api/sessions/${ended}/input`,
      json("POST", { kind: "end" }),
    )).body?.cancel();
    await w.viewer.waitForEvent(ended, "session_end");
    force(w, sleepy, { activity: "asleep" });

    const { page, errors } = await newPage(w.browser, { audit: true });
    await page.goto(w.relay.url);
    await signInUi(page, w.user);
    const item = (title: string) => page.locator(".session-item", { hasText: title });

    await t.step("each session is under the heading of what it does", async () => {
      await item("A sleepy one").waitFor();
      assert.deepEqual(await sidebarGroups(page), [
        ["Pinned", ["A pinned one"]],
        ["Working", ["HOLD: a working one"]],
        ["Idle", ["An idle one"]],
        ["Asleep", ["A sleepy one"]],
        ["Ended", ["An ended one"]],
      ]);
      assert.match(await item("A sleepy one").innerText(), /asleep/);
      await shot(page, "sidebar-groups");
      assert.deepEqual(await axeViolations(page), []);
    });

    await t.step("an asleep session says so in its header, and waking moves it up", async () => {
      await item("A sleepy one").locator("a").click();
      const pill = page.locator(".session-head .pill");
      await pill.getByText("asleep").waitFor();
      await shot(page, "session-asleep");
      assert.deepEqual(await axeViolations(page), []);
      force(w, sleepy, { activity: "waking" });
      await pill.getByText("waking").waitFor();
      const groups = await sidebarGroups(page);
      assert.deepEqual(groups.find(([h]) => h === "Working")?.[1], [
        "A sleepy one",
        "HOLD: a working one",
      ]);
      assert.equal(groups.some(([h]) => h === "Asleep"), false, "an empty group is not shown");
    });

    await t.step("starting counts as working; an error as ended", async () => {
      force(w, idle, { status: "starting" });
      force(w, sleepy, { status: "error", activity: "idle" });
      await page.locator(".session-head .pill").getByText("error").waitFor();
      await item("An idle one").getByText("starting").waitFor();
      const dot = await boxOf(item("A sleepy one").locator(".dot"));
      assert.ok(dot.width <= 12 && Math.abs(dot.width - dot.height) < 1, "an error's dot is a dot");
      await shot(page, "session-error");
      assert.deepEqual(await sidebarGroups(page), [
        ["Pinned", ["A pinned one"]],
        ["Working", ["An idle one", "HOLD: a working one"]],
        ["Ended", ["A sleepy one", "An ended one"]],
      ]);
    });

    await t.step("on a phone the list is the home page, in the same groups", async () => {
      const phone = await newPage(w.browser, { viewport: PHONE });
      await phone.page.goto(w.relay.url);
      await signInUi(phone.page, w.user);
      await phone.page.locator(".session-item", { hasText: "A sleepy one" }).waitFor();
      assert.deepEqual(
        (await sidebarGroups(phone.page)).map(([h]) => h),
        ["Pinned", "Working", "Ended"],
      );
      assert.equal(await overflowsSideways(phone.page), false);
      await shot(phone.page, "sidebar-groups-phone");
      assert.deepEqual(phone.errors, []);
    });
    assert.deepEqual(errors, []);
  });
});

/** Whether two boxes sit on one row: they overlap by half the smaller one's height. */
function sameRow(a: Box, b: Box): boolean {
  const overlap = Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y);
  return overlap >= Math.min(a.height, b.height) / 2;
}

/** Whether an element's text is cut (it is wider than its box). */
function truncated(l: Locator): Promise<boolean> {
  return l.evaluate((el) => el.scrollWidth > el.clientWidth + 1);
}

Deno.test("the new-session form refuses an empty prompt, warns about a huge one, and long messages fold", async (t) => {
  await withWorld(async (w) => {
    const { page, errors } = await newPage(w.browser, { audit: true });
    await page.goto(`${w.relay.url}/new`);
    await signInUi(page, w.user);
    const start = page.getByRole("button", { name: "Start session" });
    const prompt = page.getByLabel("Prompt");
    await page.getByLabel("Folder").fill(w.home);
    await page.getByLabel("Model").selectOption("mock/mock-1");

    await t.step(
      "an empty or blank prompt cannot start a session, and the form says why",
      async () => {
        await page.getByText("Write a prompt to start the session").waitFor();
        assert.equal(await start.isDisabled(), true);
        await prompt.fill("  \n\t \n ");
        assert.equal(await start.isDisabled(), true);
        await prompt.press("Control+Enter");
        await page.getByText("Write a prompt to start the session").waitFor();
        await shot(page, "new-session-empty");
        const list = await (await w.user.api("/api/sessions")).json();
        assert.deepEqual(list.sessions, []);
      },
    );

    const lines = Array.from(
      { length: 1500 },
      (_, i) => `line ${i + 1} of a long paste: ${"x".repeat(38)}`,
    );
    const huge = lines.join("\n");
    await t.step("a huge prompt gets a warning but may be sent", async () => {
      assert.ok(huge.length > 90_000);
      // Pasted in one go (typing 100,000 characters takes Chromium seconds).
      await prompt.evaluate((el, text) => {
        (el as unknown as { value: string }).value = text;
        el.dispatchEvent(new Event("input", { bubbles: true }));
      }, huge);
      const warning = page.getByText(/This prompt is long: \d+,\d{3} characters/);
      await warning.waitFor();
      assert.match(await warning.innerText(), /about \d+,\d{3} tokens/);
      await shot(page, "new-session-long-prompt");
      assert.equal(await start.isDisabled(), false);
      assert.deepEqual(await axeViolations(page), []);
      await start.click();
      await page.waitForURL(/\/session\/[0-9a-f-]{36}$/);
    });

    const bubble = page.locator(".msg.user .bubble");
    await t.step("the long message shows its start, and the rest on demand", async () => {
      await bubble.waitFor();
      const text = await bubble.innerText();
      assert.match(text, /line 20 of a long paste/);
      assert.doesNotMatch(text, /line 21 of a long paste/);
      assert.ok((await boxOf(bubble)).height < 600, "the folded message is short");
      const more = page.getByRole("button", { name: /Show more/ });
      assert.match(await more.innerText(), /1,480 more lines/);
      assert.equal(await more.getAttribute("aria-expanded"), "false");
      await page.locator(".pill", { hasText: "idle" }).waitFor();
      await shot(page, "session-long-message");
      assert.deepEqual(await axeViolations(page), []);
      await more.click();
      await page.getByRole("button", { name: "Show less" }).waitFor();
      assert.match(await bubble.innerText(), /line 1500 of a long paste/);
      assert.ok((await boxOf(bubble)).height > 10_000, "unfolded, all of it");
      await page.getByRole("button", { name: "Show less" }).click();
      assert.doesNotMatch(await bubble.innerText(), /line 21 of a long paste/);
    });

    await t.step("on a desktop the header stays one row and the title is cut short", async () => {
      const title = page.locator(".session-head h1");
      assert.equal(await truncated(title), true, "the title ends with an ellipsis");
      const titleBox = await boxOf(title);
      for (const name of ["Pin session", "Rename session", "End session", "Triggers"]) {
        const b = await boxOf(page.locator(".session-head").getByRole("button", { name }));
        assert.ok(sameRow(titleBox, b), `${name} is on the title's row`);
      }
      assert.ok((await boxOf(page.locator(".session-head"))).height < 90);
    });

    await t.step("on a phone the header stays one row too and the message is folded", async () => {
      const phone = await newPage(w.browser, { viewport: PHONE, audit: true });
      await phone.page.goto(page.url());
      await signInUi(phone.page, w.user);
      const p = phone.page;
      await p.locator(".msg.user .bubble").waitFor();
      await p.locator(".pill", { hasText: "idle" }).waitFor();
      assert.equal(await truncated(p.locator(".topbar-title")), true);
      const head = p.locator(".session-head");
      const pill = await boxOf(head.locator(".pill"));
      // "End session" reads "End" on a phone.
      for (const name of ["Pin session", "Rename session", /^End/, "Triggers"]) {
        const b = await boxOf(head.getByRole("button", { name }));
        assert.ok(sameRow(pill, b), `${name} is on the status's row`);
        assert.ok(b.x + b.width <= PHONE.width, `${name} is on screen`);
      }
      assert.ok((await boxOf(p.locator(".msg.user .bubble"))).height < 700);
      assert.equal(await overflowsSideways(p), false);
      await shot(p, "session-long-message-phone");
      assert.deepEqual(await axeViolations(p), []);

      // Files and Changes wait under "More actions", on the same row, and open on screen.
      const more = head.getByRole("button", { name: "More actions" });
      const m = await boxOf(more);
      assert.ok(sameRow(pill, m) && m.x + m.width <= PHONE.width, "More actions is on the row");
      await more.click();
      assert.equal(await more.getAttribute("aria-expanded"), "true");
      for (const name of ["Files", "Changes"]) {
        const b = await boxOf(head.getByRole("button", { name, exact: true }));
        assert.ok(b.x >= 0 && b.x + b.width <= PHONE.width, `${name} is on screen`);
        assert.ok(b.y + b.height <= PHONE.height, `${name} is on screen`);
      }
      assert.equal(await overflowsSideways(p), false);
      await shot(p, "session-more-phone");
      assert.deepEqual(await axeViolations(p), []);
      // Escape closes the list and gives the focus back to its button.
      await p.keyboard.press("Escape");
      await head.getByRole("button", { name: "Files", exact: true }).waitFor({ state: "hidden" });
      assert.equal(await more.evaluate((el) => el === el.ownerDocument.activeElement), true);
      assert.deepEqual(phone.errors, []);
    });
    assert.deepEqual(errors, []);
  });
});

async function titleOf(w: World, id: string): Promise<string> {
  return (await (await w.user.api(`/api/sessions/${id}`)).json()).session.title;
}

Deno.test("a session is renamed from its header, every tab follows, and repeated titles show folder and start time", async (t) => {
  await withWorld(async (w) => {
    const other = join(w.home, "other-folder");
    await Deno.mkdir(other);
    const first = await spawn(w, "Same prompt twice");
    const second = await spawn(w, "Same prompt twice", other);
    for (const id of [first, second]) await settled(w, id);

    const { page, errors } = await newPage(w.browser, { audit: true });
    await page.goto(`${w.relay.url}/session/${first}`);
    await signInUi(page, w.user);
    const tab2 = await newPage(w.browser);
    await tab2.page.goto(w.relay.url);
    await signInUi(tab2.page, w.user);
    const heading = page.locator(".session-head h1");
    const renameButton = page.getByRole("button", { name: "Rename session" });
    const input = page.getByLabel("Session title");

    await t.step("sessions with the same title show their folder and start time", async () => {
      const items = page.locator(".session-item", { hasText: "Same prompt twice" });
      await items.nth(1).waitFor();
      const subs = await items.locator(".session-sub").allInnerTexts();
      assert.equal(subs.length, 2);
      for (const sub of subs) assert.match(sub, /started \d{1,2}:\d{2}:\d{2}/);
      // The time is seen whole, however long the folder's name (the test's is long).
      for (let i = 0; i < 2; i++) {
        const line = await boxOf(items.nth(i).locator(".session-sub"));
        const time = await boxOf(items.nth(i).getByText(/started/));
        assert.ok(time.x >= line.x && time.x + time.width <= line.x + line.width + 1);
      }
      assert.ok(subs.some((s) => s.startsWith("other-folder")), subs.join(" | "));
      assert.ok(subs.some((s) => s.startsWith(basename(w.home))), subs.join(" | "));
      assert.notEqual(subs[0], subs[1]);
      await shot(page, "sidebar-repeated-titles");
    });

    await t.step("Escape cancels, and an empty title is refused", async () => {
      await heading.getByText("Same prompt twice").waitFor();
      await renameButton.click();
      assert.equal(await input.inputValue(), "Same prompt twice");
      assert.equal(await input.evaluate((el) => el === el.ownerDocument.activeElement), true);
      await input.fill("Changed my mind");
      await input.press("Escape");
      await input.waitFor({ state: "detached" });
      await heading.getByText("Same prompt twice").waitFor();
      assert.equal(
        await renameButton.evaluate((el) => el === el.ownerDocument.activeElement),
        true,
      );

      await renameButton.click();
      await input.fill("   ");
      await input.press("Enter");
      await page.getByRole("alert").getByText("A title cannot be empty").waitFor();
      assert.equal(await titleOf(w, first), "Same prompt twice");
    });

    await t.step("Enter saves; the title reaches the other tab and is stored", async () => {
      await input.fill("  Fix the login bug  ");
      const form = await boxOf(input);
      assert.ok(form.width >= 300, `the title box is ${form.width} px wide`);
      await shot(page, "session-renaming");
      assert.deepEqual(await axeViolations(page), []);
      await input.press("Enter");
      await input.waitFor({ state: "detached" });
      await heading.getByText("Fix the login bug").waitFor();
      assert.equal(await page.title(), "Fix the login bug · baton");
      await tab2.page.locator(".session-title", { hasText: "Fix the login bug" }).waitFor();
      assert.equal(await titleOf(w, first), "Fix the login bug");
      // The titles no longer repeat: the other session goes back to its usual line.
      const sub = page.locator(".session-item", { hasText: "Same prompt twice" })
        .locator(".session-sub");
      await sub.getByText("just now").waitFor();
      assert.doesNotMatch(await sub.innerText(), /started/);
      await page.reload();
      await heading.getByText("Fix the login bug").waitFor();
    });

    await t.step("on a phone the session is renamed from its header as well", async () => {
      const phone = await newPage(w.browser, { viewport: PHONE, audit: true });
      const p = phone.page;
      await p.goto(`${w.relay.url}/session/${second}`);
      await signInUi(p, w.user);
      await p.locator(".topbar-title", { hasText: "Same prompt twice" }).waitFor();
      await p.getByRole("button", { name: "Rename session" }).click();
      const box = p.getByLabel("Session title");
      const b = await boxOf(box);
      assert.ok(b.x >= 0 && b.x + b.width <= PHONE.width, "the title box is on screen");
      assert.ok(b.width >= 200, `the title box is ${b.width} px wide`);
      await box.fill("Phone-named");
      await shot(p, "session-renaming-phone");
      assert.deepEqual(await axeViolations(p), []);
      await box.press("Enter");
      await p.locator(".topbar-title", { hasText: "Phone-named" }).waitFor();
      await tab2.page.locator(".session-title", { hasText: "Phone-named" }).waitFor();
      assert.equal(await overflowsSideways(p), false);
      assert.deepEqual(phone.errors, []);
    });
    assert.deepEqual(errors, []);
    assert.deepEqual(tab2.errors, []);
  });
});

Deno.test("on a phone, while the agent works, the message box keeps its width and the usage reads whole", async () => {
  await withWorld(async (w) => {
    const id = await spawn(w, "TWO-STEP please");
    await settled(w, id);
    const { page, errors } = await newPage(w.browser, { viewport: PHONE, audit: true });
    await page.goto(`${w.relay.url}/session/${id}`);
    await signInUi(page, w.user);
    await page.getByText("Ready.").waitFor();
    const box = page.locator("#composer-input");
    await box.fill("Go on");
    await box.press("Enter");
    await page.locator(".pill", { hasText: "working" }).waitFor();
    await page.getByText("slow3 ").waitFor();

    const area = await boxOf(box);
    assert.ok(area.width >= 220, `the message box is ${area.width} px wide`);
    // The "working" status is the header's widest: its actions still fit beside it.
    const end = await boxOf(page.locator(".session-head").getByRole("button", { name: /^End/ }));
    assert.ok(end.x + end.width <= PHONE.width - 8, "End is on screen while the agent works");
    for (const name of ["Steer", "Follow-up"]) {
      const b = await boxOf(page.getByRole("radio", { name }));
      assert.ok(b.x >= 0 && b.x + b.width <= PHONE.width, `${name} is on screen`);
    }
    for (const name of ["Send steer", "Stop the agent"]) {
      const b = await boxOf(page.getByRole("button", { name }));
      assert.ok(b.x + b.width <= PHONE.width && b.y + b.height <= PHONE.height, name);
    }
    const usage = page.locator(".usage");
    assert.match(await usage.innerText(), /^\d+ in · \d+ out · \$[\d.]+$/);
    assert.equal(await truncated(usage), false, "the usage is not cut");
    const u = await boxOf(usage);
    assert.ok(u.x >= 0 && u.x + u.width <= PHONE.width, "the usage is on screen");
    assert.equal(await overflowsSideways(page), false);
    await shot(page, "session-working-phone");
    assert.deepEqual(await axeViolations(page), []);

    await page.getByRole("button", { name: "Stop the agent" }).click();
    await page.locator(".pill", { hasText: "idle" }).waitFor();
    assert.deepEqual(errors, []);
  });
});
