/**
 * A real Chromium (Debian's /usr/bin/chromium) driven by playwright-core.
 *
 * @module
 */
import axe from "axe-core";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";

/** Where Debian installs Chromium; override with BATON_CHROMIUM. */
export const CHROMIUM = Deno.env.get("BATON_CHROMIUM") ?? "/usr/bin/chromium";

/** Starts a headless Chromium. */
export async function launchBrowser(): Promise<Browser> {
  return await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
  });
}

/** Viewports the UI is checked at. */
export const PHONE = { width: 360, height: 740 };
export const DESKTOP = { width: 1280, height: 800 };

/**
 * A fresh page (own cookies) at `viewport`, in the given colour scheme, that
 * records uncaught page errors and dialogs so tests can assert there were none.
 */
export async function newPage(
  browser: Browser,
  options: {
    viewport?: { width: number; height: number };
    dark?: boolean;
    /** Let {@linkcode axeViolations} inject axe-core past the app's CSP. */
    audit?: boolean;
  } = {},
): Promise<{ page: Page; errors: string[]; dialogs: string[] }> {
  const context = await browser.newContext({
    viewport: options.viewport ?? DESKTOP,
    colorScheme: options.dark ? "dark" : "light",
    deviceScaleFactor: 1,
    ...(options.audit ? { bypassCSP: true } : {}),
    ...(options.viewport === PHONE ? { isMobile: true, hasTouch: true } : {}),
  });
  const page = await context.newPage();
  const errors: string[] = [];
  const dialogs: string[] = [];
  page.on("pageerror", (err) => errors.push(String(err)));
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  return { page, errors, dialogs };
}

/** Signs in on the app's sign-in screen and waits for the app. */
export async function signInUi(page: Page, who: { email: string; password: string }) {
  await page.getByLabel("Email").fill(who.email);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForSelector(".sidebar");
}

/**
 * The WCAG 2 A and AA violations axe-core finds on the page as it is now, one
 * line each (rule and elements). The page needs `newPage(…, { audit: true })`.
 */
export async function axeViolations(page: Page): Promise<string[]> {
  if (!await page.evaluate("typeof axe !== 'undefined'")) {
    await page.addScriptTag({ content: (axe as unknown as { source: string }).source });
  }
  return await page.evaluate(`
    axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa"] } })
      .then((r) => r.violations.map((v) =>
        v.id + ": " + v.nodes.map((n) => n.target.join(" ")).join(" | ")))
  `) as string[];
}

const SHOTS = Deno.env.get("BATON_TEST_SHOTS");

/** Keeps a screenshot of the page in light and dark when BATON_TEST_SHOTS names a folder. */
export async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await Deno.mkdir(SHOTS, { recursive: true });
  for (const colorScheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme });
    await page.screenshot({ path: join(SHOTS, `${name}-${colorScheme}.png`) });
  }
  await page.emulateMedia({ colorScheme: "light" });
}
