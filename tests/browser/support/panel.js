// What the panel tests share: a session (scripted upstream + real host + fresh browser
// context), opening the panel with the token, sending, waiting for the reply to finish, and
// reading the conversation as the user sees it.

import { startHost, TOKEN } from './host.js';
import { DESKTOP } from './browser.js';
import { ScriptedUpstream, Turn } from './upstream.js';

export const SEED =
  'Create a directory at docs/intro and write an index.page file there with a page header and a short intro paragraph.';
export const PAGE =
  '# Introduction\n\nWelcome to the documentation. This section gives a short overview of the project and where to start.';
export const SEED_REPLY = 'Done! I created `docs/intro` and wrote `docs/intro/index.page`.';

export function seedTurns() {
  return [
    Turn.toolCalls([['call_mkdir', 'create_directory', { path: 'docs/intro' }]]),
    Turn.toolCalls([['call_write', 'write_text_content', { path: 'docs/intro/index.page', text: PAGE }]]),
    Turn.text(SEED_REPLY),
  ];
}

/**
 * Starts an upstream with `turns`, a host on it (or on `provider`, the body of its provider's
 * table) and a browser context; all are stopped when the test ends. With `responder`, the
 * upstream answers each request with `responder(body)` instead of `turns`. Page errors and console
 * errors (CSP violations among them) are collected.
 */
export async function session(t, browser, turns, { viewport = DESKTOP, provider, extra, responder } = {}) {
  const upstream = responder ? await ScriptedUpstream.responding(responder) : await ScriptedUpstream.start(turns);
  const host = await startHost(upstream, t.name, { provider, extra });
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  t.after(async () => {
    await context.close();
    await host.stop();
    await upstream.stop();
  });
  return { upstream, host, context, page, problems };
}

/** Opens the panel through a `#token=` link and waits until it has loaded. */
export async function openPanel(page, host) {
  await page.goto(`${host.url}/#token=${TOKEN}`);
  await page.waitForSelector('body[data-ready="true"]');
}

/** Types `text` into the composer and presses Enter. */
export async function send(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

/** Waits until the reply has ended: the typing dots are gone (the input stays on throughout). */
export async function waitIdle(page) {
  await page.waitForFunction(
    () => !document.getElementById('input').disabled && !document.querySelector('#thread .typing'),
    null,
    { timeout: 20000 },
  );
}

/** The conversation as shown: one entry per bubble, activity line, error or note. */
export async function transcript(page) {
  return page.$$eval('#thread > :not(#empty):not(.typing):not(.turn-actions):not(.undo-bar):not(.changes-card):not(.turn-rojo):not([hidden])', (items) =>
    items.map((e) => {
      if (e.classList.contains('activity')) {
        return {
          kind: 'tool',
          tool: e.querySelector('.act-name').textContent,
          args: e.querySelector('.act-args').textContent,
          status: e.dataset.status,
          label: e.querySelector('.act-status').textContent,
          open: e.querySelector('details').open,
        };
      }
      const kind = ['user', 'assistant', 'error', 'note'].find((k) => e.classList.contains(k));
      return { kind, text: e.textContent };
    }),
  );
}
