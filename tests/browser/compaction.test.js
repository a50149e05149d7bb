// "Earlier messages summarised" and search snippets in real headless Chromium, against the
// real `rojos` binary and a scripted upstream that answers each request from its content
// (read note.txt, then say what it is; a request for a summary gets one). A rojo told a small
// window (`context_tokens`) is driven past it: the marker appears live where the summary
// starts to stand for the older messages, expands to the summary, and is drawn at the same
// place when the conversation is reopened (GET /conversations/{id}/compactions). The sidebar's
// search shows each hit's snippet with the match marked, markup in it shown as text, and
// opening a hit outlines the message that matched. Both at
// 390 px and 1280 px, light and dark, axe clean. Screenshots go to
// test-output/browser/compaction-*.png and snippets-*.png.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { launch, PHONE, screenshot } from './support/browser.js';
import { assertAccessible } from './support/axe.js';
import { TOKEN } from './support/host.js';
import { openPanel, send, session, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

const WIDE = { width: 1280, height: 800 };

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const SUMMARY = 'The user asked **several times** what `note.txt` is about; it is a note about kettles.';

/** Reads note.txt for a user message, answers after the result, summarises when asked. */
function kettleResponder(body) {
  const messages = (body && body.messages) || [];
  const first = messages[0] || {};
  if (typeof first.content === 'string' && first.content.startsWith('You summarise')) return Turn.text(SUMMARY);
  const last = messages[messages.length - 1] || {};
  if (last.role === 'user') return Turn.toolCalls([['call_read', 'get_text_content', { path: 'note.txt' }]]);
  return Turn.text('It is a note about kettles.');
}

/** A rojo told a window small enough to be outgrown in a few messages. */
const SMALL = '\n[rojos.small]\nprovider = "scripted"\ntools = "*"\ncontext_tokens = 8192\n';

function seedNote(host) {
  const note = Array.from({ length: 160 }, (_, n) => `Line ${String(n).padStart(3, '0')}: kettles boil water for tea.\n`).join('');
  fs.writeFileSync(path.join(host.projectRoot('demo'), 'note.txt'), note);
}

async function apiGet(host, p) {
  const response = await fetch(host.url + p, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(response.status, 200, p);
  return response.json();
}

/** Every stored message of the conversation, page by page. */
async function stored(host, id) {
  const all = [];
  for (let from = 0; ;) {
    const response = await fetch(`${host.url}/conversations/${id}?from=${from}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    const page = await response.json();
    all.push(...page);
    const next = Number(response.headers.get('Rojos-Next-From') || NaN);
    if (!(next > from)) return all;
    from = next;
  }
}

/** Where each marker is: its `covers` and the text of the user bubble right after it. */
async function markers(page) {
  return page.$$eval('#thread .compaction', (all) => all.map((m) => {
    let next = m.nextElementSibling;
    while (next && !next.classList.contains('msg')) next = next.nextElementSibling;
    return {
      covers: Number(m.dataset.covers),
      open: m.open,
      title: m.querySelector('summary').textContent,
      before: next && next.classList.contains('user') ? next.dataset.text : null,
    };
  }));
}

/** Nothing in the thread reaches past the right edge of the screen. */
async function assertFits(page, width) {
  const right = await page.$$eval('#thread .compaction, #thread .compaction *', (all) =>
    Math.max(...all.map((e) => e.getBoundingClientRect().right)));
  assert.ok(right <= width, `the marker fits in ${width} px (right edge ${right})`);
}

for (const viewport of [PHONE, WIDE]) {
  describe(`long conversations at ${viewport.width} px`, () => {
    test('"Earlier messages summarised" appears live where the summary starts, and again when reopened', async (t) => {
      const { page, host, problems } = await session(t, browser, [], { viewport, extra: SMALL, responder: kettleResponder });
      seedNote(host);
      await openPanel(page, host);
      await page.selectOption('#rojo', 'small');
      let n = 0;
      for (; n < 30; n++) {
        await send(page, `Message ${n}: what is note.txt about?`);
        await waitIdle(page);
        if (await page.$('#thread .compaction')) break;
      }
      assert.ok(n < 30, 'the conversation was compacted');
      assert.equal(await page.locator('#thread .msg.error').count(), 0, 'every message was answered');
      // The live marker waits for nothing: it is there when the run ends, collapsed.
      await page.waitForFunction(() => document.querySelectorAll('#thread .compaction').length > 0);
      const id = new URLSearchParams((await page.evaluate(() => location.hash)).slice(1)).get('c');
      const kept = await apiGet(host, `/conversations/${id}/compactions`);
      assert.ok(kept.length >= 1, JSON.stringify(kept));
      const messages = await stored(host, id);
      const expected = kept.map((c) => ({
        covers: c.covers,
        open: false,
        title: `Earlier messages summarised${c.covers} messages above`,
        before: messages[c.covers].content,
      }));
      assert.deepEqual(await markers(page), expected, 'live: before the first message the summary does not cover');

      // Expanded, it shows the summary (markdown rendered as elements).
      await page.click('#thread .compaction summary');
      const body = page.locator('#thread .compaction .compaction-summary').first();
      await body.waitFor();
      assert.equal((await body.textContent()).trim(), SUMMARY.replace(/\*\*|`/g, ''));
      assert.equal(await body.locator('strong').textContent(), 'several times');
      await assertFits(page, viewport.width);
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await assertAccessible(page, `summarised, opened (${scheme}, ${viewport.width} px)`);
        await screenshot(page, `compaction-live-${viewport.width}-${scheme}`);
      }
      await page.emulateMedia({ colorScheme: 'light' });

      // Reopened (a reload shows the conversation in the address): the same markers, once each.
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await page.waitForSelector('#thread .compaction');
      assert.deepEqual(await markers(page), expected, 'reopened: at the same place');
      // Every stored message is still drawn: the summary stands beside them, not for them.
      assert.equal(await page.locator('#thread .msg.user').count(), n + 1);
      await page.click('#thread .compaction summary');
      await assertFits(page, viewport.width);
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await assertAccessible(page, `summarised, reopened (${scheme}, ${viewport.width} px)`);
        await screenshot(page, `compaction-reopened-${viewport.width}-${scheme}`);
      }
      assert.deepEqual(problems, []);
    });

    test('search hits show a snippet around the match, markup as text', async (t) => {
      const { page, host, problems } = await session(t, browser, [
        Turn.text('The spare kettle is in the <img src=x onerror="window.hacked=1"> drawer, under the towels, behind the old teapot and the jar of sugar.'),
        Turn.text('No idea where that is.'),
      ], { viewport });
      await openPanel(page, host);
      await send(page, 'Where is the spare one?');
      await waitIdle(page);
      await page.keyboard.press('Control+Shift+O'); // a new chat, at any width
      await send(page, 'And the teapot lid?');
      await waitIdle(page);
      if (viewport.width < 760) await page.click('#toggle-sidebar');
      await page.fill('#history-search', 'KETTLE');
      await page.waitForSelector('#history .history-snippet');
      const hits = await page.$$eval('#history .history-item', (items) => items.map((b) => ({
        title: b.querySelector('.history-title').textContent,
        snippet: b.querySelector('.history-snippet')?.textContent ?? null,
        mark: b.querySelector('.history-snippet mark')?.textContent ?? null,
      })));
      assert.deepEqual(hits, [{
        title: 'Where is the spare one?',
        snippet: 'The spare kettle is in the <img src=x onerror="window.hacked=1"> drawer,\u2026',
        mark: 'kettle',
      }]);
      assert.equal(await page.locator('#history img').count(), 0, 'markup in a snippet stays text');
      assert.equal(await page.evaluate(() => window.hacked), undefined);
      // Opening the hit shows the message that matched, outlined, in view.
      await page.click('#history .history-item');
      await page.waitForSelector('#thread .msg.found');
      assert.match(await page.textContent('#thread .msg.found'), /^The spare kettle/);
      assert.ok(await page.locator('#thread .msg.found').isVisible());
      if (viewport.width < 760) await page.click('#toggle-sidebar');
      // A hit by its title only (two characters search titles only) has no snippet line.
      await page.fill('#history-search', 'An');
      await page.waitForFunction(() => document.querySelectorAll('#history .history-item').length === 1
        && document.querySelector('#history .history-title').textContent === 'And the teapot lid?');
      assert.equal(await page.locator('#history .history-snippet').count(), 0);
      await page.fill('#history-search', 'teapot');
      await page.waitForFunction(() => document.querySelectorAll('#history .history-item').length === 2);
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await assertAccessible(page, `search snippets (${scheme}, ${viewport.width} px)`);
        await screenshot(page, `snippets-${viewport.width}-${scheme}`);
      }
      // The match is on a line shown, however long the text before it.
      const hidden = await page.$$eval('#history .history-snippet', (all) => all
        .filter((line) => line.querySelector('mark').getBoundingClientRect().bottom > line.getBoundingClientRect().bottom + 1)
        .map((line) => line.textContent));
      assert.deepEqual(hidden, [], 'every marked match is visible');
      const fit = await page.$$eval('#history .history-snippet', (all) => Math.max(...all.map((e) => e.getBoundingClientRect().right)));
      const side = await page.$eval('#sidebar', (e) => e.getBoundingClientRect().right);
      assert.ok(fit <= side, `snippets stay in the sidebar (${fit} > ${side})`);
      assert.deepEqual(problems, []);
    });
  });
}
