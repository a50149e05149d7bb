// The files pane in real headless Chromium, against the real `rojos` binary and a scripted
// upstream: a file written by a tool appears without a reload and opens with line numbers; a
// binary file shows the note; download gives the bytes; upload puts a file on disk, asks
// before replacing one and shows the server's reason for a refused name; hostile names and
// content stay text; invisible characters in names are shown (and downloaded) escaped; a write_text_content line shows the written text and opens the file in
// the pane. Screenshots (light, dark, phone) go to test-output/browser/.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { launch, PHONE, screenshot } from './support/browser.js';
import { assertAccessible } from './support/axe.js';
import { openPanel, PAGE, SEED, seedTurns, send, session, waitIdle } from './support/panel.js';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const item = (p) => `#files-tree .files-item[data-path="${p}"]`;

/** The file view's lines: [number, text] pairs. */
async function shownLines(page, scope = '#files-view-body') {
  return page.$$eval(`${scope} .files-line`, (rows) =>
    rows.map((r) => [r.querySelector('.files-ln').textContent, r.querySelector('.files-text').textContent]));
}

const pageLines = PAGE.split('\n').map((line, i) => [String(i + 1), line]);

async function openPane(page) {
  await page.click('#files-toggle');
  await page.waitForSelector('#files-pane:not([hidden])');
  assert.equal(await page.getAttribute('#files-toggle', 'aria-expanded'), 'true');
}

describe('the files pane', () => {
  test('a file written by a tool appears without a reload and opens with line numbers', async (t) => {
    const { page, host, problems } = await session(t, browser, seedTurns());
    await openPanel(page, host);
    await openPane(page);
    await page.waitForSelector('#files-tree .files-empty');
    assert.equal(await page.textContent('#files-tree .files-empty'), 'No files yet.');
    await page.evaluate(() => { window.notReloaded = true; });

    await send(page, SEED);
    await waitIdle(page);
    // The tool results refreshed the open pane: the new folder is listed.
    await page.waitForSelector(item('docs'), { timeout: 10000 });
    assert.equal(await page.evaluate(() => window.notReloaded), true, 'no reload');

    // Keyboard: folders are buttons; Enter opens them (lazily listed).
    await page.focus(item('docs'));
    await page.keyboard.press('Enter');
    await page.waitForSelector(item('docs/intro'));
    assert.equal(await page.getAttribute(item('docs'), 'aria-expanded'), 'true');
    await page.click(item('docs/intro'));
    await page.waitForSelector(item('docs/intro/index.page'));
    await page.focus(item('docs/intro/index.page'));
    await page.keyboard.press('Enter');
    await page.waitForSelector('#files-view-body .files-line');
    assert.equal(await page.textContent('#files-view-path'), 'docs/intro/index.page');
    assert.deepEqual(await shownLines(page), pageLines);
    // The numbers are not part of the text a user selects and copies.
    assert.equal(
      await page.$eval('#files-view-body .files-ln', (e) => getComputedStyle(e).userSelect),
      'none',
    );
    assert.equal(await page.getAttribute(item('docs/intro/index.page'), 'aria-current'), 'true');
    await screenshot(page, 'files-pane');
    await assertAccessible(page, 'files-pane');
    await page.emulateMedia({ colorScheme: 'dark' });
    await screenshot(page, 'files-pane-dark');
    await assertAccessible(page, 'files-pane-dark');
    await page.emulateMedia({ colorScheme: 'light' });

    // A folder made outside the chat shows after Refresh; a tool change refreshes by itself.
    fs.mkdirSync(path.join(host.projectRoot('demo'), 'later'));
    await page.click('#files-refresh');
    await page.waitForSelector(item('later'));

    // The pane stays open across a reload.
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    await page.waitForSelector(`#files-pane:not([hidden]) ${item('later')}`);
    assert.equal(await page.getAttribute('#files-toggle', 'aria-expanded'), 'true');
    assert.deepEqual(problems, []);
  });

  test('a binary file shows a note, and download gives its bytes', async (t) => {
    const { page, host, problems } = await session(t, browser, []);
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0xff, 0x0a]);
    fs.writeFileSync(path.join(host.projectRoot('demo'), 'logo.png'), bytes);
    await openPanel(page, host);
    await openPane(page);
    await page.click(item('logo.png'));
    await page.waitForSelector('#files-view-body .files-note');
    assert.equal(
      await page.textContent('#files-view-body .files-note'),
      "'logo.png' contains a NUL byte at offset 4: it is binary (or UTF-16), not UTF-8 text; "
        + 'download it to open it elsewhere',
    );
    assert.equal(await page.$$eval('#files-view-body .files-line', (l) => l.length), 0);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click('#files-download'),
    ]);
    assert.equal(download.suggestedFilename(), 'logo.png');
    assert.deepEqual(fs.readFileSync(await download.path()), bytes);
    await screenshot(page, 'files-binary-note');
    await assertAccessible(page, 'files-binary-note');
    assert.deepEqual(problems, []);
  });

  test('an upload puts the file on disk, asks before replacing, and shows refusals', async (t) => {
    const { page, host, problems } = await session(t, browser, []);
    const root = host.projectRoot('demo');
    fs.mkdirSync(path.join(root, 'docs'));
    await openPanel(page, host);
    await openPane(page);
    // Choosing a folder makes it the upload's target.
    await page.click(item('docs'));
    assert.equal(await page.textContent('#files-target'), 'docs/');
    await page.setInputFiles('#files-upload', {
      name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('first\nsecond\n'),
    });
    await page.waitForSelector('#files-message[data-kind="ok"]');
    assert.equal(await page.textContent('#files-message'), 'Uploaded docs/notes.txt.');
    assert.equal(fs.readFileSync(path.join(root, 'docs/notes.txt'), 'utf8'), 'first\nsecond\n');
    await page.waitForSelector(item('docs/notes.txt'));

    // The same name again: nothing is replaced until the user says so.
    await page.setInputFiles('#files-upload', {
      name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('replaced\n'),
    });
    await page.waitForSelector('#files-message .files-replace');
    assert.equal(
      await page.textContent('#files-message .files-message-text'),
      'notes.txt already exists in docs/.',
    );
    assert.equal(fs.readFileSync(path.join(root, 'docs/notes.txt'), 'utf8'), 'first\nsecond\n');
    await page.click('#files-message .files-replace');
    await page.waitForSelector('#files-message[data-kind="ok"]');
    assert.equal(fs.readFileSync(path.join(root, 'docs/notes.txt'), 'utf8'), 'replaced\n');

    // A name the tools could not create either: the server's reason is shown.
    await page.setInputFiles('#files-upload', {
      name: 'bad\\name.txt', mimeType: 'text/plain', buffer: Buffer.from('x'),
    });
    await page.waitForSelector('#files-message[data-kind="error"]');
    const refusal = await page.textContent('#files-message');
    assert.equal(
      refusal,
      "Not uploaded: 'docs/bad\\name.txt' contains a backslash: separate folders with '/' "
        + '(a backslash is never a separator here)',
    );
    assert.deepEqual(fs.readdirSync(path.join(root, 'docs')), ['notes.txt']);
    await screenshot(page, 'files-upload-refused');
    await assertAccessible(page, 'files-upload-refused');
    // The refused requests themselves are logged by Chromium; nothing else went wrong.
    const expected = /Failed to load resource: the server responded with a status of (409|400) /;
    assert.deepEqual(problems.filter((p) => !expected.test(p)), []);
  });

  test('hostile file names and content are shown as text', async (t) => {
    const { page, host, problems } = await session(t, browser, []);
    const name = '<img src=x onerror=window.pwned=1>.txt';
    const content = '<script>window.pwned=2</script>\n<img src=x onerror="window.pwned=3">\n';
    fs.writeFileSync(path.join(host.projectRoot('demo'), name), content);
    await openPanel(page, host);
    await openPane(page);
    await page.click(`#files-tree .files-item.file >> text=${name}`);
    await page.waitForSelector('#files-view-body .files-line');
    assert.equal(await page.textContent('#files-view-path'), name);
    assert.deepEqual(await shownLines(page), [
      ['1', '<script>window.pwned=2</script>'],
      ['2', '<img src=x onerror="window.pwned=3">'],
    ]);
    assert.equal(await page.$$eval('#files-pane img, #files-pane script', (e) => e.length), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.deepEqual(problems, []);
  });

  test('invisible characters in names are shown escaped, and downloaded escaped', async (t) => {
    const { page, host, problems } = await session(t, browser, []);
    // A right-to-left override would make `invoice\u202etxt.exe` read as `invoiceexe.txt`.
    const name = 'invoice\u202etxt.exe';
    const shown = 'invoice\\u{202e}txt.exe';
    fs.writeFileSync(path.join(host.projectRoot('demo'), name), 'MZ');
    fs.writeFileSync(path.join(host.projectRoot('demo'), 'zero\u200bwidth.md'), '# z\n');
    await openPanel(page, host);
    await openPane(page);
    await page.waitForSelector(item(name));
    const names = await page.$$eval('#files-tree .files-name', (e) => e.map((n) => n.textContent));
    assert.deepEqual(names, [shown, 'zero\\u{200b}width.md']);
    await page.click(item(name));
    await page.waitForSelector('#files-view-body .files-line');
    assert.equal(await page.textContent('#files-view-path'), shown);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click('#files-download'),
    ]);
    const saved = download.suggestedFilename();
    assert.ok(!saved.includes('\u202e'), `the saved name holds the override: ${saved}`);
    assert.ok(saved.endsWith('u{202e}txt.exe'), saved);
    assert.deepEqual(fs.readFileSync(await download.path()), Buffer.from('MZ'));
    assert.deepEqual(problems, []);
  });

  test('a write line shows the written text and opens the file in the pane', async (t) => {
    const { page, host, problems } = await session(t, browser, seedTurns());
    await openPanel(page, host);
    await send(page, SEED);
    await waitIdle(page);
    const write = page.locator('#thread .activity').nth(1);
    await write.locator('summary').click();
    assert.equal(await write.locator('.act-written-path').textContent(), 'docs/intro/index.page');
    assert.deepEqual(
      await write.locator('.act-written-text .files-line').evaluateAll((rows) =>
        rows.map((r) => [r.querySelector('.files-ln').textContent, r.querySelector('.files-text').textContent])),
      pageLines,
    );
    // The text, not its JSON string.
    assert.equal(await write.locator('.act-args-full').count(), 0);
    await screenshot(page, 'files-write-line');
    await assertAccessible(page, 'files-write-line');

    assert.equal(await page.isHidden('#files-pane'), true);
    await write.locator('.files-open-link').click();
    await page.waitForSelector('#files-pane:not([hidden]) #files-view-body .files-line');
    assert.equal(await page.textContent('#files-view-path'), 'docs/intro/index.page');
    assert.deepEqual(await shownLines(page), pageLines);
    // The folders on its way are open in the tree, and the file is marked.
    await page.waitForSelector(`${item('docs/intro/index.page')}[aria-current="true"]`);
    assert.deepEqual(problems, []);
  });

  test('at phone width the pane covers the chat and closes back to it', async (t) => {
    const { page, host, problems } = await session(t, browser, [], { viewport: PHONE });
    fs.writeFileSync(path.join(host.projectRoot('demo'), 'README.md'), '# Demo\n\nHello.\n');
    await openPanel(page, host);
    await openPane(page);
    await page.click(item('README.md'));
    await page.waitForSelector('#files-view-body .files-line');
    const box = await page.$eval('#files-pane', (e) => e.getBoundingClientRect().toJSON());
    assert.equal(Math.round(box.width), PHONE.width);
    assert.equal(Math.round(box.x), 0);
    await screenshot(page, 'files-pane-phone');
    await assertAccessible(page, 'files-pane-phone');
    await page.click('#files-close');
    assert.equal(await page.isHidden('#files-pane'), true);
    assert.equal(await page.evaluate(() => document.activeElement.id), 'files-toggle');
    assert.deepEqual(problems, []);
  });
});
