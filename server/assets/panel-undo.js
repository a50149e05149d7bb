// Rojos chat panel: undo of a turn's file changes (docs/panel.md, "Undo of file changes";
// docs/api.md, "Undo of file changes"). A turn whose run changed files gets a bar after it
// naming the paths; the conversation's last turn not yet undone offers "Undo file changes"
// (the server undoes runs last first), an undone one says "File changes undone". A refusal
// (files changed since) shows the server's message and an "Undo anyway" button. A
// `write_text_content` line of such a turn also shows, when expanded, a line diff of the
// written text against the file before the turn (GET
// /conversations/{id}/checkpoints/{run}/before; the line diff is panel-diff.js's, jsdiff's).
//
// It exposes one global, `RojosUndo`; panel.js hands it what it needs (`attach`) and calls
// `refresh` when a conversation is drawn and `afterRun` when a run ends. Talks to the server
// through panel.js's `api` only: GET /conversations/{id}/checkpoints and
// POST /conversations/{id}/undo.
//
// Safety rule (as panel.js): paths and messages go into the page as text only.
'use strict';

window.RojosUndo = (() => {
  let panel = null; // what panel.js hands over in `attach`
  let seq = 0;
  // The arguments of each write_text_content activity line (handed over in `decorate`).
  const written = new WeakMap();

  function decorate(line, name, args) {
    if (window.RojosChanges) window.RojosChanges.note(line, name, args);
    if (name !== 'write_text_content' || !args || typeof args !== 'object') return;
    if (typeof args.path === 'string' && typeof args.text === 'string') written.set(line, args);
  }

  function attach(handed) {
    panel = handed;
    if (window.RojosChanges) window.RojosChanges.attach(handed);
  }

  function node(tag, className, text) {
    const n = document.createElement(tag);
    if (className) n.className = className;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function thread() {
    return document.getElementById('thread');
  }

  // The user messages the server took, in order (a refused one is no turn).
  function userBubbles() {
    return [...thread().querySelectorAll('.msg.user')]
      .filter((b) => !b.classList.contains('refused') && !b.hidden);
  }

  function checkpointsPath(id) {
    return '/conversations/' + encodeURIComponent(id) + '/checkpoints';
  }

  // Fetches the conversation's checkpoints and draws the bars; `live` is the user message of
  // the run that just ended, which takes the newest checkpoint after every known one.
  async function refresh(live) {
    if (!panel) return;
    const id = panel.conversationId();
    if (!id) return;
    const mine = ++seq;
    let list;
    try {
      const response = await panel.api(checkpointsPath(id));
      if (!response.ok) return;
      list = (await response.json()).checkpoints;
    } catch (e) {
      return; // the bars are an extra: a failed look leaves the thread as it is
    }
    if (mine !== seq || id !== panel.conversationId() || !Array.isArray(list)) return;
    render(list, live);
  }

  function afterRun(bubble) {
    refresh(bubble && !bubble.classList.contains('refused') ? bubble : null);
  }

  function render(list, live) {
    for (const old of thread().querySelectorAll('.undo-bar')) old.remove();
    const bubbles = userBubbles();
    if (live && live.dataset.message === undefined) {
      const known = bubbles.map((b) => Number(b.dataset.message)).filter((n) => n >= 0);
      const after = Math.max(-1, ...known);
      const mine = list.filter((c) => c.message > after).pop();
      live.dataset.message = mine ? String(mine.message) : '-1';
    }
    const last = list.filter((c) => !c.undone).pop();
    const newest = list[list.length - 1];
    for (const checkpoint of list) {
      const bubble = bubbles.find((b) => Number(b.dataset.message) === checkpoint.message);
      if (!bubble) continue;
      const element = bar(checkpoint, checkpoint === last);
      place(bubble, element);
      for (const line of turnLines(bubble)) addDiff(line, checkpoint);
      markUndone(bubble, checkpoint.undone === true);
      if (window.RojosChanges) {
        // The card of the turn's file changes goes before its undo bar (panel-changes.js).
        const shown = window.RojosChanges.show(bubble, checkpoint, turnActivity(bubble),
          (card) => (element.isConnected ? element.before(card) : place(bubble, card)));
        if (checkpoint === newest && window.RojosFiles && window.RojosFiles.markChanged) {
          shown.then((files) => window.RojosFiles.markChanged(checkpoint.undone ? [] : files));
        }
      }
    }
    if (!newest && window.RojosFiles && window.RojosFiles.markChanged) window.RojosFiles.markChanged([]);
  }

  // Marks the turn that starts at `bubble`, and each of its tool calls, as undone (or not).
  function markUndone(bubble, undone) {
    bubble.classList.toggle('turn-undone', undone);
    for (const line of turnActivity(bubble)) line.classList.toggle('undone', undone);
  }

  // Every activity line of the turn that starts at `bubble`, in order.
  function turnActivity(bubble) {
    const lines = [];
    for (let n = bubble.nextElementSibling; n && !n.classList.contains('user'); n = n.nextElementSibling) {
      if (n.classList.contains('activity')) lines.push(n);
    }
    return lines;
  }

  // The write_text_content lines of the turn that starts at `bubble`.
  function turnLines(bubble) {
    const lines = [];
    for (let n = bubble.nextElementSibling; n && !n.classList.contains('user'); n = n.nextElementSibling) {
      if (n.classList.contains('activity') && n.dataset.status === 'ok' && written.has(n)) lines.push(n);
    }
    return lines;
  }

  // Adds the diff section to a write line; it is filled when the line is first expanded.
  function addDiff(line, checkpoint) {
    if (line.dataset.diffRun === checkpoint.run || !checkpoint.available) return;
    line.dataset.diffRun = checkpoint.run;
    for (const old of line.querySelectorAll('.act-diff')) old.remove();
    const section = node('div', 'act-diff');
    section.append(node('div', 'act-label', 'Changes against the file before this turn'));
    line.querySelector('.act-body').append(section);
    const details = line.querySelector('details');
    const fill = () => {
      if (!details.open || section.dataset.filled) return;
      section.dataset.filled = 'true';
      fillDiff(section, checkpoint.run, written.get(line));
    };
    details.addEventListener('toggle', fill);
    fill();
  }

  async function fillDiff(section, run, args) {
    const id = panel.conversationId();
    const path = '/conversations/' + encodeURIComponent(id) + '/checkpoints/' +
      encodeURIComponent(run) + '/before?path=' + encodeURIComponent(args.path);
    let before;
    try {
      const response = await panel.api(path);
      if (!response.ok) {
        section.append(node('div', 'diff-note', 'No diff: ' + (await panel.errorText(response))));
        return;
      }
      before = await response.json();
    } catch (e) {
      if (!panel.isAuthError(e)) section.append(node('div', 'diff-note', 'No diff: ' + e.message));
      return;
    }
    if (!before.existed) {
      section.append(node('div', 'diff-note', 'New file: nothing stood at ' + args.path + ' before this turn.'));
      return;
    }
    const rows = window.RojosDiff.rows(before.text, args.text);
    if (rows === null) {
      section.append(node('div', 'diff-note', 'Too many lines changed to show the diff here.'));
    } else if (rows.every((r) => r[0] === ' ')) {
      section.append(node('div', 'diff-note', 'No change against the file before this turn.'));
    } else {
      section.append(window.RojosDiff.view(rows, 'Line diff of ' + args.path + ' against the file before this turn'));
    }
  }

  // After the turn of `bubble`: before the next user message, or at the end.
  function place(bubble, element) {
    let next = bubble.nextElementSibling;
    while (next && !(next.classList.contains('msg') && next.classList.contains('user'))) {
      next = next.nextElementSibling;
    }
    thread().insertBefore(element, next);
  }

  function bar(checkpoint, undoable) {
    const element = node('div', 'undo-bar');
    element.dataset.run = checkpoint.run;
    const paths = Array.isArray(checkpoint.paths) ? checkpoint.paths : [];
    element.append(node('span', 'undo-paths', 'Changed files: ' + paths.join(', ')));
    if (checkpoint.undone) {
      element.dataset.state = 'undone';
      element.append(node('span', 'undo-state', 'File changes undone'));
    } else if (!checkpoint.available) {
      element.dataset.state = 'gone';
      const why = typeof checkpoint.unreadable === 'string'
        ? 'These changes cannot be undone: their checkpoint cannot be read (' + checkpoint.unreadable + ')'
        : 'These changes can no longer be undone (the undo storage limit dropped them)';
      element.append(node('span', 'undo-state', why));
    } else if (undoable) {
      element.dataset.state = 'undoable';
      const button = node('button', 'undo-button', 'Undo file changes');
      button.type = 'button';
      button.addEventListener('click', () => undo(element, false));
      element.append(button);
    }
    return element;
  }

  async function undo(element, force) {
    const id = panel.conversationId();
    if (!id) return;
    for (const b of element.querySelectorAll('button')) b.disabled = true;
    // The run this bar shows: the server refuses (409) to undo any other.
    const options = {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(force ? { run: element.dataset.run, force: true } : { run: element.dataset.run }),
    };
    let response;
    try {
      response = await panel.api('/conversations/' + encodeURIComponent(id) + '/undo', options);
    } catch (e) {
      if (!panel.isAuthError(e)) refused(element, 'Cannot reach the server: ' + e.message, false);
      return;
    }
    if (response.ok) {
      if (window.RojosFiles && window.RojosFiles.refresh) window.RojosFiles.refresh();
      let summary = null;
      try { summary = (await response.json()).undone; } catch (_) { /* the bar still says it */ }
      if (summary) addRecord(summary);
      await refresh();
      const done = thread().querySelector('.undo-bar[data-run="' + CSS.escape(element.dataset.run) + '"] .undo-state');
      if (done) done.setAttribute('role', 'status');
      return;
    }
    const changed = response.status === 409;
    const message = await panel.errorText(response);
    refused(element, message, changed && !force);
  }

  // The undo's record at the end of the thread, as a reopened conversation draws it (the
  // history holds it, and the model reads it on its next turn).
  function addRecord(summary) {
    const paths = Array.isArray(summary.paths) ? summary.paths.filter((p) => typeof p === 'string') : [];
    const text = 'File changes undone' + (paths.length ? ': ' + paths.join(', ') : '') + '. The rojo was told.';
    const note = node('div', 'note undo-record', text);
    const typing = thread().querySelector('.typing');
    thread().insertBefore(note, typing);
  }

  // Shows why the undo did not happen; `offerForce`: with an "Undo anyway" choice.
  function refused(element, message, offerForce) {
    for (const old of element.querySelectorAll('.undo-refusal')) old.remove();
    const box = node('div', 'undo-refusal');
    box.setAttribute('role', 'alert');
    box.append(node('span', 'undo-message', message));
    if (offerForce) {
      const force = node('button', 'undo-force', 'Undo anyway');
      force.type = 'button';
      force.addEventListener('click', () => undo(element, true));
      box.append(force);
    }
    element.append(box);
    for (const b of element.querySelectorAll('.undo-button')) b.disabled = false;
  }

  return { attach, refresh, afterRun, decorate };
})();
