// Renders the model's markdown as DOM nodes: CommonMark + GitHub tables and strikethrough,
// parsed by markdown-it, fenced code highlighted by lowlight (highlight.js grammars), with
// copy buttons on code blocks and finished messages. panel.js calls `window.RojosRender`.
// See docs/panel.md ("What a reply renders" and "Safety").
//
// Safety rule, as in panel.js: no markup is ever parsed into the page. We walk markdown-it's
// token stream and lowlight's syntax tree and create each element ourselves, with text set as
// text nodes, so raw HTML in model text can only ever become characters. Links keep only
// http(s), mailto and same-site hrefs; images are not loaded (shown as links).
'use strict';

(() => {
  const { MarkdownIt, lowlight } = window.RojosVendor;

  // `html: false`: raw HTML is text (CommonMark's html blocks and inline html are not parsed).
  // `linkify`: bare URLs become links, as chat products do. Tables and strikethrough are on in
  // the default preset.
  const md = new MarkdownIt('default', { html: false, linkify: true, typographer: false });

  // ---- links ---------------------------------------------------------------------------------

  // markdown-it already refuses javascript:, vbscript:, file: and non-image data: URLs
  // (`validateLink`); this second check keeps only what a chat reply should open.
  function safeHref(raw) {
    if (typeof raw !== 'string' || !raw) return null;
    let url;
    try { url = new URL(raw, window.location.href); } catch (_) { return null; }
    return ['http:', 'https:', 'mailto:'].includes(url.protocol) ? url.href : null;
  }

  function link(href) {
    const a = document.createElement('a');
    a.href = href;
    a.rel = 'noopener noreferrer nofollow';
    a.target = '_blank';
    return a;
  }

  // ---- code blocks ---------------------------------------------------------------------------

  // Fence languages as class names: letters, digits and a few signs (c++, c#, objective-c).
  function fenceLanguage(info) {
    const word = (info || '').trim().split(/\s+/)[0].toLowerCase();
    return /^[\w+#.-]{1,40}$/.test(word) ? word : '';
  }

  // Streaming re-renders the whole reply every frame; only the growing fence is highlighted
  // again, finished ones come from here. Bounded: the oldest entry goes first.
  const highlighted = new Map();
  const HIGHLIGHT_CACHE = 200;

  function highlightTree(language, code) {
    if (!language || !lowlight.registered(language)) return null;
    const key = language + '\u0000' + code;
    let tree = highlighted.get(key);
    if (!tree) {
      try { tree = lowlight.highlight(language, code); } catch (_) { return null; }
      highlighted.set(key, tree);
      if (highlighted.size > HIGHLIGHT_CACHE) highlighted.delete(highlighted.keys().next().value);
    }
    return tree;
  }

  // lowlight's tree (hast) to spans: elements carry only their `hljs-*` class names.
  function appendHast(parent, nodes) {
    for (const n of nodes) {
      if (n.type === 'text') {
        parent.appendChild(document.createTextNode(n.value));
      } else if (n.type === 'element') {
        const span = document.createElement('span');
        const names = (n.properties && n.properties.className) || [];
        span.className = names.filter((c) => /^[\w-]+$/.test(c)).join(' ');
        appendHast(span, n.children || []);
        parent.appendChild(span);
      }
    }
  }

  function codeBlock(content, info) {
    const code = content.replace(/\n$/, '');
    const language = fenceLanguage(info);
    const block = document.createElement('div');
    block.className = 'code-block';
    const head = document.createElement('div');
    head.className = 'code-head';
    // The language name is drawn by CSS (attr(data-lang)), so copying or reading the reply's
    // text gives the code alone.
    if (language) head.dataset.lang = language;
    head.appendChild(copyButton('Copy code', () => code));
    const pre = document.createElement('pre');
    const codeEl = document.createElement('code');
    codeEl.className = language ? `hljs language-${language}` : 'hljs';
    const tree = highlightTree(language, code);
    if (tree) appendHast(codeEl, tree.children);
    else codeEl.textContent = code;
    pre.appendChild(codeEl);
    block.append(head, pre);
    return block;
  }

  // ---- copy buttons --------------------------------------------------------------------------

  // A button whose visible label ("Copy" / "Copied") is drawn by CSS from `data-state`; its
  // accessible name is `aria-label`, which says "Copied" for two seconds after a click.
  function copyButton(label, text) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy-btn';
    button.setAttribute('aria-label', label);
    button.title = label;
    button.dataset.state = 'idle';
    let timer = null;
    button.addEventListener('click', async () => {
      const ok = await copyText(text());
      button.dataset.state = ok ? 'copied' : 'failed';
      button.setAttribute('aria-label', ok ? 'Copied' : 'Copy failed');
      clearTimeout(timer);
      timer = setTimeout(() => {
        button.dataset.state = 'idle';
        button.setAttribute('aria-label', label);
      }, 2000);
    });
    return button;
  }

  // The clipboard API (secure contexts: https or loopback); elsewhere, e.g. the panel over
  // plain http on a LAN address, the old select-and-copy through a hidden text area.
  async function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      try { await navigator.clipboard.writeText(text); return true; } catch (_) { /* fallback */ }
    }
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.className = 'copy-fallback';
    document.body.appendChild(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
    area.remove();
    return ok;
  }

  // ---- the token walk ------------------------------------------------------------------------

  // Block and inline tokens that open an element: markdown-it's `tag` names it. Anything not
  // listed (html_block, html_inline with `html: false` never appear) falls back to its text.
  const CONTAINERS = new Set([
    'paragraph', 'heading', 'blockquote', 'bullet_list', 'ordered_list', 'list_item',
    'table', 'thead', 'tbody', 'tr', 'th', 'td', 'em', 'strong', 's',
  ]);

  function openElement(token) {
    const e = document.createElement(token.tag);
    if (token.type === 'ordered_list_open') {
      // markdown-it sets `start` only when the list does not start at 1.
      const start = token.attrGet('start');
      if (start !== null && /^\d{1,9}$/.test(start)) e.setAttribute('start', start);
    }
    if (token.type === 'th_open' || token.type === 'td_open') {
      // markdown-it writes alignment as a style attribute, which the CSP would block: a class.
      const m = /text-align:(left|center|right)/.exec(token.attrGet('style') || '');
      if (m) e.className = `align-${m[1]}`;
    }
    return e;
  }

  // Appends `tokens` (one level: block tokens, or an inline token's children) under `root`.
  function appendTokens(root, tokens) {
    const stack = [root];
    const top = () => stack[stack.length - 1];
    for (const token of tokens) {
      const kind = token.type.replace(/_(open|close)$/, '');
      if (token.nesting === 1 && (CONTAINERS.has(kind) || kind === 'link')) {
        let e;
        if (kind === 'link') {
          const href = safeHref(token.attrGet('href'));
          // A refused link keeps its text, inside a plain span.
          e = href ? link(href) : document.createElement('span');
        } else if (token.hidden) {
          // Paragraphs of tight lists: their text goes straight into the list item.
          e = null;
        } else {
          e = openElement(token);
        }
        if (e) top().appendChild(e);
        stack.push(e || top());
      } else if (token.nesting === -1 && (CONTAINERS.has(kind) || kind === 'link')) {
        if (stack.length > 1) stack.pop();
      } else {
        appendLeaf(top(), token);
      }
    }
  }

  function appendLeaf(parent, token) {
    switch (token.type) {
      case 'inline':
        appendTokens(parent, token.children || []);
        break;
      case 'text':
        parent.appendChild(document.createTextNode(token.content));
        break;
      case 'softbreak':
        parent.appendChild(document.createTextNode('\n'));
        break;
      case 'hardbreak':
        parent.appendChild(document.createElement('br'));
        break;
      case 'code_inline': {
        const c = document.createElement('code');
        c.textContent = token.content;
        parent.appendChild(c);
        break;
      }
      case 'fence':
        parent.appendChild(codeBlock(token.content, token.info));
        break;
      case 'code_block':
        parent.appendChild(codeBlock(token.content, ''));
        break;
      case 'hr':
        parent.appendChild(document.createElement('hr'));
        break;
      case 'image':
        parent.appendChild(imageLink(token));
        break;
      default:
        if (token.content) parent.appendChild(document.createTextNode(token.content));
    }
  }

  // Images are not loaded (the page's policy allows images from this server only, and a
  // reply's image could track its reader): they show as a link named by their alt text.
  function imageLink(token) {
    const alt = token.content || token.attrGet('alt') || 'image';
    const href = safeHref(token.attrGet('src'));
    const e = href ? link(href) : document.createElement('span');
    e.className = 'md-image';
    e.textContent = `[image: ${alt}]`;
    return e;
  }

  // ---- the page's entry points ---------------------------------------------------------------

  // Replaces `bubble`'s rendered body with `text` as markdown. The body is a child of the
  // bubble, so the message's own controls (its copy button) survive re-renders.
  function renderMarkdown(bubble, text) {
    let body = bubble.querySelector(':scope > .md');
    if (!body) {
      body = document.createElement('div');
      body.className = 'md';
      bubble.prepend(body);
    }
    const fresh = document.createElement('div');
    fresh.className = 'md';
    appendTokens(fresh, md.parse(text, {}));
    body.replaceWith(fresh);
  }

  // A finished message gets a button copying its markdown source (`source()` is read at click
  // time). Idempotent.
  function addMessageCopy(bubble, source) {
    if (bubble.querySelector(':scope > .msg-actions')) return;
    const actions = document.createElement('div');
    actions.className = 'msg-actions';
    actions.appendChild(copyButton('Copy message', source));
    bubble.appendChild(actions);
  }

  window.RojosRender = Object.freeze({ renderMarkdown, addMessageCopy });
})();
