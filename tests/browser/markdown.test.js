// Replies rendered as markdown (server/assets/panel-render.js over the bundled markdown-it and
// lowlight), in real headless Chromium against the real `rojos` binary and a scripted
// upstream: each construct as its element, highlighted code with readable colours in both
// schemes, hostile model text left inert, partial markdown while a reply streams, the copy
// buttons, and a reopened conversation drawn like the live one. See docs/panel.md.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { launch, screenshot } from './support/browser.js';
import { openPanel, send, session, waitIdle } from './support/panel.js';
import { Turn } from './support/upstream.js';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

const RUST = [
  '// Says hello.',
  'fn main() {',
  '    let n: u32 = 42;',
  '    println!("hello {}", n);',
  '}',
].join('\n');

const MARKDOWN_REPLY = [
  '## The plan',
  '',
  'Some *careful* steps, see [the docs](https://example.com/docs?a=1) first.',
  '',
  '- first bullet',
  '- second bullet',
  '',
  '1. step one',
  '2. step two',
  '',
  'Then, later:',
  '',
  '7. step seven',
  '',
  '| Name | Size |',
  '|:-----|-----:|',
  '| a.txt | 12 |',
  '| b.txt | 7 |',
  '',
  '```rust',
  RUST,
  '```',
].join('\n');

// WCAG's contrast ratio of two `rgb(...)` colours, computed in the page.
function contrastIn(page, selector) {
  return page.$$eval(selector, (spans) => {
    const rgb = (c) => c.match(/[\d.]+/g).slice(0, 3).map(Number);
    const lum = (c) => {
      const [r, g, b] = rgb(c).map((v) => {
        const s = v / 255;
        return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const ratio = (a, b) => {
      const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
      return (hi + 0.05) / (lo + 0.05);
    };
    return spans.map((s) => {
      // The nearest background actually painted.
      let under = s;
      while (under && /^rgba\(.*, 0\)$|^transparent$/.test(getComputedStyle(under).backgroundColor)) under = under.parentElement;
      const background = getComputedStyle(under || document.body).backgroundColor;
      const color = getComputedStyle(s).color;
      return { class: s.className, color, background, ratio: Math.round(ratio(color, background) * 100) / 100 };
    });
  });
}

describe('replies rendered as markdown', () => {
  test('lists, a heading, emphasis, a link, a table and highlighted code render as their elements', async (t) => {
    const { page, host, problems } = await session(t, browser, [Turn.text(MARKDOWN_REPLY)]);
    await openPanel(page, host);
    await send(page, 'Plan it, **plainly**');
    await waitIdle(page);

    const bubble = '#thread .msg.assistant';
    assert.equal(await page.textContent(`${bubble} h2`), 'The plan');
    assert.equal(await page.textContent(`${bubble} em`), 'careful');
    assert.deepEqual(await page.$$eval(`${bubble} ul > li`, (l) => l.map((e) => e.textContent)), ['first bullet', 'second bullet']);
    assert.deepEqual(
      await page.$$eval(`${bubble} ol`, (l) => l.map((o) => [o.start, ...[...o.children].map((e) => e.textContent)])),
      [[1, 'step one', 'step two'], [7, 'step seven']],
      'each ordered list numbered from its first number',
    );
    assert.deepEqual(
      await page.$eval(`${bubble} a`, (a) => ({ text: a.textContent, href: a.getAttribute('href'), rel: a.rel, target: a.target })),
      { text: 'the docs', href: 'https://example.com/docs?a=1', rel: 'noopener noreferrer nofollow', target: '_blank' },
    );
    assert.deepEqual(
      await page.$$eval(`${bubble} table th`, (c) => c.map((e) => [e.textContent, e.className])),
      [['Name', 'align-left'], ['Size', 'align-right']],
    );
    assert.deepEqual(await page.$$eval(`${bubble} table td`, (c) => c.map((e) => e.textContent)), ['a.txt', '12', 'b.txt', '7']);
    assert.equal(
      await page.$eval(`${bubble} table td.align-right`, (e) => getComputedStyle(e).textAlign),
      'right',
      'alignment by class works under the CSP',
    );
    // The fence: its language as a class, its text exactly the code, highlighted by spans.
    const code = await page.$eval(`${bubble} pre > code`, (c) => ({
      className: c.className,
      text: c.textContent,
      spans: [...new Set([...c.querySelectorAll('span')].map((s) => s.className))].sort(),
    }));
    assert.equal(code.className, 'hljs language-rust');
    assert.equal(code.text, RUST);
    for (const kind of ['hljs-comment', 'hljs-keyword', 'hljs-number', 'hljs-string', 'hljs-type']) {
      assert.ok(code.spans.includes(kind), `${kind} in ${code.spans.join(', ')}`);
    }
    // The user's text stays as typed.
    assert.equal(await page.textContent('#thread .msg.user'), 'Plan it, **plainly**');
    assert.equal(await page.$$eval('#thread .msg.user strong', (e) => e.length), 0);

    // Every highlighted token, the language label and the copy buttons are readable: 4.5:1 or
    // more against what is under them.
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      const figures = await contrastIn(page, `${bubble} pre code span, ${bubble} .code-head, ${bubble} .copy-btn`);
      t.diagnostic(`${scheme}: ${JSON.stringify(figures.map((f) => [f.class, f.color, f.ratio]))}`);
      const low = figures.filter((f) => f.ratio < 4.5);
      assert.deepEqual(low, [], `${scheme} scheme: tokens under 4.5:1`);
      await screenshot(page, scheme === 'light' ? 'markdown-reply' : 'markdown-reply-dark');
    }
    await page.emulateMedia({ colorScheme: 'light' });

    // Reopened (the address keeps #c=ID), the reply is drawn by the same function, alike;
    // only a reopened message knows its place in the stored history (`data-message`).
    const drawn = (e) => {
      const copy = e.cloneNode(true);
      copy.removeAttribute('data-message');
      return copy.outerHTML;
    };
    const live = await page.$eval(`${bubble}`, drawn);
    await page.reload();
    await page.waitForSelector(`${bubble} .msg-actions`);
    assert.equal(await page.$eval(`${bubble}`, drawn), live);
    assert.deepEqual(problems, []);
  });

  test('hostile model text stays inert: no script or img element, no javascript: link, text shown literally', async (t) => {
    const HOSTILE = [
      'Start <script>window.pwned=1</script> then <img src=x onerror="window.pwned=1"> end.',
      '',
      '<img src=x onerror="window.pwned=2">',
      '',
      'Click [x](javascript:window.pwned=1) or [y](data:image/png;base64,AAAA) or ![pic](https://example.com/p.png).',
      '',
      '| cell |',
      '|------|',
      '| <img src=x onerror="window.pwned=3"> |',
      '',
      '```html',
      '<script>window.pwned=4</script>',
      '```',
    ].join('\n');
    const { page, host, problems } = await session(t, browser, [Turn.text(HOSTILE)]);
    await openPanel(page, host);
    await send(page, 'Be nasty');
    await waitIdle(page);

    const bubble = '#thread .msg.assistant';
    const paragraphs = await page.$$eval(`${bubble} .md > p`, (p) => p.map((e) => e.textContent));
    assert.deepEqual(paragraphs, [
      'Start <script>window.pwned=1</script> then <img src=x onerror="window.pwned=1"> end.',
      '<img src=x onerror="window.pwned=2">',
      'Click [x](javascript:window.pwned=1) or y or [image: pic].',
    ]);
    assert.equal(await page.textContent(`${bubble} td`), '<img src=x onerror="window.pwned=3">');
    assert.equal(await page.textContent(`${bubble} pre code`), '<script>window.pwned=4</script>');
    // Only http(s) links are made: the data: one is text, the image is a link, not loaded.
    assert.deepEqual(
      await page.$$eval(`${bubble} a`, (a) => a.map((e) => [e.textContent, e.getAttribute('href')])),
      [['[image: pic]', 'https://example.com/p.png']],
    );
    assert.deepEqual(
      await page.$$eval('#thread script, #thread img, #thread iframe, #thread [onerror], #thread [style]', (e) => e.map((x) => x.outerHTML)),
      [],
    );
    // In the thread (the announcer, read by screen readers, holds the reply's text too).
    await page.locator('#thread').getByText('javascript:window.pwned=1', { exact: false }).click();
    await page.click(`${bubble} td`);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await page.evaluate(() => typeof window.pwned), 'undefined');
    assert.deepEqual(problems, []);
  });

  test('a long reply shows rendered markdown while it streams, an open fence as code', async (t) => {
    const items = Array.from({ length: 12 }, (_, i) => `- item ${i + 1}`).join('\n');
    const lines = Array.from({ length: 12 }, (_, i) => `    let v${i} = ${i};`).join('\n');
    const text = `Streaming list:\n\n${items}\n\n\`\`\`rust\nfn main() {\n${lines}\n}\n\`\`\`\n\nThe end.`;
    const { page, host } = await session(t, browser, [Turn.text(text).chunkDelay(40)]);
    await openPanel(page, host);
    await send(page, 'Stream markdown');

    // Seen in one evaluation while the run still goes on (the app is marked busy until DONE).
    const midList = await page.waitForFunction(() => {
      const items = document.querySelectorAll('#thread .msg.assistant li').length;
      return document.getElementById('app').classList.contains('busy') && items >= 2 && items < 12 ? items : false;
    }, null, { timeout: 15000 });
    assert.ok((await midList.jsonValue()) >= 2);
    const midFence = await page.waitForFunction(() => {
      const code = document.querySelector('#thread .msg.assistant pre code.language-rust');
      return document.getElementById('app').classList.contains('busy') && code && !code.textContent.includes('v11')
        ? code.querySelectorAll('span.hljs-keyword').length : false;
    }, null, { timeout: 15000 });
    assert.ok((await midFence.jsonValue()) >= 1, 'the open fence is already highlighted code');
    assert.equal(await page.$$eval('#thread .msg.assistant .msg-actions', (e) => e.length), 0, 'no message copy while streaming');
    await waitIdle(page);
    assert.equal(await page.$$eval('#thread .msg.assistant li', (e) => e.length), 12);
    assert.equal(await page.textContent('#thread .msg.assistant .md > p:last-child'), 'The end.');

    // The cost of one render of a 40 KB answer, as a figure (not a timed assertion).
    const ms = await page.evaluate(() => {
      const unit = '## Section\n\nSome *text* with `code` and a [link](https://example.com).\n\n'
        + '- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```rust\nfn f() -> u32 { 42 }\n```\n\n';
      const big = unit.repeat(Math.ceil(40960 / unit.length)).slice(0, 40960);
      const target = document.createElement('div');
      window.RojosRender.renderMarkdown(target, big);
      const runs = 10;
      const t0 = performance.now();
      for (let i = 0; i < runs; i++) window.RojosRender.renderMarkdown(target, big + i);
      return (performance.now() - t0) / runs;
    });
    t.diagnostic(`one render of a 40 KB markdown answer: ${ms.toFixed(1)} ms`);
  });

  test('copy buttons put the code, or the message source, in the clipboard', async (t) => {
    const { page, host, context, problems } = await session(t, browser, [Turn.text(MARKDOWN_REPLY)]);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: host.url });
    await openPanel(page, host);
    await send(page, 'Plan it');
    await waitIdle(page);

    const codeCopy = page.getByRole('button', { name: 'Copy code' });
    assert.equal(await codeCopy.count(), 1);
    await codeCopy.click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), RUST);
    assert.equal(await page.$eval('.code-block .copy-btn', (b) => [b.getAttribute('aria-label'), b.dataset.state].join(' ')), 'Copied copied');
    assert.equal(await page.$eval('.code-block .copy-btn', (b) => getComputedStyle(b, '::before').content), '"\u2713 Copied"');
    for (const scheme of ['light', 'dark']) {
      await page.emulateMedia({ colorScheme: scheme });
      const [copied] = await contrastIn(page, '.code-block .copy-btn');
      const [idle] = await contrastIn(page, '.msg-actions .copy-btn');
      assert.notEqual(copied.color, idle.color, '"Copied" has its own colour');
      assert.ok(copied.ratio >= 4.5, `${scheme} "Copied": ${JSON.stringify(copied)}`);
    }
    await page.emulateMedia({ colorScheme: 'light' });

    // The message's button, from the keyboard.
    await page.focus('#thread .msg.assistant .msg-actions .copy-btn');
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Copy message');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.activeElement.dataset.state === 'copied');
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), MARKDOWN_REPLY);

    // Without the clipboard API (plain http on a LAN address), the select-and-copy fallback.
    await page.waitForFunction(() => document.querySelector('.code-block .copy-btn').dataset.state === 'idle', null, { timeout: 5000 });
    await page.evaluate(() => {
      Object.defineProperty(navigator, 'clipboard', { value: undefined });
      document.addEventListener('copy', () => { window.copiedByFallback = String(document.getSelection()); });
    });
    await page.click('.code-block .copy-btn');
    await page.waitForFunction(() => document.querySelector('.code-block .copy-btn').dataset.state !== 'idle');
    assert.equal(await page.$eval('.code-block .copy-btn', (b) => b.dataset.state), 'copied');
    assert.equal(await page.evaluate(() => window.copiedByFallback), RUST);
    assert.equal(await page.$$eval('textarea.copy-fallback', (e) => e.length), 0, 'the helper is removed');
    assert.deepEqual(problems, []);
  });
});
