// Rojos chat panel: "Earlier messages summarised" (docs/panel.md, "Long conversations").
// When a conversation outgrew its model's context window the server had the model summarise
// the older messages, and sends that summary in their place from then on (docs/api.md, "Long
// conversations"); the messages themselves stay stored and shown. This file draws a marker
// where a summary starts to stand for the messages before it, with the summary in a
// <details>: live from the stream's CONTEXT_COMPACTED event, and from
// GET /conversations/{id}/compactions when a conversation is opened.
//
// It exposes one global, `RojosCompaction`; panel.js calls it and hands it what it needs
// (`attach`: its `api`, how to tell a refused token, the open conversation).
//
// Safety rule (as panel.js): the summary is the model's text, rendered as markdown by
// panel-render.js (elements made one token at a time, never parsed as HTML).
'use strict';

window.RojosCompaction = (() => {
  let panel = null; // what panel.js hands over in `attach`

  function attach(hooks) {
    panel = hooks;
  }

  function node(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function plural(n, one, many) {
    return n + ' ' + (n === 1 ? one : many);
  }

  // The marker of a summary standing for the first `covers` messages: collapsed, it says so;
  // opened, it shows the summary.
  function marker(covers, summary) {
    const details = node('details', 'compaction');
    details.dataset.covers = String(covers);
    const head = node('summary', 'compaction-head');
    head.append(
      node('span', 'compaction-title', 'Earlier messages summarised'),
      node('span', 'compaction-count', plural(covers, 'message', 'messages') + ' above'),
    );
    const body = node('div', 'compaction-body');
    body.append(node('p', 'compaction-why',
      'The conversation outgrew the model\u2019s context window. From here on the rojo reads this '
      + 'summary instead of the ' + plural(covers, 'message', 'messages')
      + ' above; they are still stored and shown.'));
    const text = node('div', 'compaction-summary');
    text.dataset.text = summary;
    if (window.RojosRender) window.RojosRender.renderMarkdown(text, summary);
    else text.textContent = summary;
    body.append(text);
    details.append(head, body);
    return details;
  }

  function valid(c) {
    return c && Number.isInteger(c.covers) && c.covers > 0 && typeof c.summary === 'string';
  }

  // The conversation's summaries, the one covering the fewest messages first; [] when the
  // server has none (or cannot say: the conversation still opens).
  async function list(id) {
    try {
      const response = await panel.api('/conversations/' + encodeURIComponent(id) + '/compactions');
      if (!response.ok) return [];
      const body = await response.json();
      return Array.isArray(body) ? body.filter(valid) : [];
    } catch (e) {
      if (panel.isAuthError(e)) throw e;
      return [];
    }
  }

  // The markers to draw before stored message `index` while a history is drawn.
  function before(compactions, index) {
    return compactions.filter((c) => c.covers === index).map((c) => marker(c.covers, c.summary));
  }

  function thread() {
    return document.getElementById('thread');
  }

  function shown(covers) {
    return !!thread().querySelector('.compaction[data-covers="' + covers + '"]');
  }

  // The user messages stored from index `from` on (an undo's record is drawn as a note, not a
  // bubble), read page by page; null when a page cannot be read.
  async function usersFrom(id, from) {
    let count = 0;
    for (let at = from, pages = 0; pages < 1000; pages++) {
      const response = await panel.api('/conversations/' + encodeURIComponent(id) + '?from=' + at);
      if (!response.ok) return null;
      const page = await response.json();
      if (!Array.isArray(page)) return null;
      for (const m of page) {
        if (m && m.role === 'user' && !(m.rojos && m.rojos.undo)) count += 1;
      }
      const next = Number(response.headers.get('Rojos-Next-From') || NaN);
      if (!(next > at) || page.length === 0) return count;
      at = next;
    }
    return null;
  }

  // CONTEXT_COMPACTED during a run: the marker goes before stored message `covers` (always a
  // user message). A bubble drawn from the stored history knows its index; one sent in this
  // tab does not, so it is found by counting the user messages stored from `covers` on (the
  // run's own message is the last of them).
  async function live(event) {
    if (!valid(event) || shown(event.covers)) return;
    const element = marker(event.covers, event.summary);
    const place = (target) => {
      if (shown(event.covers)) return;
      if (target) target.before(element);
      else thread().insertBefore(element, thread().querySelector('.typing'));
      if (window.RojosA11y) window.RojosA11y.announce('Earlier messages were summarised to fit the model\u2019s context window.');
    };
    const known = thread().querySelector('[data-message="' + event.covers + '"]');
    if (known) { place(known); return; }
    const bubbles = [...thread().querySelectorAll('.msg.user:not(.refused)')];
    let target = bubbles[bubbles.length - 1] || null;
    const id = panel && panel.conversationId();
    if (id) {
      try {
        const users = await usersFrom(id, event.covers);
        if (users && users <= bubbles.length) target = bubbles[bubbles.length - users];
      } catch (e) {
        if (panel.isAuthError(e)) return;
      }
    }
    place(target);
  }

  return { attach, list, before, live, marker };
})();
