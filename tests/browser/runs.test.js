// Runs that outlive the tab, and a conversation that keeps its rojo, in real headless
// Chromium against the real `rojos` binary and a scripted upstream (docs/api.md, "Runs" and
// "A conversation's rojo"; docs/panel.md): a reload during a new conversation's first reply
// follows that reply to its end; another conversation can be opened while one runs, and the
// running one is followed again when reopened; Stop asks the server; the conversation's rojo
// is shown in its header, the picker is not sent for a follow-up, and a reload keeps it; each
// turn, live and reopened, names the rojo that answered it. At 390 px and 1280 px, light and
// dark, axe clean. Screenshots go to
// test-output/browser/runs-*.png.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { launch, PHONE, screenshot } from './support/browser.js';
import { assertAccessible } from './support/axe.js';
import { openPanel, send, session, transcript, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

const WIDE = { width: 1280, height: 800 };

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** The `POST /chat` bodies the page sent, in order. */
function chatBodies(page) {
  const bodies = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && new URL(request.url()).pathname === '/chat') {
      bodies.push(JSON.parse(request.postData()));
    }
  });
  return bodies;
}

/** Waits until the last assistant bubble shows `text` whole. */
async function waitReply(page, text) {
  await page.waitForFunction(
    (want) => [...document.querySelectorAll('#thread .msg.assistant')].some((b) => b.textContent === want),
    text,
    { timeout: 20000 },
  );
}

describe('runs that outlive the tab', () => {
  for (const [size, viewport] of [['wide', WIDE], ['phone', PHONE]]) {
    test(`a reload during a new conversation's first reply follows it to its end (${size})`, async (t) => {
      const reply = 'This reply keeps being written while the page reloads, and nothing of it is lost.';
      const { page, host, upstream, problems } = await session(t, browser, [Turn.text(reply).chunkDelay(150)], { viewport });
      await openPanel(page, host);
      await send(page, 'Write slowly');
      await page.waitForFunction(() => (document.querySelector('#thread .msg.assistant')?.textContent || '').length > 0);
      // The conversation is known from the run's first event, long before its end.
      assert.match(await page.evaluate(() => location.hash), /^#c=/);
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await waitReply(page, reply);
      await waitIdle(page);
      const shown = await transcript(page);
      assert.deepEqual(shown.map((e) => e.kind), ['user', 'assistant']);
      assert.equal(shown[0].text, 'Write slowly');
      assert.equal(upstream.dropped, 0, 'the reload did not cancel the run');
      assert.equal(upstream.received.length, 1);
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `runs-rejoined-${size}-${scheme}`);
        await assertAccessible(page, `runs-rejoined-${size}-${scheme}`);
      }
      assert.deepEqual(problems, []);
    });
  }

  for (const [size, viewport] of [['wide', WIDE], ['phone', PHONE]]) {
    test(`another conversation opens while one runs, and the running one is followed again (${size})`, async (t) => {
      const reply = 'A long answer that goes on while the user reads another conversation.';
      const { page, host, upstream, problems } = await session(t, browser, [
        Turn.text('The first conversation.'),
        Turn.text(reply).chunkDelay(150),
      ], { viewport });
      await openPanel(page, host);
      await send(page, 'first');
      await waitIdle(page);
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.click('#new-chat');
      await send(page, 'second, slowly');
      await page.waitForFunction(() => (document.querySelector('#thread .msg.assistant')?.textContent || '').length > 0);
      await page.waitForFunction(() => document.querySelectorAll('#history .history-item').length === 2);
      // The first conversation, opened from the list while the second one runs.
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.locator('#history .history-item', { hasText: 'first' }).click();
      await page.waitForFunction(() => document.querySelector('#thread .msg.user')?.textContent === 'first');
      await waitIdle(page);
      assert.deepEqual((await transcript(page)).map((e) => e.text), ['first', 'The first conversation.']);
      // Back to the running one: followed to its end.
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.locator('#history .history-item', { hasText: 'second, slowly' }).click();
      await waitReply(page, reply);
      await waitIdle(page);
      assert.deepEqual((await transcript(page)).map((e) => e.text), ['second, slowly', reply]);
      assert.equal(upstream.dropped, 0, 'leaving did not cancel the run');
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `runs-followed-again-${size}-${scheme}`);
        await assertAccessible(page, `runs-followed-again-${size}-${scheme}`);
      }
      assert.deepEqual(problems, []);
    });

    test(`Stop asks the server to stop the run (${size})`, async (t) => {
      const { page, host, upstream } = await session(t, browser, [
        Turn.text('partial answer that is cut short by the user').chunkDelay(1500),
      ], { viewport });
      const stops = [];
      page.on('request', (r) => { if (r.url().endsWith('/stop')) stops.push(r.method()); });
      await openPanel(page, host);
      await send(page, 'stop me');
      await page.waitForFunction(() => (document.querySelector('#thread .msg.assistant')?.textContent || '').length > 0);
      await page.click('#stop');
      await waitIdle(page);
      assert.deepEqual(stops, ['POST']);
      assert.equal((await transcript(page)).at(-1).text, 'Stopped.');
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await assertAccessible(page, `runs-stopped-${size}-${scheme}`);
      }
      const deadline = Date.now() + 5000;
      while (upstream.dropped === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.equal(upstream.dropped, 1, 'the host dropped the upstream request');
    });
  }
});

/**
 * The thread as turns: `user: TEXT`, `assistant: TEXT`, `tool: NAME`, `note: TEXT`,
 * `error`, and `rojo: NAME` for the line naming the rojo that answered a turn.
 */
async function turns(page) {
  return page.$$eval('#thread > :not([hidden])', (items) => items.flatMap((e) => {
    if (e.classList.contains('turn-rojo')) return [`rojo: ${e.querySelector('.turn-rojo-name').textContent}`];
    if (e.classList.contains('activity')) return [`tool: ${e.querySelector('.act-name').textContent}`];
    if (e.classList.contains('user')) return [`user: ${e.textContent}`];
    if (e.classList.contains('assistant')) return [`assistant: ${e.textContent}`];
    if (e.classList.contains('note')) return [`note: ${e.textContent}`];
    if (e.classList.contains('error')) return ['error'];
    return [];
  }));
}

/** Every rojo line is shown whole, inside the thread and the window, and says what it is. */
async function rojoLinesReadable(page) {
  return page.$$eval('#thread .turn-rojo', (lines) => lines.map((line) => {
    const box = line.getBoundingClientRect();
    const thread = document.getElementById('thread').getBoundingClientRect();
    return {
      text: line.textContent,
      shown: box.width > 0 && box.height > 0 && line.scrollWidth <= line.clientWidth + 1,
      inside: box.left >= thread.left - 1 && box.right <= Math.min(thread.right, window.innerWidth) + 1,
      fontPx: parseFloat(getComputedStyle(line).fontSize),
    };
  }));
}

describe('a conversation keeps its rojo', () => {
  for (const [size, viewport] of [['wide', WIDE], ['phone', PHONE]]) {
    test(`each turn names the rojo that answered it, live and reopened (${size})`, async (t) => {
      const { page, host, problems } = await session(t, browser, [
        Turn.toolCalls([['call_ls', 'list_files', { path: '.' }]]),
        Turn.text('Listed.'),
        Turn.text('Second answer, under reader.'),
        Turn.status(500, 'the scripted provider broke'),
        Turn.text('Under default.'),
      ], { viewport });
      await openPanel(page, host);
      // A conversation under `reader`: a turn with a tool call, a plain one, a failed one.
      await page.selectOption('#rojo', 'reader');
      await send(page, 'one');
      await waitIdle(page);
      await send(page, 'two');
      await waitIdle(page);
      await send(page, 'three');
      await waitIdle(page);
      const readerLive = await turns(page);
      assert.deepEqual(readerLive, [
        'user: one', 'tool: list_files', 'assistant: Listed.', 'rojo: reader',
        'user: two', 'assistant: Second answer, under reader.', 'rojo: reader',
        'user: three', 'error', 'rojo: reader',
      ]);
      const readerId = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get('c'));

      // Another conversation, under `default`.
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.click('#new-chat');
      await page.selectOption('#rojo', 'default');
      await send(page, 'four');
      await waitIdle(page);
      const defaultLive = await turns(page);
      assert.deepEqual(defaultLive, ['user: four', 'assistant: Under default.', 'rojo: default']);
      for (const line of await rojoLinesReadable(page)) {
        assert.deepEqual(line, { text: 'Answered by the rojo default', shown: true, inside: true, fontPx: 12 });
      }
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `runs-turn-rojo-live-${size}-${scheme}`);
        await assertAccessible(page, `runs-turn-rojo-live-${size}-${scheme}`);
      }
      await page.emulateMedia({ colorScheme: 'light' });

      // Reopened from the list: the same turns, each naming its conversation's rojo.
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.locator('#history .history-item', { hasText: 'one' }).click();
      await page.waitForFunction(() => document.querySelector('#thread .msg.user')?.textContent === 'one');
      await waitIdle(page);
      await page.waitForSelector('#thread .turn-rojo');
      assert.deepEqual(await turns(page), readerLive);
      assert.equal(await page.textContent('#conversation-rojo'), 'Rojo: reader');
      for (const line of await rojoLinesReadable(page)) {
        assert.deepEqual(line, { text: 'Answered by the rojo reader', shown: true, inside: true, fontPx: 12 });
      }
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `runs-turn-rojo-reopened-${size}-${scheme}`);
        await assertAccessible(page, `runs-turn-rojo-reopened-${size}-${scheme}`);
      }
      await page.emulateMedia({ colorScheme: 'light' });

      // Reloaded on the other one: its turn names `default`.
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.locator('#history .history-item', { hasText: 'four' }).click();
      await page.waitForFunction(() => document.querySelector('#thread .msg.user')?.textContent === 'four');
      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await page.waitForSelector('#thread .turn-rojo');
      assert.deepEqual(await turns(page), defaultLive);
      assert.notEqual(await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get('c')), readerId);
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `runs-turn-rojo-${size}-${scheme}`);
        await assertAccessible(page, `runs-turn-rojo-${size}-${scheme}`);
      }

      // A conversation stored before the server kept each turn's rojo: the host says from
      // which message on its turns are known to be its rojo's (`Rojos-Rojo-Kept-From`, set
      // by the store's migration; e2e conversation_rojo.rs). Here the header is added to the
      // host's answer, as the host sends it for such a conversation: the turn before it says
      // its rojo was not recorded, the later ones name `reader`.
      await page.route(`**/conversations/${readerId}`, async (route) => {
        const response = await route.fetch();
        await route.fulfill({ response, headers: { ...response.headers(), 'rojos-rojo-kept-from': '4' } });
      });
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.locator('#history .history-item', { hasText: 'one' }).click();
      await page.waitForFunction(() => document.querySelector('#thread .msg.user')?.textContent === 'one');
      await page.waitForSelector('#thread .turn-rojo');
      assert.deepEqual(await turns(page), readerLive.map((e, i) => (i === 3 ? 'rojo: rojo not recorded' : e)));
      assert.equal(
        await page.getAttribute('#thread .turn-rojo.unknown', 'title'),
        'Answered before this server recorded which rojo answers each turn: maybe not reader',
      );
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `runs-turn-rojo-unrecorded-${size}-${scheme}`);
        await assertAccessible(page, `runs-turn-rojo-unrecorded-${size}-${scheme}`);
      }
      assert.deepEqual(problems, []);
    });
  }

  for (const [size, viewport] of [['wide', WIDE], ['phone', PHONE]]) {
    test(`its header names it, a follow-up does not send the picker, a reload keeps it (${size})`, async (t) => {
      const { page, host, upstream, problems } = await session(t, browser, [
        Turn.text('Under reader.'),
        Turn.text('Still reader.'),
      ], { viewport });
      const bodies = chatBodies(page);
      await openPanel(page, host);
      assert.equal(await page.isVisible('#conversation-rojo'), false, 'no conversation yet');
      await page.selectOption('#rojo', 'reader');
      await send(page, 'hello');
      await waitIdle(page);
      assert.equal(await page.textContent('#conversation-rojo'), 'Rojo: reader');
      assert.equal(await page.isDisabled('#rojo'), true, 'the picker chooses a new conversation\'s rojo');

      await page.reload();
      await page.waitForSelector('body[data-ready="true"]');
      await page.waitForSelector('#conversation-rojo:not([hidden])');
      assert.equal(await page.textContent('#conversation-rojo'), 'Rojo: reader');
      await send(page, 'again');
      await waitIdle(page);
      assert.deepEqual(bodies.map((b) => b.rojo), ['reader', undefined]);
      assert.equal(upstream.received.length, 2, 'the follow-up ran');
      assert.equal((await transcript(page)).at(-1).text, 'Still reader.');
      for (const scheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme: scheme });
        await screenshot(page, `runs-rojo-${size}-${scheme}`);
        await assertAccessible(page, `runs-rojo-${size}-${scheme}`);
      }
      if (viewport === PHONE) await page.click('#toggle-sidebar');
      await page.click('#new-chat');
      assert.equal(await page.isVisible('#conversation-rojo'), false);
      assert.equal(await page.isDisabled('#rojo'), false);
      assert.deepEqual(problems, []);
    });
  }
});
