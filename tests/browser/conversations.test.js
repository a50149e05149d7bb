// Managing conversations in real headless Chromium, against the real `rojos` binary and a
// scripted upstream: rename, search and delete from the sidebar (with the confirmation
// dialog), Regenerate and Edit, drafting while a reply streams, the typed text kept after
// every kind of failure, and a reopened conversation drawn as it was live (an error, a stop).
// Screenshots go to test-output/browser/conversations-*.png.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { launch, screenshot } from './support/browser.js';
import { assertAccessible } from './support/axe.js';
import { TOKEN } from './support/host.js';
import { openPanel, send, session, transcript, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The sidebar's titles, top to bottom. */
async function titles(page) {
  return page.$$eval('#history .history-title', (t) => t.map((e) => e.textContent));
}

/** Waits until the sidebar shows exactly `expected`. */
async function waitTitles(page, expected) {
  await page.waitForFunction(
    (want) => JSON.stringify([...document.querySelectorAll('#history .history-title')].map((e) => e.textContent)) === want,
    JSON.stringify(expected),
    { timeout: 10000 },
  );
}

/** Opens the "⋯" menu of the sidebar entry titled `title`. */
async function openMenu(page, title) {
  const row = page.locator('#history li', { has: page.locator('.history-title', { hasText: title }) });
  await row.locator('.history-menu-btn').click();
  return row;
}

/** `GET path` on the host with the all-projects token. */
async function apiGet(host, path) {
  return fetch(host.url + path, { headers: { Authorization: `Bearer ${TOKEN}` } });
}

/** The user and assistant texts the upstream received in request `n`. */
function sentTexts(upstream, n) {
  return upstream.received[n].body.messages
    .filter((m) => m.role !== 'system')
    .map((m) => `${m.role}: ${m.content}`);
}

async function newChat(page, text) {
  await page.click('#new-chat');
  await send(page, text);
  await waitIdle(page);
}

describe('managing conversations', () => {
  test('rename, search and delete from the sidebar', async (t) => {
    const { page, host, problems } = await session(t, browser, [
      Turn.text('It is at the top of the repository.'),
      Turn.text('Cats sleep a lot.'),
      Turn.text('Noted.'),
    ]);
    await openPanel(page, host);
    await send(page, 'Where is the README?');
    await waitIdle(page);
    await newChat(page, 'Tell me about cats');
    await newChat(page, 'Unrelated question');
    await waitTitles(page, ['Unrelated question', 'Tell me about cats', 'Where is the README?']);

    // Rename inline: the title becomes an input; Enter saves.
    await openMenu(page, 'Tell me about cats');
    assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Rename');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#history .history-rename-input');
    assert.equal(await page.inputValue('#history .history-rename-input'), 'Tell me about cats');
    await page.fill('#history .history-rename-input', 'x'.repeat(81));
    await page.press('#history .history-rename-input', 'Enter');
    await page.waitForSelector('#history .history-rename-error:not([hidden])');
    assert.equal(
      await page.textContent('#history .history-rename-error'),
      'invalid title: it is longer than 80 characters (81); shorten it',
    );
    await page.fill('#history .history-rename-input', 'Feline notes');
    await screenshot(page, 'conversations-rename');
    await assertAccessible(page, 'conversations-rename');
    await page.press('#history .history-rename-input', 'Enter');
    await waitTitles(page, ['Unrelated question', 'Feline notes', 'Where is the README?']);
    const listed = await (await apiGet(host, '/conversations?projectId=demo')).json();
    assert.deepEqual(listed.map((c) => c.title), ['Unrelated question', 'Feline notes', 'Where is the README?']);
    // Escape cancels a rename.
    await openMenu(page, 'Feline notes');
    await page.keyboard.press('Enter');
    await page.fill('#history .history-rename-input', 'never saved');
    await page.keyboard.press('Escape');
    await waitTitles(page, ['Unrelated question', 'Feline notes', 'Where is the README?']);

    // Search: titles and message text, ignoring case; the list is filtered through the API.
    await page.fill('#history-search', 'readme');
    await waitTitles(page, ['Where is the README?']);
    await page.fill('#history-search', 'FELINE');
    await waitTitles(page, ['Feline notes']);
    await page.fill('#history-search', 'sleep a lot');
    await waitTitles(page, ['Feline notes']);
    await page.fill('#history-search', 'nothing like this');
    await waitTitles(page, []);
    assert.equal(await page.textContent('#history-note'), 'No conversation matches \u201Cnothing like this\u201D.');
    await screenshot(page, 'conversations-search');
    await assertAccessible(page, 'conversations-search');
    await page.fill('#history-search', '');
    await waitTitles(page, ['Unrelated question', 'Feline notes', 'Where is the README?']);

    // Delete asks first, in a modal dialog whose focus starts on Cancel; Escape keeps it.
    const openId = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get('c'));
    await openMenu(page, 'Unrelated question');
    await page.click('#history li:first-child .history-menu-item.danger');
    await page.waitForSelector('#delete-dialog[open]');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'delete-dialog-cancel');
    assert.equal(await page.textContent('#delete-dialog-name'), 'Unrelated question');
    await screenshot(page, 'conversations-delete-dialog');
    await assertAccessible(page, 'conversations-delete-dialog');
    await page.keyboard.press('Escape');
    await page.waitForFunction(() => !document.getElementById('delete-dialog').open);
    // The dialog's `close` event, which puts focus back, is dispatched a moment after `open`
    // turns false: wait for it (reading focus at once raced with it).
    const focusBack = await page
      .waitForFunction(() => document.activeElement.classList.contains('history-menu-btn'), null, { timeout: 5000 })
      .then(() => true, () => false);
    assert.equal(focusBack, true, 'focus is back on the menu button');
    assert.equal((await apiGet(host, `/conversations/${openId}`)).status, 200, 'kept');

    await openMenu(page, 'Unrelated question');
    await page.click('#history li:first-child .history-menu-item.danger');
    await page.click('#delete-dialog-confirm');
    await waitTitles(page, ['Feline notes', 'Where is the README?']);
    assert.equal((await apiGet(host, `/conversations/${openId}`)).status, 404);
    assert.equal(await page.isVisible('#empty'), true, 'the open conversation was the deleted one');
    assert.equal(new URL(page.url()).hash, '');
    // The one 400 is the refused title above; nothing else went wrong (no CSP violation).
    assert.deepEqual(problems.filter((p) => !p.includes('status of 400 (Bad Request)')), []);
  });

  test('Regenerate replaces the last answer and Edit the last message', async (t) => {
    const { page, host, upstream, problems } = await session(t, browser, [
      Turn.text('first answer'),
      Turn.text('second answer'),
      Turn.text('second answer, regenerated'),
      Turn.text('answer to the edit'),
    ]);
    await openPanel(page, host);
    await send(page, 'one');
    await waitIdle(page);
    await send(page, 'two');
    await waitIdle(page);
    await page.waitForSelector('#regenerate');
    await screenshot(page, 'conversations-actions');
    await assertAccessible(page, 'conversations-actions');

    await page.click('#regenerate');
    await waitIdle(page);
    assert.deepEqual((await transcript(page)).map((e) => `${e.kind}: ${e.text}`), [
      'user: one', 'assistant: first answer', 'user: two', 'assistant: second answer, regenerated',
    ]);
    assert.deepEqual(sentTexts(upstream, 2), ['user: one', 'assistant: first answer', 'user: two']);

    await page.click('#edit-last');
    assert.equal(await page.inputValue('#input'), 'two');
    assert.equal(await page.isVisible('#edit-banner'), true);
    await screenshot(page, 'conversations-edit');
    await assertAccessible(page, 'conversations-edit');
    await page.fill('#input', 'two, edited');
    await page.press('#input', 'Enter');
    await waitIdle(page);
    const live = await transcript(page);
    assert.deepEqual(live.map((e) => `${e.kind}: ${e.text}`), [
      'user: one', 'assistant: first answer', 'user: two, edited', 'assistant: answer to the edit',
    ]);
    assert.deepEqual(sentTexts(upstream, 3), ['user: one', 'assistant: first answer', 'user: two, edited']);
    assert.equal(await page.isVisible('#edit-banner'), false);

    // The stored history was replaced, so a reload shows the same.
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    await page.waitForSelector('#thread .msg.assistant');
    assert.deepEqual(await transcript(page), live);
    assert.equal(upstream.left(), 0);
    assert.deepEqual(problems, []);
  });

  test('the next message can be drafted while a reply streams; Send waits for DONE', async (t) => {
    const long = 'A reply that takes a while to arrive, a few characters at a time. '.repeat(3);
    const { page, host, upstream } = await session(t, browser, [
      Turn.text(long).chunkDelay(100),
      Turn.text('Got the draft.'),
    ]);
    await openPanel(page, host);
    await send(page, 'first');
    await page.waitForFunction(() => (document.querySelector('#thread .msg.assistant')?.textContent || '').length > 0);
    assert.equal(await page.isEnabled('#input'), true, 'typing works while the reply streams');
    assert.equal(await page.isVisible('#send'), false);
    await page.focus('#input');
    await page.keyboard.type('my next question');
    await page.keyboard.press('Enter');
    assert.equal(await page.inputValue('#input'), 'my next question', 'Enter does not send yet');
    await screenshot(page, 'conversations-drafting');
    await assertAccessible(page, 'conversations-drafting');
    await waitIdle(page);
    assert.equal(upstream.received.length, 1, 'nothing was sent while the reply streamed');
    assert.equal(await page.inputValue('#input'), 'my next question', 'the draft survived DONE');
    await page.press('#input', 'Enter');
    await waitIdle(page);
    assert.equal(upstream.received[1].body.messages.at(-1).content, 'my next question');
  });

  test('the typed text comes back after a refusal, a network failure and an ERROR', async (t) => {
    const { page, host } = await session(t, browser, [
      Turn.text('hello'),
      Turn.status(500, 'the scripted provider broke'),
    ]);
    await openPanel(page, host);
    await send(page, 'start');
    await waitIdle(page);

    // An ERROR after streaming began.
    await send(page, 'this run fails');
    await waitIdle(page);
    assert.equal((await transcript(page)).at(-1).kind, 'error');
    assert.equal(await page.inputValue('#input'), 'this run fails');

    // A network failure.
    await page.route('**/chat', (route) => route.abort());
    await send(page, 'no network');
    await waitIdle(page);
    assert.match((await transcript(page)).at(-1).text, /Cannot reach the server/);
    assert.equal(await page.inputValue('#input'), 'no network');
    // Edit belongs to the last message the server took, not to the one that never reached it.
    assert.equal(
      await page.$eval('#edit-last', (b) => b.parentElement.previousElementSibling.dataset.text),
      'this run fails',
    );
    await page.unroute('**/chat');

    // A refusal: the conversation was deleted elsewhere (404).
    const id = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get('c'));
    const deleted = await fetch(`${host.url}/conversations/${id}`, {
      method: 'DELETE', headers: { Authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(deleted.status, 204);
    await send(page, 'refused message');
    await waitIdle(page);
    assert.equal((await transcript(page)).at(-1).text, `\u26A0 no conversation ${id}`);
    assert.equal(await page.inputValue('#input'), 'refused message');
    await screenshot(page, 'conversations-text-kept');
  });

  test('a reopened conversation shows its errors and stops as they were shown live', async (t) => {
    const { page, host } = await session(t, browser, [
      Turn.text('all good'),
      Turn.status(500, 'the scripted provider broke'),
      // One piece every 1.5 s: Stop is clicked after the first, long before the next.
      Turn.text('partial answer that is cut short by the user').chunkDelay(1500),
    ]);
    await openPanel(page, host);
    await send(page, 'hello');
    await waitIdle(page);
    await send(page, 'this one fails');
    await waitIdle(page);
    await send(page, 'this one is stopped');
    await page.waitForFunction(() => (document.querySelectorAll('#thread .msg.assistant')[1]?.textContent || '').length > 0);
    await page.click('#stop');
    await waitIdle(page);
    const live = await transcript(page);
    assert.deepEqual(live.map((e) => e.kind), ['user', 'assistant', 'user', 'error', 'user', 'assistant', 'note']);
    assert.equal(live.at(-1).text, 'Stopped.');
    // Markdown drops the trailing space of the cut-off paragraph, live and reopened alike.
    assert.equal(live.at(-2).text, 'partial');
    await screenshot(page, 'conversations-live');
    await assertAccessible(page, 'conversations-live');

    // Reopened from the address (a reload) and from the sidebar: the same transcript.
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]');
    await page.waitForSelector('#thread .note');
    assert.deepEqual(await transcript(page), live);
    await screenshot(page, 'conversations-reopened');
    await assertAccessible(page, 'conversations-reopened');
    await page.click('#new-chat');
    await page.click('#history .history-item');
    await page.waitForSelector('#thread .note');
    assert.deepEqual(await transcript(page), live);

    // The stored notes are never sent upstream, and old clients see plain messages.
    const stored = await (await apiGet(host, `/conversations/${new URLSearchParams(new URL(page.url()).hash.slice(1)).get('c')}`)).json();
    assert.equal(stored.length, 6);
    assert.equal(stored[3].role, 'assistant');
    assert.equal(typeof stored[3].rojos.error, 'string');
    assert.deepEqual(stored[5].rojos, { stopped: true });
  });
});
