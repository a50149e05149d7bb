// Rojos chat panel: accessibility and live status (docs/panel.md, "Accessibility" and
// "Live status"). One global, `window.RojosA11y`, used by small hooks in panel.js:
//
// - live status of a tool call the model is still writing (TOOL_CALL_STARTED and
//   TOOL_CALL_PROGRESS, docs/api.md): the activity line says "writing… 12.3 KB";
// - the announcer, a visually hidden polite live region: finished replies and tool results
//   are announced once each, never token by token;
// - modal dialogs that hold the keyboard (Tab and Shift+Tab wrap inside) and the token
//   prompt, which stays open until a token is given (Escape does not close it);
// - the selected rojo's tools as a line under the input (no hover needed);
// - at phone width a shorter placeholder (not cut off) and the rojo picker showing names only.
//
// Like panel.js, it only ever sets text (textContent), never markup.
'use strict';

window.RojosA11y = (() => {
  const PHONE = '(max-width: 760px)';
  const SHORT_PLACEHOLDER = 'Message the rojo';
  const ANNOUNCE_MAX = 400; // characters of a reply read out; the log holds the rest
  const KEPT_ANNOUNCEMENTS = 5;
  // Bubbles already announced (kept out of the DOM: a live bubble must look like a reopened one).
  const announced = new WeakSet();

  // ---- live status -------------------------------------------------------------------------

  // "812 B", "12.3 KB", "1.4 MB" (1 KB = 1,024 bytes).
  function formatBytes(bytes) {
    if (!(bytes >= 0)) return '';
    if (bytes < 1024) return bytes + ' B';
    if (bytes < 1024 * 1024) return (bytes / 1024).toFixed(1) + ' KB';
    return (bytes / (1024 * 1024)).toFixed(1) + ' MB';
  }

  // Marks an activity line as a call the model is still writing, `bytes` of arguments so far.
  function writing(line, bytes) {
    line.dataset.phase = 'writing';
    line.dataset.bytes = String(bytes || 0);
    const status = line.querySelector('.act-status');
    status.textContent = bytes > 0 ? 'writing\u2026 ' + formatBytes(bytes) : 'writing\u2026';
    status.classList.add('act-size');
    const args = line.querySelector('.act-args-full');
    if (args) args.textContent = 'The model is still writing them (' + formatBytes(bytes || 0) + ' so far).';
    const result = line.querySelector('.act-result');
    if (result) result.textContent = 'Not run yet.';
  }

  // The started line a TOOL_CALL completes, taken out of `started` (index → line): the one
  // with the same provider id, else the first of the same tool name (docs/api.md: ids may be
  // replaced, the order is kept). `null` when none (a client that saw no STARTED).
  function claim(started, event) {
    let found = null;
    for (const [index, line] of started) {
      if (event.id && line.dataset.callId === event.id) { found = index; break; }
    }
    if (found === null) {
      const byName = [...started].filter(([, line]) => line.dataset.tool === event.name);
      byName.sort((a, b) => a[0] - b[0]);
      if (byName.length) found = byName[0][0];
    }
    if (found === null) return null;
    const line = started.get(found);
    started.delete(found);
    delete line.dataset.phase;
    line.querySelector('.act-status').classList.remove('act-size');
    return line;
  }

  // ---- the announcer -----------------------------------------------------------------------

  // Adds one announcement to the polite live region (each addition is read once); only the
  // last few are kept.
  function announce(text) {
    const region = document.getElementById('announcer');
    if (!region || !text) return;
    const item = document.createElement('p');
    item.textContent = text;
    region.appendChild(item);
    while (region.childElementCount > KEPT_ANNOUNCEMENTS) region.firstElementChild.remove();
  }

  // A finished reply bubble, once (a bubble may be finished more than once).
  function announceReply(bubble) {
    if (!bubble || announced.has(bubble)) return;
    const text = (bubble.dataset.text || '').trim();
    if (!text) return;
    announced.add(bubble);
    const cut = text.length > ANNOUNCE_MAX ? text.slice(0, ANNOUNCE_MAX - 1) + '\u2026' : text;
    announce('The rojo replied: ' + cut);
  }

  function announceTool(name, ok) {
    announce((name || 'A tool') + (ok ? ' finished.' : ' failed.'));
  }

  // ---- dialogs -----------------------------------------------------------------------------

  const FOCUSABLE = 'button:not([disabled]), input:not([disabled]), select:not([disabled]), ' +
    'textarea:not([disabled]), a[href], [tabindex]:not([tabindex="-1"])';

  // Tab from the last control goes to the first, Shift+Tab from the first to the last: the
  // keyboard stays in the dialog (showModal already makes the page behind it inert).
  function holdFocus(dialog) {
    dialog.addEventListener('keydown', (e) => {
      if (e.key !== 'Tab') return;
      const items = [...dialog.querySelectorAll(FOCUSABLE)].filter((x) => x.offsetParent !== null);
      if (!items.length) return;
      const first = items[0];
      const last = items[items.length - 1];
      if (e.shiftKey && (document.activeElement === first || !dialog.contains(document.activeElement))) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && document.activeElement === last) {
        e.preventDefault();
        first.focus();
      }
    });
  }

  // The token prompt: modal, focus on `focusTarget`, not closed by Escape (the panel has
  // nothing to show without a token); only `closeModal` closes it.
  function openModal(dialog, focusTarget) {
    dialog.hidden = false;
    dialog.dataset.keepOpen = 'true';
    if (!dialog.open) dialog.showModal();
    if (focusTarget) focusTarget.focus();
  }

  function closeModal(dialog) {
    delete dialog.dataset.keepOpen;
    if (dialog.open) dialog.close();
    dialog.hidden = true;
  }

  function keepOpen(dialog) {
    dialog.addEventListener('cancel', (e) => { if (dialog.dataset.keepOpen) e.preventDefault(); });
    // Chromium lets a second Escape without user activation close it anyway: open it again.
    dialog.addEventListener('close', () => {
      if (!dialog.dataset.keepOpen) return;
      dialog.showModal();
      const first = dialog.querySelector(FOCUSABLE);
      if (first) first.focus();
    });
  }

  // ---- the rojo's tools, the current conversation, the placeholder ------------------------

  // At phone width a rojo's option shows its name only (the model is on the line under the
  // input), so the picker stays readable in its share of the one-row top bar.
  function fitPicker() {
    const phone = window.matchMedia(PHONE).matches;
    for (const option of document.querySelectorAll('#rojo option')) {
      if (!option.dataset.full) option.dataset.full = option.textContent;
      option.textContent = phone ? option.value : option.dataset.full;
    }
  }

  function showTools(rojo) {
    fitPicker();
    const line = document.getElementById('rojo-tools');
    if (!line) return;
    if (!rojo) { line.textContent = ''; return; }
    const tools = Array.isArray(rojo.tools) ? rojo.tools : [];
    line.textContent = 'Tools: ' + (tools.length ? tools.join(', ') : 'none');
  }

  function markCurrent(item, current) {
    if (current) item.setAttribute('aria-current', 'page');
    else item.removeAttribute('aria-current');
  }

  function fitPlaceholder() {
    const input = document.getElementById('input');
    if (!input) return;
    if (!input.dataset.longPlaceholder) input.dataset.longPlaceholder = input.placeholder;
    input.placeholder = window.matchMedia(PHONE).matches
      ? SHORT_PLACEHOLDER
      : input.dataset.longPlaceholder;
  }

  function init() {
    for (const dialog of document.querySelectorAll('dialog')) holdFocus(dialog);
    const token = document.getElementById('token-overlay');
    if (token) keepOpen(token);
    fitPlaceholder();
    window.matchMedia(PHONE).addEventListener('change', () => { fitPlaceholder(); fitPicker(); });
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();

  return {
    formatBytes, writing, claim, announce, announceReply, announceTool,
    openModal, closeModal, showTools, markCurrent,
  };
})();
