// A day's work in the panel, in real headless Chromium against the real `rojos` binary and a
// scripted upstream (docs/panel.md, "Approvals", "File changes", "Keyboard", "Provider
// banner"), at 390 px and 1280 px, light and dark, each screen axe-clean:
//
// - the approval box says what will happen ("Delete notes/old-draft.md (… B, last changed
//   …)?", a write's diff against the file now), the call's line says "waiting for your
//   approval" with no spinner and no typing dots, focus moves to the box and it is
//   announced; "Always allow" is listed under the input and "Ask again" takes it back;
// - after a turn a card lists the files created, modified, deleted and moved with +/− line
//   counts, each opening its diff (a delete: what went), the collapsed lines say
//   "modified +1 −1", and the files pane marks what the turn changed;
// - the first-run card shows the fix's commands to copy, no literal backticks; Escape closes
//   the files pane and stops a reply; Ctrl+Shift+O, Ctrl+K and `/`; the tab's title is the
//   conversation's; the top bar stays one row with Files open and nothing in it is cut.
// Screenshots go to test-output/browser/work-*.png.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { launch, PHONE, screenshot } from './support/browser.js';
import { assertAccessible } from './support/axe.js';
import { TOKEN } from './support/host.js';
import { openPanel, send, session, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

const WIDE = { width: 1280, height: 800 };
// Each screen at both widths, the phone dark and the laptop light (and every axe scan in both).
const SIZES = [['390 px, dark', PHONE, 'dark'], ['1280 px, light', WIDE, 'light']];

const CAREFUL = `
[rojos.careful]
provider = "scripted"
tools = "*"
approve = ["delete_path", "write_text_content"]
`;

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** axe in both colour schemes, ending in `scheme`. */
async function accessible(page, what, scheme) {
  for (const s of scheme === 'dark' ? ['light', 'dark'] : ['dark', 'light']) {
    await page.emulateMedia({ colorScheme: s });
    await assertAccessible(page, `${what} (${s})`);
  }
}

function seed(host, files) {
  const root = host.projectRoot('demo');
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  return root;
}

async function announcements(page) {
  return page.$$eval('#announcer p', (ps) => ps.map((p) => p.textContent));
}

/** Nothing in the top bar is cut or wraps: one row, each control showing all its text. */
async function topbarFits(page) {
  return page.evaluate(() => {
    const bar = document.querySelector('.topbar');
    const items = [...bar.children].filter((e) => e.offsetParent !== null && e.tagName !== 'DATALIST');
    const tops = new Set(items.map((e) => Math.round(e.getBoundingClientRect().top + e.getBoundingClientRect().height / 2)));
    const cut = [];
    for (const e of bar.querySelectorAll('button, input, select, h1')) {
      if (e.offsetParent === null) continue;
      if (e.scrollWidth > e.clientWidth + 1) cut.push(e.id || e.className);
    }
    const select = document.getElementById('rojo');
    const option = select.options[select.selectedIndex];
    const probe = document.createElement('span');
    probe.style.cssText = 'position:absolute;visibility:hidden;white-space:pre;font:' + getComputedStyle(select).font;
    probe.textContent = option ? option.textContent : '';
    document.body.append(probe);
    // The text plus the arrow and padding fits the picker.
    // A conversation's rojo shows in a label in the picker's place (checked below).
    const shown = !select.closest('.field').hidden;
    if (shown && probe.getBoundingClientRect().width + 28 > select.getBoundingClientRect().width) cut.push('rojo: ' + probe.textContent);
    const label = document.getElementById('conversation-rojo');
    if (!label.hidden && label.scrollWidth > label.clientWidth + 1) cut.push('label: ' + label.textContent);
    probe.remove();
    const project = document.getElementById('project');
    if (project.value && project.scrollWidth > project.clientWidth + 1) cut.push('project: ' + project.value);
    return { rows: tops.size, cut, overflow: document.documentElement.scrollWidth > window.innerWidth };
  });
}

for (const [size, viewport, scheme] of SIZES) {
  describe(`the panel at ${size}`, () => {
    test('the approval box says what will happen, takes focus, and always-allow can be taken back', async (t) => {
      const draft = 'old draft\nsecond line\nthird line\n';
      const { page, host, upstream, problems } = await session(t, browser, [
        Turn.toolCalls([['call_del', 'delete_path', { path: 'notes/old-draft.md' }]]),
        Turn.text('Deleted it.'),
        Turn.toolCalls([['call_w1', 'write_text_content', { path: 'a.txt', text: 'one\nTWO\nthree\n' }]]),
        Turn.text('Changed a.txt.'),
        Turn.toolCalls([['call_w2', 'write_text_content', { path: 'a.txt', text: 'one\n' }]]),
        Turn.text('Shortened a.txt.'),
      ], { viewport, extra: CAREFUL });
      await page.emulateMedia({ colorScheme: scheme });
      const root = seed(host, { 'notes/old-draft.md': draft, 'a.txt': 'one\ntwo\nthree\n' });
      await openPanel(page, host);
      await page.selectOption('#rojo', 'careful');
      // The picker shows the whole name of the rojo chosen.
      assert.deepEqual(await topbarFits(page), { rows: 1, cut: [], overflow: false });

      await send(page, 'delete the old draft');
      await page.waitForSelector('.approve-box', { timeout: 20000 });
      const line = page.locator('.activity[data-waiting="true"]');
      assert.equal(await line.locator('.act-status').textContent(), 'waiting for your approval');
      // Nothing runs: no spinner on the line, no typing dots, no "Running…".
      assert.equal(await line.locator('.act-icon').evaluate((e) => getComputedStyle(e, '::before').animationName), 'none');
      assert.equal(await page.isVisible('#thread .typing'), false);
      assert.doesNotMatch(await line.textContent(), /Running/);
      await page.waitForFunction(() => /\(\d+ B, last changed /.test(document.querySelector('.approve-title').textContent));
      assert.match(await page.textContent('.approve-title'), /^Delete notes\/old-draft\.md \(33 B, last changed (now|\d+ seconds? ago)\)\?$/);
      // Focus is on the box, which is named by its sentence and announced.
      assert.equal(await page.evaluate(() => document.activeElement.classList.contains('approve-box')), true);
      assert.ok((await announcements(page)).some((a) => a.startsWith('Waiting for your approval: Delete notes/old-draft.md')));
      // One Tab from the box to Approve.
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Approve');
      // What will be lost, one click away.
      await page.click('.approve-more > summary');
      await page.waitForSelector('.approve-more .diff');
      assert.deepEqual(
        await page.$$eval('.approve-more .diff-line', (rows) => rows.map((r) => r.textContent)),
        ['\u2212old draft', '\u2212second line', '\u2212third line'],
      );
      await screenshot(page, `work-approval-delete-${viewport.width}`);
      await accessible(page, 'approval box (delete)', scheme);
      await page.focus('.approve-yes');
      await page.keyboard.press('Enter');
      await waitIdle(page);
      assert.equal(fs.existsSync(path.join(root, 'notes/old-draft.md')), false);
      assert.equal(await page.isVisible('#always-allowed'), false);

      // A write shows its diff against the file as it is now; Always allow.
      await send(page, 'capitalise two');
      await page.waitForSelector('.approve-box .diff', { timeout: 20000 });
      assert.equal(await page.textContent('.approve-title'), 'Change a.txt (+1 \u22121 lines)?');
      assert.deepEqual(
        await page.$$eval('.approve-box .diff-line', (rows) => rows.map((r) => r.textContent)),
        [' one', '\u2212two', '+TWO', ' three'],
      );
      await accessible(page, 'approval box (write)', scheme);
      await page.click('.approve-always');
      await waitIdle(page);
      await page.waitForSelector('#always-allowed:not([hidden])');
      assert.match(await page.textContent('#always-allowed'), /write_text_content/);
      await screenshot(page, `work-always-allowed-${viewport.width}`);
      await accessible(page, 'always allowed', scheme);

      // Ask again: the list empties, on the server too, and the next write is asked about.
      await page.click('#always-allowed .allowed-revoke');
      await page.waitForSelector('#always-allowed', { state: 'hidden' });
      const id = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get('c'));
      const listed = await page.evaluate(async ([c, token]) => (await fetch(`/conversations/${c}/always-allowed`, {
        headers: { Authorization: `Bearer ${token}` },
      })).json(), [id, TOKEN]);
      assert.deepEqual(listed, { tools: [] });
      await send(page, 'shorten it');
      await page.waitForSelector('.approve-box', { timeout: 20000 });
      await page.click('.approve-yes');
      await waitIdle(page);
      assert.equal(fs.readFileSync(path.join(root, 'a.txt'), 'utf8'), 'one\n');
      upstream.assertConsumed?.();
      assert.deepEqual(problems, []);
    });

    test('a turn\'s file changes: a card with +/− counts and diffs, the lines say what changed, the files pane marks them', async (t) => {
      const { page, host, problems } = await session(t, browser, [
        Turn.toolCalls([
          ['c1', 'write_text_content', { path: 'new.md', text: 'fresh\nfile\n' }],
          ['c2', 'write_text_content', { path: 'keep.md', text: 'a\nB\nc\nd\n' }],
          ['c3', 'delete_path', { path: 'gone.md' }],
          ['c4', 'move_path', { from: 'old/name.md', to: 'new-name.md' }],
        ]),
        Turn.text('Reorganised.'),
      ], { viewport });
      await page.emulateMedia({ colorScheme: scheme });
      seed(host, { 'keep.md': 'a\nb\nc\n', 'gone.md': 'x\ny\nz\n', 'old/name.md': 'moved text\n' });
      await openPanel(page, host);
      await send(page, 'reorganise');
      await waitIdle(page);
      await page.waitForSelector('.changes-card');
      const items = () => page.$$eval('.changes-item', (all) => all.map((i) => [
        i.dataset.kind, i.querySelector('.change-path').textContent, (i.querySelector('.change-count') || { textContent: '' }).textContent,
      ]));
      assert.deepEqual(await items(), [
        ['created', 'new.md', '+2'],
        ['modified', 'keep.md', '+2 \u22121'],
        ['deleted', 'gone.md', '\u22123'],
        ['moved', 'old/name.md \u2192 new-name.md', ''],
      ]);
      assert.equal(await page.textContent('.changes-title'), '4 files changed');
      // The collapsed lines say what each call did.
      assert.deepEqual(
        await page.$$eval('#thread .activity .act-status', (s) => s.map((e) => e.textContent)),
        ['created +2', 'modified +2 \u22121', 'deleted \u22123', 'moved'],
      );
      // A delete opens to what went.
      await page.click('.changes-item[data-kind="deleted"] summary');
      await page.waitForSelector('.changes-item[data-kind="deleted"] .diff');
      assert.deepEqual(
        await page.$$eval('.changes-item[data-kind="deleted"] .diff-line', (r) => r.map((e) => e.textContent)),
        ['\u2212x', '\u2212y', '\u2212z'],
      );
      await page.click('.changes-item[data-kind="modified"] summary');
      await page.waitForSelector('.changes-item[data-kind="modified"] .diff');
      assert.deepEqual(
        await page.$$eval('.changes-item[data-kind="modified"] .diff-line', (r) => r.map((e) => e.textContent)),
        [' a', '\u2212b', '+B', ' c', '+d'],
      );
      await screenshot(page, `work-changes-${viewport.width}`);
      await accessible(page, 'file changes card', scheme);

      // The files pane marks what the turn changed.
      await page.click('#files-toggle');
      await page.waitForSelector('.files-item[data-path="new.md"]');
      await page.waitForSelector('.files-item[data-path="new.md"] .files-change');
      const marks = await page.$$eval('.files-item', (all) => all
        .map((b) => [b.dataset.path, (b.querySelector('.files-change') || { textContent: '' }).textContent])
        .filter(([, m]) => m));
      assert.deepEqual(marks.sort(), [['keep.md', 'modified'], ['new-name.md', 'moved'], ['new.md', 'created']]);
      await screenshot(page, `work-files-marked-${viewport.width}`);
      await accessible(page, 'files pane with marks', scheme);
      // Reopened: the same card.
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await page.waitForSelector('.changes-card');
      assert.equal((await items()).length, 4);
      assert.deepEqual(problems, []);
    });

    test('keys, Escape, the tab title and the top bar', async (t) => {
      const { page, host, problems } = await session(t, browser, [
        Turn.text('Hello there.'),
        Turn.text('a long answer that the user stops').chunkDelay(1500),
      ], { viewport });
      await page.emulateMedia({ colorScheme: scheme });
      await openPanel(page, host);
      assert.match(await page.textContent('#shortcuts'), /Shift\+O new chat .*K search .*\/ message .*Esc/);
      assert.equal(await page.title(), 'Rojos');
      await send(page, 'Say hello');
      await waitIdle(page);
      await page.waitForFunction(() => document.title === 'Say hello \u00B7 Rojos');

      // Files open: the top bar is one row and nothing in it is cut.
      await page.click('#files-toggle');
      await page.waitForSelector('#files-pane:not([hidden])');
      const fit = await topbarFits(page);
      assert.deepEqual(fit, { rows: 1, cut: [], overflow: false });
      await screenshot(page, `work-topbar-files-${viewport.width}`);
      await accessible(page, 'files open', scheme);
      // Escape closes it, from anywhere.
      await page.focus('#input');
      await page.keyboard.press('Escape');
      await page.waitForSelector('#files-pane', { state: 'hidden' });

      // Escape stops a reply.
      await send(page, 'Tell me a long story');
      await page.waitForFunction(() => (document.querySelectorAll('#thread .msg.assistant')[1]?.textContent || '').length > 0);
      await page.keyboard.press('Escape');
      await waitIdle(page);
      assert.equal(await page.$$eval('#thread .note', (n) => n.at(-1)?.textContent), 'Stopped.');

      // Ctrl+K: search; `/`: the input; Ctrl+Shift+O: a new chat.
      await page.keyboard.press('Control+K');
      await page.waitForFunction(() => document.activeElement.id === 'history-search');
      await page.keyboard.press('Escape'); // closes the drawer at phone width
      await page.click('#transcript');
      await page.keyboard.press('/');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'input');
      assert.equal(await page.inputValue('#input'), '');
      await page.keyboard.press('Control+Shift+O');
      await page.waitForFunction(() => !location.hash.includes('c=') && document.title === 'Rojos');
      assert.equal(await page.isVisible('#empty'), true);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'input');
      assert.deepEqual(problems, []);
    });

    test('the first-run card shows the fix with commands to copy, no backticks', async (t) => {
      const server = net.createServer();
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address();
      await new Promise((resolve) => server.close(resolve));
      const { page, host, context, problems } = await session(t, browser, [], {
        viewport,
        provider: `kind = "ollama"\nbase_url = "http://127.0.0.1:${port}/v1"`,
      });
      await context.grantPermissions(['clipboard-read', 'clipboard-write']);
      await page.emulateMedia({ colorScheme: scheme });
      await openPanel(page, host);
      await page.waitForSelector('#provider-banner:not([hidden]) .firstrun-command', { timeout: 20000 });
      const banner = await page.textContent('#provider-banner');
      assert.doesNotMatch(banner, /`/);
      assert.match(banner, new RegExp(`Ollama is not running at 127\\.0\\.0\\.1:${port}`));
      assert.deepEqual(
        await page.$$eval('.firstrun-code', (c) => c.map((e) => e.textContent)),
        ['ollama serve', 'ollama pull qwen2.5:7b'],
      );
      await page.click('.firstrun-copy');
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'ollama serve');
      await screenshot(page, `work-firstrun-${viewport.width}`);
      await accessible(page, 'first-run card', scheme);
      const fit = await topbarFits(page);
      assert.deepEqual(fit, { rows: 1, cut: [], overflow: false });
      assert.deepEqual(problems, []);
    });
  });
}
