// Approvals in real headless Chromium, against the real `rojos` binary and a scripted
// upstream (docs/panel.md, "Approvals"): a rojo whose writes need approval shows what the
// waiting call will do ("Create a.txt (1 line)?") with Approve / Always allow / Deny under its
// activity line; approving and
// denying (with a reason) by keyboard and by click; the buttons go and the line says what
// was decided; a reopened conversation shows the decision; the screen passes an axe scan.
// Screenshots go to test-output/browser/approvals-*.png.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { launch, screenshot } from './support/browser.js';
import { assertAccessible } from './support/axe.js';
import { openPanel, send, session, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

const CAREFUL = `
[rojos.careful]
provider = "scripted"
tools = "*"
approve = ["write_text_content"]
`;

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

function writeCall(id, file, text) {
  return Turn.toolCalls([[id, 'write_text_content', { path: file, text }]]);
}

/** Opens the panel on the `careful` rojo. */
async function openCareful(page, host) {
  await openPanel(page, host);
  await page.selectOption('#rojo', 'careful');
}

/** The waiting line's approval box, once shown. */
async function waitingBox(page) {
  await page.waitForSelector('.activity[data-waiting="true"] .approve-box', { timeout: 20000 });
  return page.locator('.activity[data-waiting="true"]');
}

/** The live region's announcements. */
async function announcements(page) {
  return page.$$eval('#announcer p', (ps) => ps.map((p) => p.textContent));
}

describe('approvals in the panel', () => {
  test('approve by keyboard, then deny with a reason by click; a reopened conversation shows both', async (t) => {
    const { page, host, upstream, problems } = await session(t, browser, [
      writeCall('call_a', 'a.txt', 'first'),
      Turn.text('Wrote a.txt.'),
      writeCall('call_b', 'b.txt', 'second'),
      Turn.text('I will not write b.txt.'),
    ], { extra: CAREFUL });
    const root = host.projectRoot('demo');
    await openCareful(page, host);
    await send(page, 'write a.txt');
    const line = await waitingBox(page);
    // The box says what will happen; the arguments stay one click away; nothing ran yet.
    assert.equal(await line.locator('details').evaluate((d) => d.open), false);
    await page.waitForFunction(() => document.querySelector('.approve-title').textContent === 'Create a.txt (1 line)?');
    // (panel-files.js shows a write's path and text in place of its raw arguments.)
    assert.equal(await line.locator('.act-written-path').textContent(), 'a.txt');
    assert.match(await line.locator('.act-body').textContent(), /first/);
    assert.equal(await line.locator('.act-status').textContent(), 'waiting for your approval');
    assert.equal(fs.existsSync(path.join(root, 'a.txt')), false);
    assert.ok((await announcements(page)).some((a) => a.startsWith('Waiting for your approval: Write a.txt (1 line)?')));
    await screenshot(page, 'approvals-waiting');
    await assertAccessible(page, 'approval waiting');

    // Keyboard: Tab reaches Approve, Enter presses it.
    await line.locator('.approve-yes').focus();
    await page.keyboard.press('Enter');
    await waitIdle(page);
    assert.equal(fs.readFileSync(path.join(root, 'a.txt'), 'utf8'), 'first');
    const first = page.locator('.activity').first();
    assert.equal(await first.locator('.approve-box').count(), 0, 'the buttons are gone');
    assert.equal(await first.locator('.act-approval').textContent(), 'approved');
    assert.equal(await first.getAttribute('data-status'), 'ok');

    // Click: Deny with a reason.
    await send(page, 'now b.txt');
    const second = await waitingBox(page);
    await second.locator('.approve-reason').fill('b.txt is generated');
    await screenshot(page, 'approvals-deny-reason');
    await second.locator('.approve-no').click();
    await waitIdle(page);
    const denied = page.locator('.activity').nth(1);
    assert.equal(await denied.locator('.act-approval').textContent(), 'denied: b.txt is generated');
    assert.equal(await denied.getAttribute('data-status'), 'error');
    assert.equal(fs.existsSync(path.join(root, 'b.txt')), false);
    const told = upstream.received[3].body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.deepEqual(told, ['{"ok":true}', 'error: denied by the user: b.txt is generated']);
    await screenshot(page, 'approvals-decided');

    // Reopened: the decisions are on the lines.
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    await page.click('#history li .history-title');
    await page.waitForSelector('.activity[data-approval="deny"]');
    const reopened = await page.$$eval('.activity .act-approval', (m) => m.map((e) => e.textContent));
    assert.deepEqual(reopened, ['approved', 'denied: b.txt is generated']);
    await screenshot(page, 'approvals-reopened');
    await assertAccessible(page, 'reopened conversation with approvals');
    assert.deepEqual(problems, []);
  });

  test('always allow by click, deny by keyboard (Enter in the reason)', async (t) => {
    const { page, host, problems } = await session(t, browser, [
      Turn.toolCalls([
        ['call_1', 'write_text_content', { path: 'one.txt', text: '1' }],
      ]),
      Turn.text('one done'),
      writeCall('call_2', 'two.txt', '2'),
      Turn.text('two done'),
      Turn.toolCalls([['call_3', 'create_directory', { path: 'd' }]]),
      Turn.text('dir done'),
    ], { extra: CAREFUL.replace('["write_text_content"]', '["write_text_content", "create_directory"]') });
    const root = host.projectRoot('demo');
    await openCareful(page, host);
    await send(page, 'one');
    const line = await waitingBox(page);
    await line.locator('.approve-always').click();
    await waitIdle(page);
    assert.equal(await page.locator('.activity .act-approval').first().textContent(), 'always allowed');

    // Not asked again for the same tool in this conversation.
    await send(page, 'two');
    await waitIdle(page);
    assert.equal(fs.readFileSync(path.join(root, 'two.txt'), 'utf8'), '2');
    assert.equal(await page.locator('.activity').nth(1).locator('.act-approval').count(), 0);

    // Another tool is asked; Enter in the reason field denies.
    await send(page, 'dir');
    const third = await waitingBox(page);
    await third.locator('.approve-reason').focus();
    await page.keyboard.type('no folders');
    await page.keyboard.press('Enter');
    await waitIdle(page);
    assert.equal(
      await page.locator('.activity').nth(2).locator('.act-approval').textContent(),
      'denied: no folders',
    );
    assert.equal(fs.existsSync(path.join(root, 'd')), false);
    assert.deepEqual(problems, []);
  });
});
