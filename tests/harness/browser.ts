/**
 * A real Chromium (Debian's /usr/bin/chromium) driven by playwright-core.
 *
 * @module
 */
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
  options: { viewport?: { width: number; height: number }; dark?: boolean } = {},
): Promise<{ page: Page; errors: string[]; dialogs: string[] }> {
  const context = await browser.newContext({
    viewport: options.viewport ?? DESKTOP,
    colorScheme: options.dark ? "dark" : "light",
    deviceScaleFactor: 1,
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
