// The chat panel in real headless Chromium, against the real `rojos` binary and a scripted
// upstream: the reference conversation and its tool activity, failures, expanding a line, HTML in
// model and tool text, reopening (page by page) and continuing a conversation, a message
// refused while another page's reply is written, streaming, stopping, the keyboard, the token,
// and phone width. Screenshots go to test-output/browser/.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { launch, PHONE, screenshot } from './support/browser.js';
import { startGate } from './support/gate.js';
import { DEMO_TOKEN, TOKEN } from './support/host.js';
import {
  openPanel, PAGE, SEED, SEED_REPLY, seedTurns, send, session, transcript, waitIdle,
} from './support/panel.js';
import { Turn } from './support/upstream.js';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const SEED_REPLY_SHOWN = 'Done! I created docs/intro and wrote docs/intro/index.page.';

describe('the chat panel', () => {
  test('the reference conversation shows two ok activity lines and the final reply', async (t) => {
    const { page, host, upstream, problems } = await session(t, browser, seedTurns());
    await openPanel(page, host);
    await send(page, SEED);
    await waitIdle(page);
    // The turn's file changes are drawn (docs/panel.md, "File changes"): the write's line
    // says what it did.
    await page.waitForSelector('.changes-card');

    assert.deepEqual(await transcript(page), [
      { kind: 'user', text: SEED },
      { kind: 'tool', tool: 'create_directory', args: 'docs/intro', status: 'ok', label: 'ok', open: false },
      {
        kind: 'tool', tool: 'write_text_content', status: 'ok', label: 'created +3', open: false,
        args: 'docs/intro/index.page, text: "# Introduction \u21B5 Welcom\u2026"',
      },
      { kind: 'assistant', text: SEED_REPLY_SHOWN },
    ]);
    // Inline code in the reply is shown as code.
    assert.deepEqual(
      await page.$$eval('#thread .msg.assistant code', (c) => c.map((e) => e.textContent)),
      ['docs/intro', 'docs/intro/index.page'],
    );
    // The activity lines are not bubbles: smaller, dimmer text than the reply.
    const look = await page.evaluate(() => {
      const style = (sel) => getComputedStyle(document.querySelector(sel));
      return {
        lineSize: parseFloat(style('#thread .activity').fontSize),
        replySize: parseFloat(style('#thread .msg.assistant').fontSize),
        lineBackground: style('#thread .activity').backgroundColor,
        replyBackground: style('#thread .msg.assistant').backgroundColor,
        lineColor: style('#thread .activity').color,
        replyColor: style('#thread .msg.assistant').color,
      };
    });
    assert.ok(look.lineSize < look.replySize, JSON.stringify(look));
    assert.equal(look.lineBackground, 'rgba(0, 0, 0, 0)');
    assert.notEqual(look.lineColor, look.replyColor);
    assert.equal(
      fs.readFileSync(path.join(host.dir, 'storage/demo/root/docs/intro/index.page'), 'utf8'),
      PAGE,
    );
    assert.equal(await page.isEnabled('#input'), true, 'DONE re-enables input');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'input');
    // The new conversation is listed and marked as the open one.
    await page.waitForSelector('#history .history-item.active');
    const title = await page.textContent('#history .history-item.active .history-title');
    assert.ok(title.length > 40 && SEED.startsWith(title.replace(/\u2026$/, '')), title);
    assert.equal(upstream.left(), 0);

    await screenshot(page, 'seed-conversation');

    // The conversation continues: the next message is sent with the kept conversationId, so
    // the model sees the earlier turns, and the list still holds one conversation.
    upstream.push(Turn.text('You are welcome.'));
    await send(page, 'Thanks!');
    await waitIdle(page);
    const request = upstream.received.at(-1).body;
    assert.deepEqual(
      request.messages.filter((m) => m.role === 'user').map((m) => m.content),
      [SEED, 'Thanks!'],
    );
    assert.equal((await transcript(page)).at(-1).text, 'You are welcome.');
    await page.waitForFunction(() => document.querySelectorAll('#history .history-item').length === 1);
    assert.deepEqual(problems, []);
  });

  test('a running call shows running, and its result finishes the same line', async (t) => {
    const { page, host, problems } = await session(t, browser, seedTurns());
    const gate = await startGate(host.url);
    t.after(() => gate.stop());
    await page.goto(`${gate.url}/#token=${TOKEN}`);
    await page.waitForSelector('body[data-ready="true"]');
    gate.hold();
    await send(page, SEED);

    // Past the live status (TOOL_CALL_STARTED's "writing…"): the call itself is running.
    const line = await page.waitForSelector('#thread .activity:not([data-phase="writing"])');
    const running = () => line.evaluate((e) => ({
      status: e.dataset.status,
      label: e.querySelector('.act-status').textContent,
      spinner: getComputedStyle(e.querySelector('.act-icon'), '::before').animationName,
      result: e.querySelector('.act-result').textContent,
    }));
    assert.deepEqual(await running(), {
      status: 'running', label: 'running\u2026', spinner: 'spin', result: 'Running\u2026',
    });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await running()).status, 'running', 'still running while the result is held');
    assert.equal(await page.$$eval('#thread .activity', (e) => e.length), 1);
    await screenshot(page, 'running-activity-line');

    gate.release();
    await waitIdle(page);
    assert.deepEqual(
      await line.evaluate((e) => [e.isConnected, e.dataset.status, e.querySelector('.act-status').textContent]),
      [true, 'ok', 'ok'],
      'the result finished the line its call started',
    );
    assert.equal(await page.$$eval('#thread .activity[data-status="ok"]', (e) => e.length), 2);
    assert.deepEqual(problems, []);
  });

  test('a failing tool call shows error', async (t) => {
    const { page, host } = await session(t, browser, [
      Turn.toolCalls([['call_read', 'get_text_content', { path: 'missing.txt' }]]),
      Turn.text('That file does not exist.'),
    ]);
    await openPanel(page, host);
    await send(page, 'Read missing.txt');
    await waitIdle(page);

    const [, line, reply] = await transcript(page);
    assert.deepEqual(line, {
      kind: 'tool', tool: 'get_text_content', args: 'missing.txt', status: 'error', label: 'error', open: false,
    });
    assert.equal(reply.text, 'That file does not exist.');
    await page.click('#thread .activity summary');
    const result = await page.textContent('#thread .activity .act-result');
    assert.match(result, /^error: /);
  });

  test('an expanded line shows the full arguments and the result', async (t) => {
    const { page, host } = await session(t, browser, seedTurns());
    await openPanel(page, host);
    await send(page, SEED);
    await waitIdle(page);

    const write = page.locator('#thread .activity').nth(1);
    assert.equal(await write.locator('.act-body').isVisible(), false, 'collapsed by default');
    // Keyboard: the line is a focusable summary; Enter expands it.
    await write.locator('summary').focus();
    await page.keyboard.press('Enter');
    assert.equal(await write.locator('.act-body').isVisible(), true);
    // A write shows its path and the written text, line by line (files.test.js has more).
    assert.equal(await write.locator('.act-written-path').textContent(), 'docs/intro/index.page');
    assert.deepEqual((await write.locator('.act-written-text .files-text').allTextContents()).join('\n'), PAGE);
    assert.deepEqual(JSON.parse(await write.locator('.act-result').textContent()), { ok: true });
    await screenshot(page, 'expanded-activity-line');
    await write.locator('summary').click();
    assert.equal(await write.locator('.act-body').isVisible(), false, 'collapses again');
  });

  test('HTML in replies, tool names, arguments and file text is shown as text', async (t) => {
    const FILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
    const REPLY = 'The file holds <img src=x onerror="window.__pwned=3"> and <b>bold</b> **ok**';
    const { page, host, problems } = await session(t, browser, [
      Turn.toolCalls([
        ['call_read', 'get_text_content', { path: 'evil.html' }],
        ['call_bad', '<i>tool</i>', { path: '<img src=y onerror="window.__pwned=4">' }],
      ]),
      Turn.text(REPLY),
    ]);
    fs.writeFileSync(path.join(host.projectRoot('demo'), 'evil.html'), FILE);
    await openPanel(page, host);
    await send(page, 'What is in evil.html? <img src=z onerror="window.__pwned=5">');
    await waitIdle(page);

    const shown = await transcript(page);
    assert.equal(shown[0].text, 'What is in evil.html? <img src=z onerror="window.__pwned=5">');
    assert.equal(shown[1].tool, 'get_text_content');
    assert.equal(shown[1].status, 'ok');
    assert.equal(shown[2].tool, '<i>tool</i>');
    assert.equal(shown[2].status, 'error');
    assert.match(shown[2].args, /<img src=y onerror=/);
    assert.equal(shown[3].text, 'The file holds <img src=x onerror="window.__pwned=3"> and <b>bold</b> ok');
    await page.click('#thread .activity summary');
    assert.equal(await page.textContent('#thread .activity .act-result'), FILE);
    assert.equal(
      await page.$$eval('#thread img, #thread script, #thread b, #thread i', (e) => e.length),
      0,
      'no element was made from model or tool text',
    );
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.deepEqual(problems, []);
  });

  test('a reopened conversation shows its history with its tool activity', async (t) => {
    const { page, host, upstream, context } = await session(t, browser, [
      ...seedTurns(),
      Turn.toolCalls([['call_read', 'get_text_content', { path: 'nope.txt' }]]),
      Turn.text('There is no nope.txt.'),
    ]);
    await openPanel(page, host);
    await send(page, SEED);
    await waitIdle(page);
    await send(page, 'Now read nope.txt');
    await waitIdle(page);
    const live = await transcript(page);

    // A fresh page (the token is kept in the browser) starts empty; the history reopens it.
    const again = await context.newPage();
    const pages = [];
    again.on('response', (r) => {
      // The pages of messages (not the undo bars' GET /conversations/{id}/checkpoints etc.).
      const { pathname } = new URL(r.url());
      if (/^\/conversations\/[^/]+$/.test(pathname)) pages.push(r.url());
    });
    await again.goto(host.url + '/');
    await again.waitForSelector('body[data-ready="true"]');
    assert.deepEqual(await transcript(again), []);
    await again.click('#history .history-item');
    await again.waitForSelector('#thread .activity');
    await again.waitForSelector('.changes-card');
    const reopened = await transcript(again);
    assert.deepEqual(reopened, live);
    // The history is longer than one page (1 KiB here): it was read page by page.
    assert.ok(pages.length > 1, `read in ${pages.length} page(s)`);
    assert.ok(pages.slice(1).every((u) => /\?from=\d+$/.test(u)), pages.join(' '));
    assert.deepEqual(
      reopened.filter((e) => e.kind === 'tool').map((e) => [e.tool, e.status]),
      [['create_directory', 'ok'], ['write_text_content', 'ok'], ['get_text_content', 'error']],
    );
    await again.locator('#thread .activity').nth(1).locator('summary').click();
    assert.deepEqual(
      (await again.locator('#thread .activity').nth(1).locator('.act-written-text .files-text').allTextContents()).join('\n'),
      PAGE,
    );
    await screenshot(again, 'reopened-conversation');

    // The reopened conversation continues where it was.
    upstream.push(Turn.text('Still here.'));
    await send(again, 'Are you there?');
    await waitIdle(again);
    const users = upstream.received.at(-1).body.messages.filter((m) => m.role === 'user');
    assert.deepEqual(users.map((m) => m.content), [SEED, 'Now read nope.txt', 'Are you there?']);

    // The URL names the open conversation, so a reload shows it again.
    await again.reload();
    await again.waitForSelector('body[data-ready="true"]');
    assert.equal((await transcript(again)).at(-1).text, 'Still here.');
  });

  test('a message sent while another page is writing a reply is refused with the reason shown', async (t) => {
    const slowly = 'This reply takes its time to arrive, a few characters at a time. '.repeat(2);
    const { page, host, upstream, context } = await session(t, browser, [
      Turn.text('First reply.'),
      Turn.text(slowly).chunkDelay(400),
      Turn.text('Your turn now.'),
    ]);
    await openPanel(page, host);
    await send(page, 'first');
    await waitIdle(page);
    await send(page, 'second');
    await page.waitForFunction(
      () => (document.querySelectorAll('#thread .msg.assistant')[1]?.textContent || '').length > 0,
    );

    // The same conversation, opened in a second page while the first one's reply streams.
    const other = await context.newPage();
    await other.goto(host.url + '/');
    await other.waitForSelector('body[data-ready="true"]');
    await other.click('#history .history-item');
    await other.waitForSelector('#thread .msg.assistant');
    await send(other, 'me too');
    await other.waitForSelector('#thread .msg.error');
    assert.deepEqual((await transcript(other)).slice(-2), [
      { kind: 'user', text: 'me too' },
      {
        kind: 'error',
        text: '\u26A0 a reply is still being written in this conversation; wait for it to finish or stop it',
      },
    ]);
    assert.equal(await other.inputValue('#input'), 'me too', 'the refused message is kept to send again');
    assert.equal(await other.isEnabled('#input'), true);

    // Once the first reply is done, the same message goes through.
    await waitIdle(page);
    // Markdown: a paragraph's trailing space is not part of it (CommonMark).
    assert.equal((await transcript(page)).at(-1).text, slowly.trimEnd());
    await other.press('#input', 'Enter');
    await waitIdle(other);
    assert.equal((await transcript(other)).at(-1).text, 'Your turn now.');
    assert.equal(upstream.received.length, 3, 'the refused message reached no model');
    assert.deepEqual(
      upstream.received[2].body.messages.filter((m) => m.role === 'user').map((m) => m.content),
      ['first', 'second', 'me too'],
    );
  });

  test('an ERROR from the run is shown and input comes back', async (t) => {
    const { page, host } = await session(t, browser, [
      Turn.toolCalls([['call_ls', 'list_files', { path: '.' }]]),
      Turn.status(400, 'the model is not available'),
    ]);
    await openPanel(page, host);
    await send(page, 'List my files');
    await waitIdle(page);
    const shown = await transcript(page);
    assert.equal(shown[1].status, 'ok');
    assert.equal(shown[2].kind, 'error');
    assert.match(shown[2].text, /not available/);
    assert.equal(await page.isEnabled('#input'), true);
  });

  test('a started tool status always finishes, also when the stream ends with ERROR or breaks', async (t) => {
    const { page, host } = await session(t, browser, []);
    const bodies = [
      [
        { type: 'TOOL_CALL', id: 'c1', name: 'list_files', args: { path: '.' } },
        { type: 'ERROR', message: 'the server is shutting down; the run was stopped' },
        { type: 'DONE', conversationId: 'AAAAAAAAAAAAAAAAAAAAAA', stopReason: 'cancelled' },
      ],
      [{ type: 'TOOL_CALL', id: 'c2', name: 'read_path_meta', args: { path: 'a' } }],
    ];
    await page.route('**/chat', (route) => route.fulfill({
      status: 200,
      contentType: 'application/x-ndjson',
      body: bodies.shift().map((e) => JSON.stringify(e) + '\n').join(''),
    }));
    await openPanel(page, host);
    await send(page, 'one');
    await waitIdle(page);
    await send(page, 'two');
    await waitIdle(page);
    const shown = await transcript(page);
    const lines = shown.filter((e) => e.kind === 'tool');
    assert.deepEqual(lines.map((l) => [l.tool, l.status, l.label]), [
      ['list_files', 'error', 'interrupted'],
      ['read_path_meta', 'error', 'interrupted'],
    ]);
    assert.deepEqual(shown.filter((e) => e.kind === 'error').map((e) => e.text), [
      '\u26A0 the server is shutting down; the run was stopped',
      '\u26A0 The connection to the server closed before the reply was complete.',
    ]);
    assert.equal(await page.$$eval('#thread .activity[data-status="running"]', (e) => e.length), 0);
  });

  test('replies stream in as they are produced, and Stop ends one', async (t) => {
    const long = 'This reply arrives a few characters at a time, as the model writes it. '.repeat(3);
    const { page, host, upstream } = await session(t, browser, [
      Turn.text(long).chunkDelay(120),
      Turn.text(long).chunkDelay(250),
    ]);
    await openPanel(page, host);
    await send(page, 'Stream please');
    await page.waitForFunction(() => (document.querySelector('#thread .msg.assistant')?.textContent || '').length > 0);
    const partial = await page.textContent('#thread .msg.assistant');
    assert.ok(partial.length < long.length, `partial text shown before the end: ${partial.length}`);
    assert.ok(long.startsWith(partial));
    assert.equal(await page.isVisible('#send'), false, 'Send waits while the reply streams');
    assert.equal(await page.isVisible('#stop'), true);
    await waitIdle(page);
    // Markdown: a paragraph's trailing space is not part of it (CommonMark).
    assert.equal(await page.textContent('#thread .msg.assistant'), long.trimEnd());

    await send(page, 'Again, but I will stop you');
    await page.waitForFunction(() => (document.querySelectorAll('#thread .msg.assistant')[1]?.textContent || '').length > 0);
    await page.click('#stop');
    await waitIdle(page);
    const shown = await transcript(page);
    assert.equal(shown.at(-1).text, 'Stopped.');
    assert.ok(shown.at(-2).text.length < long.length);
    const deadline = Date.now() + 5000;
    while (upstream.dropped === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(upstream.dropped, 1, 'the host dropped the upstream request');
  });

  test('Enter sends and Shift+Enter adds a line', async (t) => {
    const { page, host, upstream } = await session(t, browser, [Turn.text('Two lines received.')]);
    await openPanel(page, host);
    await page.focus('#input');
    await page.keyboard.type('first line');
    await page.keyboard.press('Shift+Enter');
    await page.keyboard.type('second line');
    assert.equal(await page.inputValue('#input'), 'first line\nsecond line');
    assert.equal(upstream.received.length, 0, 'Shift+Enter sends nothing');
    await page.keyboard.press('Enter');
    await waitIdle(page);
    assert.equal(upstream.received[0].body.messages.at(-1).content, 'first line\nsecond line');
    assert.equal((await transcript(page))[0].text, 'first line\nsecond line');
    assert.equal(await page.inputValue('#input'), '');
  });

  test('the token: a #token= link is kept and cleared from the URL; a wrong one is asked again', async (t) => {
    const { page, host, context } = await session(t, browser, []);
    await openPanel(page, host);
    assert.equal(new URL(page.url()).hash, '');
    assert.equal(await page.evaluate(() => localStorage.getItem('rojos.token')), TOKEN);
    assert.equal(await page.isVisible('#token-overlay'), false);
    assert.deepEqual(
      await page.$$eval('#rojo option', (o) => o.map((e) => e.value)),
      ['default', 'reader'],
    );

    await page.click('#forget-token');
    assert.equal(await page.isVisible('#token-overlay'), true);
    assert.equal(await page.evaluate(() => localStorage.getItem('rojos.token')), null);

    const fresh = await context.newPage();
    await fresh.goto(host.url + '/');
    await fresh.waitForSelector('#token-overlay:not([hidden])');
    await fresh.fill('#token-input', 'not-the-token');
    await fresh.press('#token-input', 'Enter');
    await fresh.waitForSelector('#token-error:not([hidden])');
    assert.match(await fresh.textContent('#token-error'), /refused/);
    await fresh.fill('#token-input', TOKEN);
    await fresh.press('#token-input', 'Enter');
    await fresh.waitForSelector('body[data-ready="true"]');
    assert.equal(await fresh.isVisible('#token-overlay'), false);
  });

  test('a #token= link with another token asks first; keeping or switching both clear the URL', async (t) => {
    const { page, host, context, problems } = await session(t, browser, []);
    await openPanel(page, host);
    const kept = () => page.evaluate(() => localStorage.getItem('rojos.token'));
    assert.equal(await kept(), TOKEN);
    assert.equal(await page.$eval('#token-switch', (d) => d.open), false, 'no prompt without a kept token');

    // The same token again: no question.
    const same = await context.newPage();
    await same.goto(`${host.url}/#token=${TOKEN}`);
    await same.waitForSelector('body[data-ready="true"]');
    assert.equal(await same.$eval('#token-switch', (d) => d.open), false);
    assert.equal(new URL(same.url()).hash, '');

    // Another token: a modal dialog, the link already gone from the address bar, the focus
    // on the safe answer; Escape keeps the current token.
    const keep = await context.newPage();
    await keep.goto(`${host.url}/#token=${DEMO_TOKEN}&note=1`);
    const dialog = keep.getByRole('dialog', { name: 'Switch the token?' });
    await dialog.waitFor();
    assert.equal(new URL(keep.url()).hash, '#note=1');
    assert.match(await dialog.textContent(), /A link wants to switch this browser to another access token/);
    assert.equal(await keep.evaluate(() => document.activeElement.textContent), 'Keep the current one');
    await screenshot(keep, 'token-switch-question');
    await keep.keyboard.press('Escape');
    await keep.waitForSelector('body[data-ready="true"]');
    assert.equal(await keep.$eval('#token-switch', (d) => d.open), false);
    assert.equal(await kept(), TOKEN);

    // Enter on the focused "Keep the current one" keeps it too.
    const enter = await context.newPage();
    await enter.goto(`${host.url}/#token=${DEMO_TOKEN}`);
    await enter.getByRole('dialog', { name: 'Switch the token?' }).waitFor();
    await enter.keyboard.press('Enter');
    await enter.waitForSelector('body[data-ready="true"]');
    assert.equal(await kept(), TOKEN);

    // Tab to "Use the new token", then Enter: the panel switches and works with it.
    const use = await context.newPage();
    await use.goto(`${host.url}/#token=${DEMO_TOKEN}`);
    await use.getByRole('dialog', { name: 'Switch the token?' }).waitFor();
    assert.equal(new URL(use.url()).hash, '');
    await use.keyboard.press('Tab');
    assert.equal(await use.evaluate(() => document.activeElement.textContent), 'Use the new token');
    await use.keyboard.press('Enter');
    await use.waitForSelector('body[data-ready="true"]');
    assert.equal(await kept(), DEMO_TOKEN);
    assert.equal(await use.isVisible('#token-overlay'), false, 'the new token was accepted');
    assert.deepEqual(problems, []);
  });

  test('the panel is usable at phone width', async (t) => {
    const { page, host } = await session(t, browser, seedTurns(), { viewport: PHONE });
    await openPanel(page, host);
    await send(page, SEED);
    await waitIdle(page);
    const fit = await page.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth,
      send: document.getElementById('send').getBoundingClientRect().toJSON(),
      input: document.getElementById('input').getBoundingClientRect().toJSON(),
      sidebar: document.getElementById('sidebar').getBoundingClientRect().toJSON(),
      lines: [...document.querySelectorAll('#thread .activity')].map((e) => e.getBoundingClientRect().right),
    }));
    assert.ok(fit.scrollWidth <= PHONE.width, `no sideways scrolling: ${fit.scrollWidth}`);
    assert.ok(fit.send.right <= PHONE.width && fit.send.bottom <= PHONE.height, JSON.stringify(fit.send));
    assert.ok(fit.input.width > 200, `room to type: ${fit.input.width}`);
    assert.ok(fit.sidebar.right <= 0, 'the conversation list is tucked away');
    assert.ok(fit.lines.every((r) => r <= PHONE.width));
    assert.deepEqual((await transcript(page)).map((e) => e.status || e.kind),
      ['user', 'ok', 'ok', 'assistant']);
    await screenshot(page, 'seed-conversation-phone');

    await page.click('#toggle-sidebar');
    await page.waitForFunction(() => document.getElementById('sidebar').getBoundingClientRect().left >= 0);
    assert.equal(await page.isVisible('#history .history-item'), true);
    await screenshot(page, 'phone-conversations');
    await page.click('#backdrop', { position: { x: 370, y: 400 } });
    await page.waitForFunction(() => document.getElementById('sidebar').getBoundingClientRect().right <= 0);
  });
});
