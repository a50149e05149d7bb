// The provider banner in real headless Chromium, against the real `rojos` binary: before
// anything is typed, a rojo whose provider is unreachable shows the fix above the input (in a
// `role="status"` region, readable in both colour schemes), and a rojo with a ready provider
// shows no banner and names its provider and model under the input.

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { launch, screenshot } from './support/browser.js';
import { openPanel, session } from './support/panel.js';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

/** A loopback port nothing listens on. */
async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The WCAG contrast ratio of two `rgb(...)` colours. */
function contrast(a, b) {
  const luminance = (rgb) => {
    const [r, g, b2] = rgb.match(/\d+(\.\d+)?/g).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b2;
  };
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

async function bannerLook(page) {
  return page.$eval('#provider-banner', (e) => {
    const style = getComputedStyle(e);
    return { color: style.color, background: style.backgroundColor };
  });
}

describe('the provider banner', () => {
  test('an unreachable provider shows the fix above the input before anything is typed', async (t) => {
    const port = await closedPort();
    const { page, host, problems } = await session(t, browser, [], {
      provider: `kind = "ollama"\nbase_url = "http://127.0.0.1:${port}/v1"`,
    });
    await openPanel(page, host);
    await page.waitForSelector('#provider-banner:not([hidden])', { timeout: 20000 });

    const fix = `Ollama is not running at 127.0.0.1:${port}: start it with \`ollama serve\` and pull a `
      + 'model with tool support (`ollama pull qwen2.5:7b`), or set another provider in rojos.toml';
    // The first-run card: the fix without literal backticks, its commands to copy.
    assert.equal(await page.textContent('#provider-banner .firstrun-text'), fix.replaceAll('`', ''));
    assert.deepEqual(
      await page.$$eval('#provider-banner .firstrun-code', (c) => c.map((e) => e.textContent)),
      ['ollama serve', 'ollama pull qwen2.5:7b'],
    );
    assert.equal(
      await page.$eval('#provider-banner', (e) => e.closest('[role="status"]')?.id),
      'provider-status',
    );
    // Above the input, and the input is not held back: the user can still type.
    const [banner, input] = await Promise.all(
      ['#provider-banner', '#input'].map((s) => page.$eval(s, (e) => e.getBoundingClientRect().top)),
    );
    assert.ok(banner < input, `banner at ${banner}, input at ${input}`);
    assert.equal(await page.isEnabled('#input'), true);
    assert.equal(await page.inputValue('#input'), '');
    assert.ok(contrast(...Object.values(await bannerLook(page))) >= 4.5, JSON.stringify(await bannerLook(page)));
    await screenshot(page, 'provider-banner');

    await page.emulateMedia({ colorScheme: 'dark' });
    const dark = await bannerLook(page);
    assert.ok(contrast(dark.color, dark.background) >= 4.5, JSON.stringify(dark));
    await screenshot(page, 'provider-banner-dark');

    // A message sent anyway is refused with the same fix, and no conversation is made.
    await page.fill('#input', 'hello');
    await page.press('#input', 'Enter');
    await page.waitForSelector('#thread .msg.error');
    const refused = await page.textContent('#thread .msg.error');
    assert.ok(refused.endsWith(fix), refused);
    assert.equal(await page.$$eval('#history .history-item', (items) => items.length), 0);
    // Chromium logs the refused request itself; nothing else may go wrong.
    assert.deepEqual(problems.filter((p) => !p.includes('status of 503')), []);
  });

  test('a ready provider shows no banner and names the provider and model', async (t) => {
    const { page, host, problems } = await session(t, browser, []);
    await openPanel(page, host);
    await page.waitForFunction(
      () => document.getElementById('provider-note').textContent === 'Uses scripted \u00B7 scripted-model',
      null,
      { timeout: 20000 },
    );
    assert.equal(await page.isHidden('#provider-banner'), true);
    assert.equal(await page.textContent('#provider-banner'), '');
    assert.deepEqual(problems, []);
  });
});
