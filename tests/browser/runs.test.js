// Runs that outlive the tab, and a conversation that keeps its rojo, in real headless
// Chromium against the real `rojos` binary and a scripted upstream (docs/api.md, "Runs" and
// "A conversation's rojo"; docs/panel.md): a reload during a new conversation's first reply
// follows that reply to its end; another conversation can be opened while one runs, and the
// running one is followed again when reopened; Stop asks the server; the conversation's rojo
// is shown in its header, the picker is not sent for a follow-up, and a reload keeps it. At
// 390 px and 1280 px, light and dark, axe clean. Screenshots go to
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

  test('another conversation opens while one runs, and the running one is followed again', async (t) => {
    const reply = 'A long answer that goes on while the user reads another conversation.';
    const { page, host, upstream, problems } = await session(t, browser, [
      Turn.text('The first conversation.'),
      Turn.text(reply).chunkDelay(150),
    ], { viewport: WIDE });
    await openPanel(page, host);
    await send(page, 'first');
    await waitIdle(page);
    await page.click('#new-chat');
    await send(page, 'second, slowly');
    await page.waitForFunction(() => (document.querySelector('#thread .msg.assistant')?.textContent || '').length > 0);
    await page.waitForFunction(() => document.querySelectorAll('#history .history-item').length === 2);
    // The first conversation, opened from the list while the second one runs.
    await page.locator('#history .history-item', { hasText: 'first' }).click();
    await page.waitForFunction(() => document.querySelector('#thread .msg.user')?.textContent === 'first');
    await waitIdle(page);
    assert.deepEqual((await transcript(page)).map((e) => e.text), ['first', 'The first conversation.']);
    // Back to the running one: followed to its end.
    await page.locator('#history .history-item', { hasText: 'second, slowly' }).click();
    await waitReply(page, reply);
    await waitIdle(page);
    assert.deepEqual((await transcript(page)).map((e) => e.text), ['second, slowly', reply]);
    assert.equal(upstream.dropped, 0, 'leaving did not cancel the run');
    assert.deepEqual(problems, []);
  });

  test('Stop asks the server to stop the run', async (t) => {
    const { page, host, upstream } = await session(t, browser, [
      Turn.text('partial answer that is cut short by the user').chunkDelay(1500),
    ], { viewport: WIDE });
    const stops = [];
    page.on('request', (r) => { if (r.url().endsWith('/stop')) stops.push(r.method()); });
    await openPanel(page, host);
    await send(page, 'stop me');
    await page.waitForFunction(() => (document.querySelector('#thread .msg.assistant')?.textContent || '').length > 0);
    await page.click('#stop');
    await waitIdle(page);
    assert.deepEqual(stops, ['POST']);
    assert.equal((await transcript(page)).at(-1).text, 'Stopped.');
    const deadline = Date.now() + 5000;
    while (upstream.dropped === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(upstream.dropped, 1, 'the host dropped the upstream request');
  });
});

describe('a conversation keeps its rojo', () => {
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
