// Rojos chat panel: the first-run card (docs/panel.md, "Provider banner"). When the selected
// rojo has no provider it can use, `GET /rojos` gives the fix as one sentence in which
// commands and names are quoted in backticks ("start it with `ollama serve` …; or export one
// of OPENAI_API_KEY, GEMINI_API_KEY and restart the server"). The card shows that sentence with
// the quoted parts as code (no literal backticks), and below it each command to run as a line
// of its own with a Copy button: every quoted part with a space in it, and an
// `export NAME=…` line for each key variable the sentence names.
//
// Text is only ever set as textContent.
'use strict';

window.RojosFirstRun = (() => {
  // An environment variable holding a key, as the server's sentences name them.
  const KEY_VAR = /\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:API_)?(?:KEY|TOKEN)\b/g;

  function node(tag, className, text) {
    const n = document.createElement(tag);
    if (className) n.className = className;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // The sentence's parts: [text, isCode] pairs (backticks split it).
  function parts(fix) {
    return String(fix).split('`').map((text, i) => [text, i % 2 === 1]).filter(([t]) => t);
  }

  // The commands the sentence asks to run, in order, each once.
  function commands(fix) {
    const out = [];
    for (const [text, code] of parts(fix)) {
      if (code && /\s/.test(text.trim())) out.push(text.trim());
    }
    for (const name of String(fix).match(KEY_VAR) || []) out.push('export ' + name + '=');
    return [...new Set(out)];
  }

  function copyButton(text) {
    const button = node('button', 'btn firstrun-copy', 'Copy');
    button.type = 'button';
    button.setAttribute('aria-label', 'Copy: ' + text);
    button.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = 'Copied';
      } catch (_) {
        // No clipboard (an insecure origin): select the command so Ctrl+C copies it.
        const code = button.previousElementSibling;
        const range = document.createRange();
        range.selectNodeContents(code);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        button.textContent = 'Selected: press Ctrl+C';
      }
      setTimeout(() => { button.textContent = 'Copy'; }, 2000);
    });
    return button;
  }

  // Fills `banner` with the card for `fix`.
  function fill(banner, fix) {
    // Read again every few seconds: the same fix is not drawn again (focus stays on a Copy).
    if (banner.dataset.fix === fix && banner.firstChild) return;
    banner.dataset.fix = fix;
    const sentence = node('p', 'firstrun-text');
    for (const [text, code] of parts(fix)) sentence.append(code ? node('code', null, text) : document.createTextNode(text));
    banner.replaceChildren(node('strong', 'firstrun-title', 'This rojo cannot answer yet.'), sentence);
    const list = commands(fix);
    if (!list.length) return;
    const box = node('div', 'firstrun-commands');
    box.append(node('p', 'firstrun-label', list.length === 1 ? 'Run on the server:' : 'On the server, run:'));
    for (const command of list) {
      const row = node('div', 'firstrun-command');
      row.append(node('code', 'firstrun-code', command), copyButton(command));
      box.append(row);
    }
    if (list.some((c) => c.startsWith('export '))) {
      box.append(node('p', 'firstrun-note', 'One key is enough; then restart the server.'));
    }
    banner.append(box);
  }

  return { fill, commands };
})();
