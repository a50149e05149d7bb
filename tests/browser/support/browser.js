// Debian's Chromium (`/usr/bin/chromium`, or `$CHROMIUM`), headless, driven by playwright-core:
// no browser download. Playwright gives each launch a fresh temporary profile directory.

import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { OUTPUT } from './host.js';

export const DESKTOP = { width: 1100, height: 800 };
export const PHONE = { width: 390, height: 844 };

export async function launch() {
  const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(executablePath)) {
    throw new Error(`${executablePath} is missing: apt-get install -y chromium (.ci/run does it)`);
  }
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}

/** Saves a full-page screenshot as `test-output/browser/NAME.png`; returns its path. */
export async function screenshot(page, name) {
  fs.mkdirSync(OUTPUT, { recursive: true });
  const file = path.join(OUTPUT, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}
