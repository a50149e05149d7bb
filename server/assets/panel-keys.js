// Rojos chat panel: keyboard shortcuts, Escape, and the tab's title (docs/panel.md,
// "Keyboard"). One global, `RojosKeys`.
//
// - Ctrl+Shift+O (⌘+Shift+O on a Mac): new chat; Ctrl+K (⌘+K): search the conversations;
//   `/` (outside a text field) or Shift+Escape: focus the message input. They are named on
//   the controls (`aria-keyshortcuts`, tooltips) and in the empty chat.
// - Escape: closes what is open (the conversations drawer, then the files pane), and with
//   nothing open stops the reply that is streaming. A modal dialog keeps Escape to itself.
// - The tab's title is the open conversation's ("Fix the intro · Rojos"), "Rojos" otherwise.
'use strict';

window.RojosKeys = (() => {
  const MAC = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
  const MOD = MAC ? '\u2318' : 'Ctrl+';
  const $ = (id) => document.getElementById(id);

  const typing = (t) => t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  const visible = (e) => e && !e.hidden && e.offsetParent !== null;

  function focusInput() {
    const input = $('input');
    if (input) input.focus();
  }

  function search() {
    const app = $('app');
    const toggle = $('toggle-sidebar');
    // At phone width the list is a drawer: open it first.
    if (toggle && visible(toggle) && !app.classList.contains('sidebar-open')) toggle.click();
    const field = $('history-search');
    if (!field) return;
    // The drawer slides in (its `visibility` changes at the end): try until it takes focus.
    let tries = 0;
    const take = () => {
      field.focus();
      if (document.activeElement === field) field.select();
      else if (++tries < 30) setTimeout(take, 20);
    };
    take();
  }

  function onKey(e) {
    if (document.querySelector('dialog[open]')) return;
    const mod = MAC ? e.metaKey : e.ctrlKey;
    const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    if (mod && e.shiftKey && key === 'o') {
      e.preventDefault();
      const button = $('new-chat');
      if (button && !button.disabled) button.click();
      focusInput();
    } else if (mod && !e.shiftKey && key === 'k') {
      e.preventDefault();
      search();
    } else if (key === '/' && !mod && !e.altKey && !typing(e.target)) {
      e.preventDefault();
      focusInput();
    } else if (key === 'Escape' && e.shiftKey) {
      e.preventDefault();
      focusInput();
    } else if (key === 'Escape' && !e.defaultPrevented) {
      escape(e);
    }
  }

  // One thing per Escape: the drawer (panel.js closes it), the files pane, then the reply.
  function escape(e) {
    if ($('app').classList.contains('sidebar-open')) return;
    const pane = $('files-pane');
    if (pane && !pane.hidden) {
      e.preventDefault();
      $('files-close').click();
      return;
    }
    const stop = $('stop');
    if (stop && !stop.hidden) {
      e.preventDefault();
      stop.click();
      focusInput();
    }
  }

  // The open conversation's title in the tab, from the sidebar's current entry.
  function retitle() {
    const current = document.querySelector('#history .history-item[aria-current="page"] .history-title');
    const open = /#c=/.test(location.hash);
    const name = current && open ? current.textContent.trim() : '';
    const title = name ? name + ' \u00B7 Rojos' : 'Rojos';
    if (document.title !== title) document.title = title;
  }

  function label(id, keys, said) {
    const e = $(id);
    if (!e) return;
    e.setAttribute('aria-keyshortcuts', keys);
    e.title = (e.title ? e.title + ' ' : '') + '(' + said + ')';
  }

  function init() {
    const meta = MAC ? 'Meta' : 'Control';
    label('new-chat', meta + '+Shift+O', MOD + (MAC ? '\u21E7O' : 'Shift+O'));
    label('history-search', meta + '+K', MOD + 'K');
    label('input', '/ Shift+Escape', '/');
    label('stop', 'Escape', 'Esc');
    const list = $('shortcuts');
    if (list) {
      list.textContent = 'Keys: ' + MOD + (MAC ? '\u21E7O' : 'Shift+O') + ' new chat \u00B7 ' + MOD +
        'K search \u00B7 / message \u00B7 Esc stops the reply or closes a pane';
    }
    document.addEventListener('keydown', onKey);
    const history = $('history');
    if (history) {
      new MutationObserver(retitle).observe(history, {
        subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['aria-current'],
      });
    }
    window.addEventListener('hashchange', retitle);
    retitle();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();

  return { retitle };
})();
