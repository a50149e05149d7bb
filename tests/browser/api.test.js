// The endpoints the panel stands on, over plain HTTP against the real `rojos` binary: the page
// and its headers, `GET /rojos`, `GET /projects` and `GET /conversations?projectId=`.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { DEMO_TOKEN, startHost, TOKEN } from './support/host.js';
import { ScriptedUpstream, Turn } from './support/upstream.js';

async function hostWith(t, turns = []) {
  const upstream = await ScriptedUpstream.start(turns);
  const host = await startHost(upstream, t.name);
  t.after(async () => {
    await host.stop();
    await upstream.stop();
  });
  return { host, upstream };
}

const auth = (token) => ({ headers: { Authorization: `Bearer ${token}` } });

describe('the endpoints of the panel', () => {
  test('GET / serves the page, its script and style from the binary with a strict policy', async (t) => {
    const { host } = await hostWith(t);
    const page = await fetch(`${host.url}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type'), /^text\/html/);
    const csp = page.headers.get('content-security-policy');
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    const html = await page.text();
    assert.match(html, /<script src="\/assets\/panel\.js" defer><\/script>/);
    assert.doesNotMatch(html, /<script>/, 'no inline script');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin');

    for (const [asset, type] of [['panel.js', /^text\/javascript/], ['panel.css', /^text\/css/]]) {
      const response = await fetch(`${host.url}/assets/${asset}`);
      assert.equal(response.status, 200, asset);
      assert.match(response.headers.get('content-type'), type);
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
    }
  });

  test('GET /rojos lists each rojo with its provider, status and enabled tools, for a valid token only', async (t) => {
    const { host } = await hostWith(t);
    assert.equal((await fetch(`${host.url}/rojos`)).status, 401);
    // The provider is `checking` until its first check (a model list answered 404) ends.
    let rojos;
    for (let i = 0; i < 100; i += 1) {
      const response = await fetch(`${host.url}/rojos`, auth(DEMO_TOKEN));
      assert.equal(response.status, 200);
      rojos = await response.json();
      if (rojos.every((r) => r.status === 'ready')) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const provider = { name: 'scripted', label: 'scripted', model: 'scripted-model' };
    // No window is configured and the scripted provider lists none: the default applies.
    const context = { tokens: 8192, source: 'default' };
    assert.deepEqual(rojos, [
      {
        name: 'default',
        model: 'scripted-model',
        tools: ['create_directory', 'delete_path', 'get_text_content', 'list_files', 'move_path', 'read_path_meta', 'write_text_content'],
        provider,
        status: 'ready',
        fix: null,
        context,
      },
      {
        name: 'reader',
        model: 'scripted-model',
        tools: ['get_text_content', 'list_files', 'read_path_meta'],
        provider,
        status: 'ready',
        fix: null,
        context,
      },
    ]);
  });

  test('GET /projects lists the existing projects the token may use', async (t) => {
    const { host } = await hostWith(t);
    for (const id of ['demo', 'other']) host.projectRoot(id);
    fs.mkdirSync(path.join(host.dir, 'storage', 'not a project id'));
    assert.equal((await fetch(`${host.url}/projects`)).status, 401);
    assert.deepEqual(await (await fetch(`${host.url}/projects`, auth(TOKEN))).json(), ['demo', 'other']);
    assert.deepEqual(await (await fetch(`${host.url}/projects`, auth(DEMO_TOKEN))).json(), ['demo']);
  });

  test("GET /conversations?projectId= lists a project's conversations, newest first, authorised", async (t) => {
    const { host } = await hostWith(t, [Turn.text('One.'), Turn.text('Two.')]);
    const chat = async (message) => {
      const response = await fetch(`${host.url}/chat`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ projectId: 'demo', message }),
      });
      const lines = (await response.text()).trim().split('\n').map((l) => JSON.parse(l));
      return lines.at(-1).conversationId;
    };
    const first = await chat('First question');
    const second = await chat('Second question');

    const list = async (query, token = TOKEN) => fetch(`${host.url}/conversations${query}`, auth(token));
    assert.equal((await fetch(`${host.url}/conversations?projectId=demo`)).status, 401);
    assert.equal((await list('?projectId=other', DEMO_TOKEN)).status, 403);
    assert.equal((await list('')).status, 400);
    assert.equal((await list('?projectId=..')).status, 400);

    const response = await list('?projectId=demo', DEMO_TOKEN);
    assert.equal(response.status, 200);
    const summaries = await response.json();
    assert.deepEqual(
      summaries.map((c) => [c.id, c.title, c.rojo, c.messageCount]),
      [[second, 'Second question', 'default', 2], [first, 'First question', 'default', 2]],
    );
    assert.ok(!Number.isNaN(Date.parse(summaries[0].updatedAt)));
    assert.equal((await (await list('?projectId=demo&limit=1')).json()).length, 1);
    assert.deepEqual(await (await list('?projectId=other')).json(), []);
  });
});
