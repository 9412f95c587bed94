/**
 * Debian's headless Chromium (/usr/bin/chromium; scripts/test.sh installs it) driven by
 * playwright-core, for the report page's browser tests. A page opened here records every console
 * error, uncaught script error and non-file request in `errors`: a report page is self-contained.
 */
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM = process.env.DGCL_CHROMIUM ?? '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: scripts/test.sh installs Debian's chromium (apt-get install chromium)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    // The machine has no network but the package registries: no background connections.
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Open the report file at `file` in a new page; resolves on load, when the inline page script has run (or thrown, into `errors`). */
export async function openReport(browser: Browser, file: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (req) => {
    if (!req.url().startsWith('file:')) errors.push(`request to ${req.url()}`);
  });
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  return { page, errors };
}
