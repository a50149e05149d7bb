// Accessibility and live status of the chat panel, in real headless Chromium against the real
// `rojos` binary: an axe-core scan of each screen (empty, streaming, finished, the token
// dialog, the dark theme, the phone) with no serious or critical violation; the announcer's
// text after a reply and a tool result; the token dialog holding the keyboard; aria-current
// on the open conversation; the phone's one-row top bar, whole placeholder and readable
// picker; the rojo's tools shown without hovering; and the live status of a 40 KB tool
// argument streamed slowly (docs/panel.md, "Accessibility" and "Live status").

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { assertAccessible } from './support/axe.js';
import { launch, PHONE, screenshot } from './support/browser.js';
import { TOKEN } from './support/host.js';
import { openPanel, SEED, seedTurns, send, session, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const LONG_REPLY = 'A reply that streams in slowly, a few words at a time, so the test can look at the ' +
  'screen while it is being written. '.repeat(8);

/** The announcer's lines, as a screen reader gets them. */
function announcements(page) {
  return page.$$eval('#announcer p', (items) => items.map((e) => e.textContent));
}

describe('accessibility', () => {
  test('the empty, streaming and finished screens pass axe, in light and dark', async (t) => {
    const turns = [...seedTurns(), Turn.text(LONG_REPLY).chunkDelay(60)];
    const { page, host, problems } = await session(t, browser, turns);
    await openPanel(page, host);
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await assertAccessible(page, `empty (${scheme})`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await screenshot(page, 'a11y-empty');

    await send(page, SEED);
    await waitIdle(page);
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      // The expanded line shows the arguments and the result in their own colours.
      await assertAccessible(page, `finished (${scheme})`);
    }
    await page.click('#thread .activity summary');
    await assertAccessible(page, 'finished, a line expanded (dark)');
    await screenshot(page, 'a11y-finished-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await screenshot(page, 'a11y-finished');

    await send(page, 'Tell me more.');
    // Mid-reply: some text shown, the Stop button up, the reply still coming.
    await page.waitForFunction(() => {
      const bubbles = document.querySelectorAll('#thread .msg.assistant');
      return bubbles.length === 2 && bubbles[1].textContent.length > 40;
    });
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await assertAccessible(page, `streaming (${scheme})`);
    }
    assert.equal(await page.isVisible('#stop'), true, 'the scans ran while the reply streamed');
    await page.emulateMedia({ colorScheme: 'light' });
    await screenshot(page, 'a11y-streaming');
    await waitIdle(page);
    assert.deepEqual(problems, []);
  });

  test('finished replies and tool results are announced once each, not token by token', async (t) => {
    const { page, host, problems } = await session(t, browser, seedTurns());
    await openPanel(page, host);
    assert.equal(await page.getAttribute('#announcer', 'aria-live'), 'polite');
    assert.equal(await page.getAttribute('#thread', 'role'), 'log');
    await send(page, SEED);
    await waitIdle(page);
    assert.deepEqual(await announcements(page), [
      'create_directory finished.',
      'write_text_content finished.',
      'The rojo replied: Done! I created `docs/intro` and wrote `docs/intro/index.page`.',
    ]);
    const box = await page.$eval('#announcer', (e) => e.getBoundingClientRect().toJSON());
    assert.ok(box.width <= 1 && box.height <= 1, `read, not shown: ${JSON.stringify(box)}`);
    assert.deepEqual(problems, []);
  });

  test('the token prompt is a modal dialog that keeps the keyboard and stays open on Escape', async (t) => {
    const { page, host, problems } = await session(t, browser, []);
    await page.goto(host.url + '/');
    await page.waitForSelector('#token-overlay[open]');
    const modal = await page.evaluate(() => {
      const dialog = document.getElementById('token-overlay');
      return { tag: dialog.tagName, modal: dialog.matches(':modal'), focus: document.activeElement.id };
    });
    assert.deepEqual(modal, { tag: 'DIALOG', modal: true, focus: 'token-input' });
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await assertAccessible(page, `token dialog (${scheme})`);
    }
    await screenshot(page, 'a11y-token-dialog-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await screenshot(page, 'a11y-token-dialog');

    // Tab and Shift+Tab go round the dialog's two controls and never leave it.
    const seen = [];
    for (const key of ['Tab', 'Tab', 'Tab', 'Shift+Tab', 'Shift+Tab', 'Shift+Tab']) {
      await page.keyboard.press(key);
      seen.push(await page.evaluate(() => {
        const inside = document.getElementById('token-overlay').contains(document.activeElement);
        return (inside ? '' : 'OUTSIDE ') + (document.activeElement.id || document.activeElement.tagName);
      }));
    }
    assert.deepEqual(seen, ['token-save', 'token-input', 'token-save', 'token-input', 'token-save', 'token-input']);

    // Escape, twice (Chromium closes on a second one without user activation): still open.
    await page.keyboard.press('Escape');
    await page.keyboard.press('Escape');
    // A close, if any, is an event a task later: let two frames pass, then it must be open
    // and modal again, with the keyboard in it.
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    await page.waitForFunction(() => document.getElementById('token-overlay').matches(':modal'), null, { timeout: 5000 });
    await page.waitForFunction(() => document.getElementById('token-overlay').contains(document.activeElement), null, { timeout: 5000 });

    await page.fill('#token-input', TOKEN);
    await page.press('#token-input', 'Enter');
    await page.waitForSelector('body[data-ready="true"]');
    assert.equal(await page.isVisible('#token-overlay'), false);
    assert.equal(await page.evaluate(() => document.activeElement.id), 'input');
    assert.deepEqual(problems, []);
  });

  test('the token-switch question passes axe and keeps the keyboard too', async (t) => {
    const { page, context, host, problems } = await session(t, browser, []);
    await openPanel(page, host);
    const other = await context.newPage();
    await other.goto(`${host.url}/#token=another-token`);
    await other.waitForSelector('#token-switch[open]');
    await assertAccessible(other, 'token-switch question');
    const seen = [];
    for (let i = 0; i < 3; i += 1) {
      await other.keyboard.press('Tab');
      seen.push(await other.evaluate(() => document.activeElement.id));
    }
    assert.deepEqual(seen, ['token-switch-use', 'token-keep', 'token-switch-use']);
    await other.keyboard.press('Escape');
    await other.waitForSelector('body[data-ready="true"]');
    assert.deepEqual(problems, []);
  });

  test('the open conversation is marked aria-current in the list', async (t) => {
    const { page, host, problems } = await session(t, browser, [Turn.text('First.'), Turn.text('Second.')]);
    await openPanel(page, host);
    await send(page, 'one');
    await waitIdle(page);
    await page.click('#new-chat');
    await send(page, 'two');
    await waitIdle(page);
    await page.waitForFunction(() => document.querySelectorAll('#history .history-item').length === 2);
    const current = () => page.$$eval('#history .history-item', (items) =>
      items.map((e) => [e.querySelector('.history-title').textContent, e.getAttribute('aria-current')]));
    assert.deepEqual(await current(), [['two', 'page'], ['one', null]]);
    await page.click('#history .history-item >> nth=1');
    await page.waitForFunction(() => document.querySelector('#thread .msg.assistant')?.textContent === 'First.');
    assert.deepEqual(await current(), [['two', null], ['one', 'page']]);
    await page.click('#new-chat');
    assert.deepEqual(await current(), [['two', null], ['one', null]]);
    assert.deepEqual(problems, []);
  });

  test('the rojo\'s tools show under the input without hovering, and follow the picker', async (t) => {
    const { page, host, problems } = await session(t, browser, []);
    await openPanel(page, host);
    const tools = () => page.evaluate(() => {
      const line = document.getElementById('rojo-tools');
      const box = line.getBoundingClientRect();
      return { text: line.textContent, shown: box.height > 0 && getComputedStyle(line).visibility === 'visible' };
    });
    assert.deepEqual(await tools(), {
      text: 'Tools: create_directory, delete_path, get_text_content, list_files, move_path, read_path_meta, write_text_content',
      shown: true,
    });
    await page.selectOption('#rojo', 'reader');
    assert.deepEqual(await tools(), { text: 'Tools: get_text_content, list_files, read_path_meta', shown: true });
    assert.deepEqual(problems, []);
  });

  test('at phone width the top bar is one row, the placeholder whole and the picker readable', async (t) => {
    const { page, host, problems } = await session(t, browser, seedTurns(), { viewport: PHONE });
    await openPanel(page, host);
    const layout = () => page.evaluate(() => {
      const box = (e) => e.getBoundingClientRect();
      const bar = document.querySelector('.topbar');
      const style = getComputedStyle(bar);
      const inner = box(bar).height - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom)
        - parseFloat(style.borderTopWidth) - parseFloat(style.borderBottomWidth);
      const items = [...bar.children].filter((e) => box(e).width > 0 && getComputedStyle(e).position !== 'absolute');
      const tallest = Math.max(...items.map((e) => box(e).height));
      const tops = new Set(items.map((e) => Math.round(box(e).top + box(e).height / 2)));
      const input = document.getElementById('input');
      const canvas = document.createElement('canvas').getContext('2d');
      const is = getComputedStyle(input);
      canvas.font = `${is.fontSize} ${is.fontFamily}`;
      const room = input.clientWidth - parseFloat(is.paddingLeft) - parseFloat(is.paddingRight);
      const select = document.getElementById('rojo');
      const ss = getComputedStyle(select);
      canvas.font = `${ss.fontSize} ${ss.fontFamily}`;
      const shown = select.options[select.selectedIndex].textContent;
      return {
        inner, tallest, rows: tops.size,
        right: Math.max(...items.map((e) => box(e).right)),
        placeholder: input.placeholder,
        placeholderFits: (() => { canvas.font = `${is.fontSize} ${is.fontFamily}`; return canvas.measureText(input.placeholder).width <= room; })(),
        picker: shown,
        // The select's own arrow takes about 20 px of its width.
        pickerFits: (() => { canvas.font = `${ss.fontSize} ${ss.fontFamily}`; return canvas.measureText(shown).width <= select.clientWidth - 20 - parseFloat(ss.paddingLeft); })(),
      };
    });
    const fit = await layout();
    assert.equal(fit.rows, 1, `one row of controls: ${JSON.stringify(fit)}`);
    assert.ok(fit.inner <= fit.tallest + 1, `the bar is as tall as its tallest control: ${JSON.stringify(fit)}`);
    assert.ok(fit.right <= PHONE.width, `nothing past the screen edge: ${JSON.stringify(fit)}`);
    assert.ok(fit.placeholderFits, `the placeholder is not cut: ${JSON.stringify(fit)}`);
    assert.equal(fit.picker, 'default');
    assert.ok(fit.pickerFits, `the rojo's name is not cut: ${JSON.stringify(fit)}`);
    assert.equal(await page.isVisible('#rojo-tools'), true);
    // The labels are still the fields' names for a screen reader.
    assert.equal(await page.getByRole('combobox', { name: 'Rojo', exact: true }).count(), 1);
    assert.equal(await page.getByRole('combobox', { name: 'Project', exact: true }).count(), 1);

    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      await assertAccessible(page, `phone (${scheme})`);
    }
    await page.emulateMedia({ colorScheme: 'light' });
    await screenshot(page, 'a11y-phone');
    await send(page, SEED);
    await waitIdle(page);
    await assertAccessible(page, 'phone, finished');
    await page.click('#toggle-sidebar');
    await page.waitForFunction(() => document.getElementById('sidebar').getBoundingClientRect().left >= 0);
    await assertAccessible(page, 'phone, conversations open');
    await screenshot(page, 'a11y-phone-finished');
    assert.deepEqual(problems, []);
  });
});

describe('live status', () => {
  test('a 40 KB argument streamed slowly shows its tool and a growing size before its call', async (t) => {
    const page40k = 'A line of the big page, long enough to count.\n'.repeat(900);
    const turns = [
      Turn.toolCalls([['call_big', 'write_text_content', { path: 'docs/big.page', text: page40k }]]).chunkDelay(1),
      Turn.text('Written.'),
    ];
    const { page, host, problems } = await session(t, browser, turns);
    await openPanel(page, host);
    await send(page, 'write the big page');

    const line = await page.waitForSelector('#thread .activity[data-phase="writing"]');
    const seen = () => line.evaluate((e) => ({
      tool: e.querySelector('.act-name').textContent,
      label: e.querySelector('.act-status').textContent,
      bytes: Number(e.dataset.bytes),
    }));
    const first = await seen();
    assert.equal(first.tool, 'write_text_content');
    assert.match(first.label, /^writing\u2026/);
    // The size grows while the arguments stream (polled; the stream takes several seconds).
    await page.waitForFunction((before) => {
      const e = document.querySelector('#thread .activity[data-phase="writing"]');
      return e && Number(e.dataset.bytes) > before && Number(e.dataset.bytes) > 2048;
    }, first.bytes, { timeout: 20000 });
    const later = await seen();
    assert.match(later.label, /^writing\u2026 \d+\.\d KB$/);
    assert.equal(await page.$$eval('#thread .activity', (e) => e.length), 1, 'one line, not one per event');
    await assertAccessible(page, 'live status');
    await screenshot(page, 'a11y-live-status');

    await waitIdle(page);
    // The same line became the call and then its result.
    assert.deepEqual(await line.evaluate((e) => ({
      connected: e.isConnected, phase: e.dataset.phase ?? null, status: e.dataset.status,
      label: e.querySelector('.act-status').textContent, args: e.querySelector('.act-args').textContent,
    })), {
      connected: true, phase: null, status: 'ok', label: 'ok',
      args: 'docs/big.page, text: "A line of the big page,\u2026"',
    });
    assert.equal(await page.$$eval('#thread .activity', (e) => e.length), 1);
    assert.deepEqual(problems, []);
  });
});
