// Undo of a turn's file changes in real headless Chromium, against the real `rojos` binary
// and a scripted upstream: a turn that wrote a file gets "Undo file changes" (only the last
// turn not yet undone offers it); undoing after the file was edited by hand shows the
// server's refusal naming the file and an "Undo anyway" choice, which puts the earlier bytes
// back; the turn then says "File changes undone", the turn before offers its own undo, and a
// reopened conversation shows the same, with each undo's record in the history ("File
// changes undone: … The rojo was told.") and the undone calls marked. At 390 px and 1280 px;
// each screen passes the axe scan, in light and dark. Screenshots go to
// test-output/browser/undo-*.png.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { launch, PHONE, screenshot } from './support/browser.js';
import { assertAccessible } from './support/axe.js';
import { openPanel, send, session, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const WIDE = { width: 1280, height: 800 };

/** axe on the screen `name`, in light and dark (ending in light). */
async function accessible(page, name) {
  for (const scheme of ['dark', 'light']) {
    await page.emulateMedia({ colorScheme: scheme });
    await assertAccessible(page, `${name} (${scheme})`);
  }
}

/** The undo records in the thread, and how many tool lines say they were undone. */
async function undone(page) {
  return {
    records: await page.$$eval('#thread .undo-record', (all) => all.map((e) => e.textContent)),
    lines: await page.$$eval('#thread .activity.undone', (all) => all.length),
  };
}

/** Waits until the thread shows these undo records and this many undone lines at once. */
async function waitUndone(page, records, lines) {
  const want = JSON.stringify({ records, lines });
  await page.waitForFunction(
    (w) => JSON.stringify({
      records: [...document.querySelectorAll('#thread .undo-record')].map((e) => e.textContent),
      lines: document.querySelectorAll('#thread .activity.undone').length,
    }) === w,
    want,
    { timeout: 10000 },
  ).catch(async () => assert.deepEqual(await undone(page), { records, lines }));
}

const write = (id, text) => Turn.toolCalls([[id, 'write_text_content', { path: 'notes.txt', text }]]);

/** The undo bars as shown: [changed files, state text or button label] per bar. */
async function bars(page) {
  return page.$$eval('#thread .undo-bar', (all) => all.map((b) => [
    b.querySelector('.undo-paths').textContent,
    (b.querySelector('.undo-state') || b.querySelector('.undo-button') || { textContent: '' }).textContent,
  ]));
}

async function waitBars(page, want) {
  await page.waitForFunction(
    (w) => JSON.stringify([...document.querySelectorAll('#thread .undo-bar')].map((b) => [
      b.querySelector('.undo-paths').textContent,
      (b.querySelector('.undo-state') || b.querySelector('.undo-button') || { textContent: '' }).textContent,
    ])) === w,
    JSON.stringify(want),
    { timeout: 10000 },
  ).catch(async () => assert.deepEqual(await bars(page), want));
}

describe('undo of file changes', () => {
  for (const [size, viewport] of [['390px', PHONE], ['1280px', WIDE]]) {
    test(`a refused undo can be forced, turns say they were undone, and a reopened conversation shows it (${size})`, async (t) => {
      const { page, host, problems } = await session(t, browser, [
        write('call_1', 'first version\nkept line\n'),
        Turn.text('Wrote the first version.'),
        write('call_2', 'second version\nkept line\nmore\n'),
        Turn.text('Wrote the second version.'),
      ], { viewport });
      const file = path.join(host.projectRoot('demo'), 'notes.txt');
      fs.writeFileSync(file, 'my own notes\n');
      const firstVersion = 'first version\nkept line\n';
      await openPanel(page, host);

      await send(page, 'Write the first version');
      await waitIdle(page);
      await waitBars(page, [['Changed files: notes.txt', 'Undo file changes']]);
      await send(page, 'Write the second version');
      await waitIdle(page);
      // Only the last turn offers undo: the server undoes runs last first.
      await waitBars(page, [
        ['Changed files: notes.txt', ''],
        ['Changed files: notes.txt', 'Undo file changes'],
      ]);
      // The bar sits after its turn's reply, before the next user message.
      const order = await page.$$eval('#thread > .msg.user, #thread > .undo-bar', (all) => all.map((e) => e.className));
      assert.deepEqual(order, ['msg user', 'undo-bar', 'msg user', 'undo-bar']);
      // The second turn's write line expands to a line diff against the file before that turn.
      await page.click('#thread .activity >> nth=1 >> summary');
      await page.waitForSelector('#thread .activity >> nth=1 >> .diff');
      const diff = await page.$$eval('#thread .activity', (lines) => [...lines[1].querySelectorAll('.diff-line')]
        .map((r) => r.className.replace('diff-line ', '') + ' ' + r.textContent));
      assert.deepEqual(diff, [
        'diff-del \u2212first version',
        'diff-add +second version',
        'diff-same  kept line',
        'diff-add +more',
      ]);
      await screenshot(page, `undo-offered-${size}`);
      await page.emulateMedia({ colorScheme: 'dark' });
      await screenshot(page, `undo-offered-${size}-dark`);
      await accessible(page, `undo-offered-${size}`);

      fs.writeFileSync(file, 'edited by hand\n');
      await page.click('#thread .undo-bar >> nth=1 >> .undo-button');
      await page.waitForSelector('#thread .undo-refusal');
      const refusal = await page.textContent('#thread .undo-refusal .undo-message');
      assert.match(refusal, /'notes\.txt' changed since this run/);
      assert.equal(fs.readFileSync(file, 'utf8'), 'edited by hand\n', 'nothing undone yet');
      await screenshot(page, `undo-refused-${size}`);
      await accessible(page, `undo-refused-${size}`);

      await page.focus('#thread .undo-force');
      await page.keyboard.press('Enter');
      await waitBars(page, [
        ['Changed files: notes.txt', 'Undo file changes'],
        ['Changed files: notes.txt', 'File changes undone'],
      ]);
      assert.equal(fs.readFileSync(file, 'utf8'), firstVersion);

      await page.click('#thread .undo-bar >> nth=0 >> .undo-button');
      await waitBars(page, [
        ['Changed files: notes.txt', 'File changes undone'],
        ['Changed files: notes.txt', 'File changes undone'],
      ]);
      assert.equal(fs.readFileSync(file, 'utf8'), 'my own notes\n');
      // Each undo left its record in the history, and both turns' calls say "undone".
      const record = 'File changes undone: notes.txt. The rojo was told.';
      await waitUndone(page, [record, record], 2);
      await screenshot(page, `undo-done-${size}`);
      await accessible(page, `undo-done-${size}`);

      // A reload opens the conversation again from the page's address.
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await waitUndone(page, [record, record], 2);
      await waitBars(page, [
        ['Changed files: notes.txt', 'File changes undone'],
        ['Changed files: notes.txt', 'File changes undone'],
      ]);
      // Reopened from the sidebar on a page that starts with an empty chat, so what is read
      // is what the reopening drew, not the screen before it.
      await page.goto(`${host.url}/`);
      await page.waitForSelector('body[data-ready="true"]');
      assert.deepEqual(await undone(page), { records: [], lines: 0 });
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.click('#history .history-item >> nth=0');
      await waitUndone(page, [record, record], 2);
      await waitBars(page, [
        ['Changed files: notes.txt', 'File changes undone'],
        ['Changed files: notes.txt', 'File changes undone'],
      ]);
      await page.emulateMedia({ colorScheme: 'dark' });
      await screenshot(page, `undo-reopened-${size}-dark`);
      await accessible(page, `undo-reopened-${size}`);
      // The one refused undo is the only failed request.
      const expected = /Failed to load resource: the server responded with a status of 409 /;
      assert.deepEqual(problems.filter((p) => !expected.test(p)), []);
      assert.equal(problems.length, 1, problems.join('\n'));
    });
  }
});
