// Rojos chat panel: managing conversations (docs/panel.md, "Managing conversations").
// A menu on each sidebar entry (rename inline, delete after a confirmation dialog), the
// search box over the sidebar, and the Regenerate / Edit actions under the last exchange.
// Search hits show the snippet the server sends, the match marked.
// It exposes one global, `RojosConversations`; panel.js calls it from a few hooks and hands
// it what it needs (`attach`). Talks to the server through panel.js's `api` only:
// PATCH / DELETE /conversations/{id}, GET /conversations?q=, POST /chat with regenerate /
// editLast (docs/api.md, "Managing conversations").
//
// Safety rule (as panel.js): titles and messages go into the page as text only.
'use strict';

window.RojosConversations = (() => {
  const SEARCH_DELAY_MS = 250;
  const TITLE_MAX = 80;

  let panel = null; // what panel.js hands over in `attach`
  let searchTimer = null;
  let mode = null; // null, or { editLast: true } while the input holds an edit of the last message
  let openMenu = null;

  const $ = (id) => document.getElementById(id);

  function node(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // ---- search ------------------------------------------------------------------------------

  // The text the sidebar is filtered by (trimmed; '' lists every conversation).
  function query() {
    const box = $('history-search');
    return box ? box.value.trim() : '';
  }

  // A search hit's snippet (docs/api.md, "Managing conversations"): the text around the
  // first match in its messages, the match in a <mark>. Every part goes in as text.
  function snippet(hit) {
    if (!hit || typeof hit.match !== 'string' || !hit.match) return null;
    const line = node('span', 'history-snippet');
    const text = (value) => (typeof value === 'string' ? value : '');
    line.append(
      document.createTextNode(text(hit.before)),
      node('mark', 'history-match', hit.match),
      document.createTextNode(text(hit.after)),
    );
    return line;
  }

  function onSearchInput() {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => panel.loadHistory(), SEARCH_DELAY_MS);
  }

  // ---- the menu of one sidebar entry -------------------------------------------------------

  function closeMenu() {
    if (!openMenu) return;
    openMenu.list.hidden = true;
    openMenu.button.setAttribute('aria-expanded', 'false');
    openMenu = null;
  }

  // Adds the "⋯" menu (Rename, Delete) to a sidebar entry drawn by panel.js.
  function decorate(li, summary) {
    li.classList.add('history-row');
    const button = node('button', 'icon-btn history-menu-btn', '\u22EF');
    button.type = 'button';
    button.setAttribute('aria-label', 'Actions for ' + (summary.title || 'Untitled'));
    button.setAttribute('aria-haspopup', 'menu');
    button.setAttribute('aria-expanded', 'false');
    const list = node('div', 'history-menu');
    list.setAttribute('role', 'menu');
    list.hidden = true;
    const rename = node('button', 'history-menu-item', 'Rename');
    const remove = node('button', 'history-menu-item danger', 'Delete\u2026');
    for (const item of [rename, remove]) {
      item.type = 'button';
      item.setAttribute('role', 'menuitem');
      list.appendChild(item);
    }
    button.addEventListener('click', (e) => {
      e.stopPropagation();
      const wasOpen = openMenu && openMenu.list === list;
      closeMenu();
      if (wasOpen) return;
      list.hidden = false;
      button.setAttribute('aria-expanded', 'true');
      openMenu = { list, button };
      rename.focus();
    });
    list.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') { e.stopPropagation(); closeMenu(); button.focus(); }
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        (document.activeElement === rename ? remove : rename).focus();
      }
    });
    rename.addEventListener('click', (e) => { e.stopPropagation(); closeMenu(); startRename(li, summary); });
    remove.addEventListener('click', (e) => { e.stopPropagation(); closeMenu(); confirmDelete(summary, button); });
    li.append(button, list);
  }

  // ---- rename ------------------------------------------------------------------------------

  // Puts an input in place of the entry's title: Enter saves (PATCH), Escape or leaving it
  // cancels. A refused title keeps the input open with the server's reason under it.
  function startRename(li, summary) {
    const item = li.querySelector('.history-item');
    const form = node('form', 'history-rename');
    const input = node('input', 'history-rename-input');
    input.value = summary.title || '';
    input.maxLength = TITLE_MAX * 2; // the server says what is too long, and why
    input.setAttribute('aria-label', 'New title');
    const error = node('p', 'history-rename-error');
    error.setAttribute('role', 'alert');
    error.hidden = true;
    form.append(input, error);
    item.hidden = true;
    li.insertBefore(form, item.nextSibling);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      form.remove();
      item.hidden = false;
    };
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); finish(); item.focus(); }
    });
    input.addEventListener('blur', () => { if (!form.dataset.saving) finish(); });
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      form.dataset.saving = 'true';
      const title = input.value.trim();
      const result = await patchTitle(summary.id, title ? title : null);
      delete form.dataset.saving;
      if (result.ok) {
        finish();
        await panel.loadHistory();
        const again = document.querySelector('.history-item[data-id="' + CSS.escape(summary.id) + '"]');
        if (again) again.focus();
      } else if (result.error) {
        error.textContent = result.error;
        error.hidden = false;
        input.focus();
      }
    });
    input.focus();
    input.select();
  }

  async function patchTitle(id, title) {
    try {
      const response = await panel.api('/conversations/' + encodeURIComponent(id), {
        method: 'PATCH',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ title }),
      });
      if (response.ok) return { ok: true };
      return { error: await panel.errorText(response) };
    } catch (e) {
      if (panel.isAuthError(e)) return {};
      return { error: 'Cannot reach the server: ' + e.message };
    }
  }

  // ---- delete ------------------------------------------------------------------------------

  // The confirmation dialog: focus starts on Cancel, Escape cancels, and focus goes back to
  // the entry's menu button (or the sidebar's first control once the entry is gone).
  function confirmDelete(summary, opener) {
    const dialog = $('delete-dialog');
    const name = $('delete-dialog-name');
    const error = $('delete-dialog-error');
    const confirm = $('delete-dialog-confirm');
    name.textContent = summary.title || 'Untitled';
    error.hidden = true;
    error.textContent = '';
    confirm.disabled = false;
    const onConfirm = async (e) => {
      e.preventDefault();
      confirm.disabled = true;
      const result = await deleteConversation(summary.id);
      confirm.disabled = false;
      if (result.ok) {
        dialog.close('deleted');
        return;
      }
      if (result.error) {
        error.textContent = result.error;
        error.hidden = false;
      }
    };
    confirm.addEventListener('click', onConfirm);
    dialog.addEventListener('close', async () => {
      confirm.removeEventListener('click', onConfirm);
      if (dialog.returnValue !== 'deleted') { menuButtonOf(summary.id, opener).focus(); return; }
      if (panel.conversationId() === summary.id) panel.newChat();
      await panel.loadHistory();
      (document.querySelector('.history-menu-btn') || $('new-chat')).focus();
    }, { once: true });
    dialog.returnValue = '';
    dialog.showModal();
    $('delete-dialog-cancel').focus();
  }

  // The entry's menu button: `opener`, or its successor when the list was drawn again
  // while the dialog was open (a search or a refresh replaces the entries).
  function menuButtonOf(id, opener) {
    if (opener.isConnected) return opener;
    for (const item of document.querySelectorAll('#history .history-item')) {
      if (item.dataset.id === id) {
        const button = item.parentElement.querySelector('.history-menu-btn');
        if (button) return button;
      }
    }
    return $('new-chat');
  }

  async function deleteConversation(id) {
    try {
      const response = await panel.api('/conversations/' + encodeURIComponent(id), { method: 'DELETE' });
      if (response.ok) return { ok: true };
      return { error: await panel.errorText(response) };
    } catch (e) {
      if (panel.isAuthError(e)) return {};
      return { error: 'Cannot reach the server: ' + e.message };
    }
  }

  // ---- regenerate and edit -----------------------------------------------------------------

  function lastUserBubble() {
    const all = document.querySelectorAll('#thread .msg.user:not(.refused)');
    return all.length ? all[all.length - 1] : null;
  }

  // Draws "Regenerate" after the last reply and "Edit" under the last user message, when a
  // stored conversation is open and no reply is streaming.
  function refreshActions() {
    for (const old of document.querySelectorAll('#thread .turn-actions')) old.remove();
    const user = lastUserBubble();
    if (!panel || panel.busy() || !panel.conversationId() || !user) return;
    const edit = node('button', 'btn small-btn', 'Edit');
    edit.type = 'button';
    edit.id = 'edit-last';
    edit.title = 'Put this message back in the input; sending it replaces it and everything after it';
    edit.addEventListener('click', () => startEdit(user));
    const editRow = node('div', 'turn-actions user-actions');
    editRow.appendChild(edit);
    user.after(editRow);
    const regenerate = node('button', 'btn small-btn', 'Regenerate');
    regenerate.type = 'button';
    regenerate.id = 'regenerate';
    regenerate.title = 'Ask again: the answer after your last message is replaced';
    regenerate.addEventListener('click', () => panel.send({ regenerate: true, text: user.dataset.text || '' }));
    const row = node('div', 'turn-actions');
    row.appendChild(regenerate);
    const thread = $('thread');
    thread.insertBefore(row, thread.querySelector('.typing'));
  }

  function startEdit(user) {
    const input = $('input');
    input.value = user.dataset.text || '';
    input.dispatchEvent(new Event('input'));
    mode = { editLast: true };
    $('edit-banner').hidden = false;
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  function cancelEdit() {
    mode = null;
    $('edit-banner').hidden = true;
  }

  // What the next send does: `{ editLast: true }` while an edit is in the input; taking it
  // ends the edit mode (a refused send puts it back with `restoreMode`).
  function takeMode() {
    const taken = mode;
    cancelEdit();
    return taken;
  }

  function restoreMode(taken) {
    if (!taken) return;
    mode = taken;
    $('edit-banner').hidden = false;
  }

  // Hides the last user message and everything after it, as a regenerate or an edit replaces
  // them; `commit()` removes them once the server accepted, `undo()` shows them again.
  function hideReplaced() {
    const user = lastUserBubble();
    const hidden = [];
    if (user) {
      for (let e = user; e; e = e.nextElementSibling) {
        if (e.classList.contains('typing') || e.id === 'empty') continue;
        if (!e.hidden) { e.hidden = true; hidden.push(e); }
      }
    }
    return {
      commit: () => hidden.forEach((e) => e.remove()),
      undo: () => hidden.forEach((e) => { e.hidden = false; }),
    };
  }

  // ---- wiring ------------------------------------------------------------------------------

  function attach(hooks) {
    panel = hooks;
    const box = $('history-search');
    if (box) {
      box.addEventListener('input', onSearchInput);
      box.addEventListener('keydown', (e) => {
        if (e.key === 'Escape' && box.value) { e.stopPropagation(); box.value = ''; onSearchInput(); }
      });
    }
    $('edit-cancel').addEventListener('click', () => {
      cancelEdit();
      $('input').focus();
    });
    document.addEventListener('click', (e) => {
      if (openMenu && !openMenu.list.contains(e.target)) closeMenu();
    });
  }

  return { attach, decorate, query, snippet, refreshActions, takeMode, restoreMode, hideReplaced, cancelEdit };
})();
