// The README's picture of the chat panel, `docs/panel.png`: the real `rojos` binary and the
// browser tests' scripted upstream, one chat that creates a folder and writes a page, in
// headless Chromium at 1100 x 800. Run it after `cargo build --workspace` and `npm ci` here:
//
//   node tests/browser/screenshot.js [OUT.png]

import path from 'node:path';

import { DESKTOP, launch } from './support/browser.js';
import { ROOT } from './support/host.js';
import { openPanel, SEED, seedTurns, send, session, waitIdle } from './support/panel.js';

const out = path.resolve(process.argv[2] || path.join(ROOT, 'docs', 'panel.png'));
const cleanups = [];
// `session` takes a test's context: a name for the host's log and a place for the clean-ups.
const context = { name: 'readme-screenshot', after: (cleanup) => cleanups.push(cleanup) };

const browser = await launch();
try {
  const { page, host } = await session(context, browser, seedTurns(), { viewport: DESKTOP });
  await openPanel(page, host);
  await send(page, SEED);
  await waitIdle(page);
  await page.emulateMedia({ colorScheme: 'light' });
  await page.screenshot({ path: out });
  console.log(`wrote ${out}`);
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await browser.close();
}
