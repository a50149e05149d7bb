// Rojos chat panel. Talks to this server only: GET /rojos, /projects, /conversations,
// /conversations/{id}, and POST /chat (NDJSON events CHAT, TOOL_CALL, TOOL_RESULT, ERROR, DONE,
// the optional live status TOOL_CALL_STARTED / TOOL_CALL_PROGRESS, shown by panel-a11y.js, and
// APPROVAL_REQUIRED, answered by panel-approve.js; CONTEXT_COMPACTED, drawn by
// panel-compaction.js). Undo of a turn's file changes is panel-undo.js's (refresh / afterRun
// hooks).
//
// Safety rule: text from the model, tools, files or the server is only ever put in the page
// as text (textContent / text nodes); no markup is ever parsed from it. Replies are markdown,
// turned into elements one token at a time by panel-render.js (docs/panel.md, "Safety").
'use strict';

(() => {
  const KEY_TOKEN = 'rojos.token';
  const KEY_PROJECT = 'rojos.project';
  const KEY_ROJO = 'rojos.rojo';

  const $ = (id) => document.getElementById(id);
  const el = {
    app: $('app'), sidebar: $('sidebar'), backdrop: $('backdrop'), toggle: $('toggle-sidebar'),
    newChat: $('new-chat'), history: $('history'), historyNote: $('history-note'),
    project: $('project'), projectList: $('project-list'), rojo: $('rojo'),
    forget: $('forget-token'), transcript: $('transcript'), thread: $('thread'), empty: $('empty'),
    composer: $('composer'), input: $('input'), send: $('send'), stop: $('stop'),
    overlay: $('token-overlay'), tokenForm: $('token-form'), tokenInput: $('token-input'),
    tokenError: $('token-error'), tokenSwitch: $('token-switch'),
    providerBanner: $('provider-banner'), providerNote: $('provider-note'),
  };

  const state = {
    token: null,
    conversationId: null,
    busy: false,
    abort: null,
    started: false,
    openSeq: 0,
    rojos: [],
    rojosTimer: null,
    historySeq: 0,
  };

  // Conversation management (panel-conversations.js, loaded before this file); absent, the
  // panel works without it.
  const conv = window.RojosConversations || null;
  // Undo of a turn's file changes (panel-undo.js); absent, no undo bars are drawn.
  const undo = window.RojosUndo || null;
  // "Earlier messages summarised" markers (panel-compaction.js); absent, none are drawn.
  const compaction = window.RojosCompaction || null;

  // ---- small DOM helpers -------------------------------------------------------------------

  function node(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function nearBottom() {
    const t = el.transcript;
    return t.scrollHeight - t.scrollTop - t.clientHeight < 80;
  }

  function scrollDown(force) {
    if (force || state.stick) el.transcript.scrollTop = el.transcript.scrollHeight;
  }

  function append(child) {
    state.stick = nearBottom();
    el.empty.hidden = true;
    const typing = el.thread.querySelector('.typing');
    el.thread.insertBefore(child, typing);
    scrollDown();
    return child;
  }

  // ---- rendering text: replies as markdown (panel-render.js), user text as typed ---------------

  // A finished reply bubble gets its "Copy message" button (the markdown source).
  function finishBubble(bubble) {
    if (bubble && bubble.dataset.text.trim()) {
      window.RojosRender.addMessageCopy(bubble, () => bubble.dataset.text);
    }
  }

  // ---- conversation items ------------------------------------------------------------------

  function addUser(text) {
    const m = node('div', 'msg user', text);
    m.dataset.text = text; // what Edit puts back in the input
    return append(m);
  }

  function addAssistant() {
    const m = node('div', 'msg assistant');
    m.dataset.text = '';
    return append(m);
  }

  function setAssistantText(bubble, text) {
    bubble.dataset.text = text;
    state.stick = nearBottom();
    window.RojosRender.renderMarkdown(bubble, text);
    scrollDown();
  }

  function addError(message) {
    const m = node('div', 'msg error');
    m.setAttribute('role', 'alert');
    m.textContent = '\u26A0 ' + message;
    return append(m);
  }

  function addNote(text) {
    return append(node('div', 'note', text));
  }

  // The quiet line closing a turn that names the rojo that answered it: the conversation's
  // rojo, which answers every turn of it (docs/api.md, "A conversation's rojo"). A turn
  // stored before the server kept each conversation's rojo for its follow-ups (`known`
  // false) may have been answered by another, so it says that instead of a name.
  function addTurnRojo(rojo, known = true) {
    const line = node('div', 'turn-rojo');
    if (known) {
      line.title = 'Answered by the rojo ' + rojo;
      line.append(node('span', 'sr-only', 'Answered by the rojo '), node('span', 'turn-rojo-name', rojo));
    } else {
      line.classList.add('unknown');
      line.title = 'Answered before this server recorded which rojo answers each turn: maybe not ' + rojo;
      line.append(node('span', 'turn-rojo-name', 'rojo not recorded'));
    }
    return append(line);
  }

  function clip(text, max) {
    const one = String(text).replace(/\s*\n\s*/g, ' \u21B5 ');
    return one.length > max ? one.slice(0, max - 1) + '\u2026' : one;
  }

  // The short form of a call's arguments: the path first, then other keys, all cut short.
  function shortArgs(args) {
    if (args === undefined || args === null) return '';
    if (typeof args !== 'object' || Array.isArray(args)) return clip(typeof args === 'string' ? args : JSON.stringify(args), 60);
    const bits = [];
    if (typeof args.path === 'string') bits.push(clip(args.path, 48));
    for (const [k, v] of Object.entries(args)) {
      if (k === 'path' && typeof v === 'string') continue;
      const value = typeof v === 'string' ? '"' + clip(v, 24) + '"' : clip(JSON.stringify(v), 24);
      bits.push(k + ': ' + value);
    }
    return clip(bits.join(', '), 90);
  }

  function pretty(value) {
    if (typeof value === 'string') {
      try { return JSON.stringify(JSON.parse(value), null, 2); } catch (_) { return value; }
    }
    return JSON.stringify(value, null, 2);
  }

  function addActivity(id, name, args) {
    const line = node('div', 'activity');
    line.dataset.callId = id || '';
    line.dataset.tool = name || '';
    line.dataset.status = 'running';
    const details = node('details');
    const summary = node('summary');
    summary.append(
      node('span', 'act-chevron', '\u25B8'),
      node('span', 'act-icon'),
      node('span', 'act-name', name || 'tool'),
      node('span', 'act-args', shortArgs(args)),
      node('span', 'act-status', 'running\u2026'),
    );
    summary.title = 'Show the arguments and result';
    const body = node('div', 'act-body');
    body.append(
      node('div', 'act-label', 'Arguments'),
      node('pre', 'act-pre act-args-full', args === undefined ? '(not recorded)' : pretty(args)),
      node('div', 'act-label act-result-label', 'Result'),
      node('pre', 'act-pre act-result', 'Running\u2026'),
    );
    details.append(summary, body);
    line.appendChild(details);
    if (window.RojosFiles) window.RojosFiles.decorate(line, name, args);
    if (undo) undo.decorate(line, name, args);
    return append(line);
  }

  // A line opened at TOOL_CALL_STARTED gets its call at TOOL_CALL.
  function fillActivity(line, id, args) {
    line.dataset.callId = id || '';
    line.querySelector('.act-args').textContent = shortArgs(args);
    line.querySelector('.act-args-full').textContent = args === undefined ? '(not recorded)' : pretty(args);
    line.querySelector('.act-status').textContent = 'running\u2026';
    line.querySelector('.act-result').textContent = 'Running\u2026';
    if (window.RojosFiles) window.RojosFiles.decorate(line, line.dataset.tool, args);
    if (undo) undo.decorate(line, line.dataset.tool, args);
    return line;
  }

  function finishActivity(line, ok, result) {
    line.dataset.status = ok ? 'ok' : 'error';
    line.querySelector('.act-status').textContent = ok ? 'ok' : 'error';
    line.querySelector('.act-result').textContent = pretty(result);
    if (window.RojosFiles) window.RojosFiles.toolFinished(line.dataset.tool, ok);
    if (window.RojosApprove) window.RojosApprove.settle(line, ok, result);
  }

  function interruptActivity(line, why) {
    if (line.dataset.status !== 'running') return;
    line.dataset.status = 'error';
    line.querySelector('.act-status').textContent = 'interrupted';
    line.querySelector('.act-result').textContent = why;
    if (window.RojosApprove) window.RojosApprove.settle(line, false, why);
  }

  function showTyping(on) {
    const current = el.thread.querySelector('.typing');
    if (on && !current) {
      const t = node('div', 'typing');
      t.setAttribute('role', 'img');
      t.setAttribute('aria-label', 'The rojo is working');
      t.append(node('span'), node('span'), node('span'));
      el.thread.appendChild(t);
      scrollDown(true);
    } else if (!on && current) {
      current.remove();
    }
  }

  function clearThread() {
    for (const child of [...el.thread.children]) if (child !== el.empty) child.remove();
    el.empty.hidden = false;
  }

  // ---- one streamed reply ------------------------------------------------------------------

  class Reply {
    constructor() {
      this.bubble = null;
      this.text = '';
      this.calls = new Map();
      this.started = new Map(); // TOOL_CALL_STARTED index → its line, until its TOOL_CALL
      this.done = false;
      this.failed = false;
      this.pending = false;
      this.seq = 0; // the number of the last event handled, to rejoin after (docs/api.md, "Runs")
      this.conversationId = null;
      this.rojo = null; // the rojo answering, from RUN_STARTED
      this.signed = false;
    }

    handle(event) {
      if (event && typeof event.seq === 'number') this.seq = event.seq;
      switch (event && event.type) {
        case 'RUN_STARTED':
          runStarted(this, event);
          break;
        case 'CHAT':
          if (!this.bubble) { this.bubble = addAssistant(); this.text = ''; }
          this.text += typeof event.text === 'string' ? event.text : '';
          this.schedule();
          break;
        case 'TOOL_CALL_STARTED': {
          this.closeBubble();
          let line = this.started.get(event.index);
          if (!line) {
            line = addActivity(event.id, event.name, undefined);
            this.started.set(event.index, line);
          }
          window.RojosA11y.writing(line, 0);
          break;
        }
        case 'TOOL_CALL_PROGRESS': {
          const line = this.started.get(event.index);
          if (line && typeof event.bytes === 'number') window.RojosA11y.writing(line, event.bytes);
          break;
        }
        case 'TOOL_CALL': {
          this.closeBubble();
          const line = window.RojosA11y.claim(this.started, event);
          this.calls.set(event.id, line ? fillActivity(line, event.id, event.args) : addActivity(event.id, event.name, event.args));
          break;
        }
        case 'APPROVAL_REQUIRED': {
          // panel-approve.js: the buttons on the call's line (docs/panel.md, "Approvals").
          this.flush();
          if (window.RojosApprove) window.RojosApprove.ask(this.calls.get(event.id), event);
          break;
        }
        case 'TOOL_RESULT': {
          this.flush();
          let line = this.calls.get(event.id);
          if (!line) { line = addActivity(event.id, event.name, undefined); this.calls.set(event.id, line); }
          finishActivity(line, event.ok === true, event.result);
          window.RojosA11y.announceTool(event.name, event.ok === true);
          break;
        }
        case 'WARNING':
          // Not an end: the run goes on (docs/api.md, "WARNING").
          this.flush();
          addNote(typeof event.message === 'string' ? event.message : 'warning');
          break;
        case 'CONTEXT_COMPACTED':
          // Older messages are summarised from here on (docs/api.md, "Long conversations").
          if (compaction) compaction.live(event);
          break;
        case 'ERROR':
          this.closeBubble();
          this.failed = true;
          this.interrupt('The run ended with an error before this call finished.');
          addError(typeof event.message === 'string' ? event.message : 'error');
          break;
        case 'DONE':
          this.flush();
          this.done = true;
          if (typeof event.conversationId === 'string') setConversation(event.conversationId);
          if (event.stopReason === 'cancelled' && !this.failed) addNote('Stopped.');
          break;
        default:
          break; // unknown events are ignored, so the server may add some
      }
    }

    // Text is repainted at most once a frame, however fast chunks arrive; after a slow
    // repaint (the whole markdown is rendered again: 50 ms or more for 40 KB, docs/panel.md) the
    // next waits as long, so rendering takes at most about half the time.
    schedule() {
      if (this.pending) return;
      this.pending = true;
      const wait = Math.max(0, (this.nextAt || 0) - performance.now());
      setTimeout(() => requestAnimationFrame(() => this.flush()), wait);
    }

    flush() {
      if (!this.pending) return;
      this.pending = false;
      if (!this.bubble) return;
      const start = performance.now();
      setAssistantText(this.bubble, this.text);
      const end = performance.now();
      this.nextAt = end + (end - start);
    }

    interrupt(why) {
      for (const line of this.calls.values()) interruptActivity(line, why);
      for (const line of this.started.values()) interruptActivity(line, why);
    }

    // The reply bubble so far is complete: its copy button, and it is announced.
    closeBubble() {
      this.flush();
      finishBubble(this.bubble);
      window.RojosA11y.announceReply(this.bubble);
      this.bubble = null;
    }

    // The turn names the rojo that answered it, once, when its run ends here (not when the
    // tab left it to open another conversation).
    sign() {
      if (this.signed || !this.rojo || state.leaving) return;
      this.signed = true;
      addTurnRojo(this.rojo);
    }

    // Whatever ended the stream, no line is left running.
    finish(why) {
      this.flush();
      finishBubble(this.bubble);
      window.RojosA11y.announceReply(this.bubble);
      this.interrupt(why);
    }
  }

  async function readEvents(body, onEvent) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    const take = (line) => {
      line = line.trim();
      if (!line) return;
      let event;
      try { event = JSON.parse(line); } catch (_) { return; }
      onEvent(event);
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let i;
      while ((i = buffer.indexOf('\n')) >= 0) {
        take(buffer.slice(0, i));
        buffer = buffer.slice(i + 1);
      }
    }
    take(buffer);
  }

  // ---- the server --------------------------------------------------------------------------

  class AuthError extends Error {}

  async function api(path, options = {}) {
    const headers = Object.assign({}, options.headers, { Authorization: 'Bearer ' + state.token });
    const response = await fetch(path, Object.assign({}, options, { headers, cache: 'no-store' }));
    if (response.status === 401) {
      askToken('The server refused the token. Enter it again.');
      throw new AuthError('unauthorized');
    }
    return response;
  }

  async function errorText(response) {
    try {
      const body = await response.json();
      if (body && typeof body.error === 'string') return body.error;
    } catch (_) { /* not JSON */ }
    return 'the server answered ' + response.status;
  }

  // ---- sending -----------------------------------------------------------------------------

  function setBusy(busy) {
    state.busy = busy;
    // The input stays on while a reply streams, so the next message can be drafted; only
    // sending waits for DONE.
    el.send.disabled = busy;
    el.send.hidden = busy;
    el.stop.hidden = !busy;
    el.project.disabled = busy;
    // A conversation keeps its rojo: the picker chooses a new conversation's.
    el.rojo.disabled = busy || !!state.conversationId;
    el.newChat.disabled = busy;
    el.app.classList.toggle('busy', busy);
    showTyping(busy);
    if (!busy) el.input.focus();
    if (conv) conv.refreshActions();
  }

  // Puts a message that failed back in the input, before any draft typed meanwhile.
  function restoreText(text) {
    const draft = el.input.value;
    if (draft === text || draft.startsWith(text + '\n')) return;
    el.input.value = draft.trim() ? text + '\n' + draft : text;
    autosize();
  }

  // Sends the input; `{ regenerate: true, text }` sends the last message again instead
  // (panel-conversations.js). An edit of the last message in the input (`editLast`) and a
  // regenerate replace the last exchange (docs/api.md, "Managing conversations").
  async function send(options = {}) {
    const regenerate = options.regenerate === true && !!state.conversationId;
    const text = regenerate ? options.text : el.input.value;
    if (state.busy || !text || !text.trim()) return;
    const projectId = el.project.value.trim();
    if (!projectId) { el.project.focus(); return; }
    localStorage.setItem(KEY_PROJECT, projectId);
    const mode = regenerate ? null : conv ? conv.takeMode() : null;
    const editLast = !!(mode && mode.editLast && state.conversationId);
    // A conversation keeps its rojo: the picker's is sent only to start one.
    const body = { projectId };
    if (!state.conversationId) body.rojo = el.rojo.value || 'default';
    if (regenerate) body.regenerate = true;
    else body.message = text;
    if (editLast) body.editLast = true;
    if (state.conversationId) body.conversationId = state.conversationId;
    const replaced = (regenerate || editLast) && conv ? conv.hideReplaced() : null;

    const bubble = addUser(text);
    // A message the server never took is not the conversation's last one for Edit/Regenerate.
    const refused = () => bubble.classList.add('refused');
    if (!regenerate) el.input.value = '';
    autosize();
    setBusy(true);
    scrollDown(true);
    const reply = new Reply();
    state.abort = new AbortController();
    try {
      const response = await api('/chat', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: state.abort.signal,
      });
      if (!response.ok) {
        if (replaced) replaced.undo();
        refused();
        addError(await errorText(response));
        if (response.status === 503) setTimeout(refreshRojos, 0);
        if (!regenerate) restoreText(text);
        if (conv) conv.restoreMode(mode);
        return;
      }
      if (replaced) replaced.commit();
      await followToEnd(response.body, reply, state.abort.signal);
      if (state.leaving) {
        reply.finish('Still running: open the conversation again to follow it.');
      } else if (!reply.done) {
        reply.finish('The connection closed before this call finished.');
        addError('The connection to the server closed before the reply was complete.');
        if (!regenerate) restoreText(text);
      } else if (reply.failed && !regenerate) {
        restoreText(text); // the run failed: the message is at hand to send again
      }
    } catch (e) {
      if (e instanceof AuthError) {
        if (replaced) replaced.undo();
        refused();
        if (!regenerate) restoreText(text);
        if (conv) conv.restoreMode(mode);
      } else if (e.name === 'AbortError' && state.leaving) {
        reply.finish('Still running: open the conversation again to follow it.');
      } else if (e.name === 'AbortError') {
        reply.finish('Stopped before this call finished.');
        addNote('Stopped.');
      } else {
        if (replaced) replaced.undo();
        refused();
        reply.finish('The connection failed before this call finished.');
        addError('Cannot reach the server: ' + e.message);
        if (!regenerate) restoreText(text);
        if (conv) conv.restoreMode(mode);
      }
    } finally {
      const left = state.leaving;
      reply.finish('The reply ended before this call finished.');
      reply.sign();
      state.abort = null;
      state.run = null;
      state.leaving = false;
      setBusy(false);
      loadHistory();
      if (undo && !left) undo.afterRun(bubble);
    }
  }

  // The record an undo left in the history: which paths its run's changes no longer touch.
  function addUndoRecord(undo) {
    const paths = Array.isArray(undo.paths) ? undo.paths.filter((p) => typeof p === 'string') : [];
    const note = addNote('File changes undone' + (paths.length ? ': ' + paths.join(', ') : '') + '. The rojo was told.');
    if (note) note.classList.add('undo-record');
    return note;
  }

  // ---- runs that outlive the connection (docs/api.md, "Runs") ------------------------------

  // The run's first event names its conversation (a new one's too): from here on a reload
  // or a dropped connection can follow it again, and Stop asks the server to stop it.
  function runStarted(reply, event) {
    if (typeof event.conversationId !== 'string') return;
    reply.conversationId = event.conversationId;
    state.run = { conversationId: event.conversationId };
    if (state.conversationId !== event.conversationId) {
      setConversation(event.conversationId);
      loadHistory(); // a new conversation is in the list while its first reply is written
    }
    if (typeof event.rojo === 'string') {
      reply.rojo = event.rojo;
      showConversationRojo(event.rojo);
    }
  }

  // Reads a run's events into `reply`; a stream that ends before DONE lost its connection,
  // not its run: the run is followed again from its last event (a few tries).
  async function followToEnd(body, reply, signal) {
    try {
      await readEvents(body, (event) => reply.handle(event));
    } catch (e) {
      if (e.name === 'AbortError' || e instanceof AuthError) throw e;
    }
    for (let attempt = 1; !reply.done && reply.conversationId && attempt <= 5; attempt++) {
      if (signal && signal.aborted) return;
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
      let response;
      try {
        const path = '/conversations/' + encodeURIComponent(reply.conversationId) + '/events?after=' + reply.seq;
        response = await api(path, { signal });
      } catch (e) {
        if (e.name === 'AbortError' || e instanceof AuthError) throw e;
        continue;
      }
      if (response.status !== 200) return; // the run is over: its history has the rest
      try {
        await readEvents(response.body, (event) => reply.handle(event));
      } catch (e) {
        if (e.name === 'AbortError' || e instanceof AuthError) throw e;
      }
    }
  }

  // Stop asks the server to stop the run (every client following it sees it end); before the
  // run has named its conversation, the request is dropped instead.
  async function stopRun() {
    const run = state.run;
    if (!run) {
      if (state.abort) state.abort.abort();
      return;
    }
    try {
      const path = '/conversations/' + encodeURIComponent(run.conversationId) + '/stop';
      const response = await api(path, { method: 'POST' });
      if (!response.ok && response.status !== 409 && state.abort) state.abort.abort();
    } catch (e) {
      if (!(e instanceof AuthError) && state.abort) state.abort.abort();
    }
  }

  // Opening another conversation while a reply streams leaves that run going (it is followed
  // again when its conversation is opened).
  function leaveRun() {
    if (!state.busy || !state.abort) return;
    state.leaving = true;
    state.abort.abort();
  }

  // A run still going in the conversation just opened (after a reload, or opened from the
  // list while it runs): the thread is shown up to the run's message, then the run's events
  // from its first one, and followed to its end.
  async function followLive(id, seq) {
    let response;
    try {
      response = await api('/conversations/' + encodeURIComponent(id) + '/events');
    } catch (_) {
      return;
    }
    if (response.status !== 200 || seq !== state.openSeq || state.busy) {
      if (response.body) response.body.cancel().catch(() => {});
      return;
    }
    const users = el.thread.querySelectorAll('.msg.user');
    const last = users[users.length - 1];
    if (last) while (last.nextSibling) last.nextSibling.remove();
    const reply = new Reply();
    state.abort = new AbortController();
    setBusy(true);
    try {
      await followToEnd(response.body, reply, state.abort.signal);
      if (!reply.done && !state.leaving) addError('The connection to the server closed before the reply was complete.');
    } catch (e) {
      if (e instanceof AuthError) return;
      if (!(e.name === 'AbortError' && state.leaving)) addError('Cannot follow the reply: ' + e.message);
    } finally {
      reply.finish('The reply ended before this call finished.');
      reply.sign();
      state.abort = null;
      state.run = null;
      state.leaving = false;
      setBusy(false);
      loadHistory();
      if (undo) undo.refresh();
    }
  }

  // The conversation's rojo, in its header: it answers every turn of it.
  function showConversationRojo(rojo) {
    const label = document.getElementById('conversation-rojo');
    if (!label) return;
    label.textContent = rojo ? 'Rojo: ' + rojo : '';
    label.hidden = !rojo;
    el.rojo.disabled = state.busy || !!rojo;
    // The picker chooses a new conversation's rojo; an open one names its own in its place.
    const picker = el.rojo.closest('.field');
    if (picker) picker.hidden = !!rojo;
  }

  function autosize() {
    el.input.style.height = 'auto';
    el.input.style.height = Math.min(el.input.scrollHeight + 2, 200) + 'px';
  }

  // ---- conversations -----------------------------------------------------------------------

  function setConversation(id) {
    state.conversationId = id;
    const url = location.pathname + location.search + (id ? '#c=' + encodeURIComponent(id) : '');
    history.replaceState(null, '', url);
    markActive();
    // panel-approve.js: the tools this conversation runs without asking, under the input.
    if (window.RojosApprove && state.started) window.RojosApprove.showAllowed(id);
  }

  function markActive() {
    for (const item of el.history.querySelectorAll('.history-item')) {
      item.classList.toggle('active', item.dataset.id === state.conversationId);
      window.RojosA11y.markCurrent(item, item.dataset.id === state.conversationId);
    }
  }

  function newChat() {
    if (state.busy) return;
    showConversationRojo(null);
    if (conv) conv.cancelEdit();
    state.openSeq += 1;
    setConversation(null);
    clearThread();
    closeSidebar();
    el.input.focus();
  }

  function ago(iso) {
    const then = Date.parse(iso);
    if (Number.isNaN(then)) return '';
    const seconds = Math.round((then - Date.now()) / 1000);
    const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
    const steps = [[60, 'second'], [60, 'minute'], [24, 'hour'], [7, 'day'], [4.35, 'week'], [12, 'month']];
    let value = seconds;
    for (const [size, unit] of steps) {
      if (Math.abs(value) < size) return rtf.format(Math.round(value), unit);
      value /= size;
    }
    return rtf.format(Math.round(value), 'year');
  }

  async function loadHistory() {
    const projectId = el.project.value.trim();
    const q = conv ? conv.query() : '';
    const seq = ++state.historySeq;
    if (!projectId) {
      el.history.replaceChildren();
      el.historyNote.textContent = 'Choose a project.';
      el.historyNote.hidden = false;
      return;
    }
    try {
      const search = q ? '&q=' + encodeURIComponent(q) : '';
      const response = await api('/conversations?projectId=' + encodeURIComponent(projectId) + search);
      if (!response.ok) throw new Error(await errorText(response));
      const list = await response.json();
      if (seq !== state.historySeq) return; // the project or the search changed meanwhile
      el.history.replaceChildren();
      for (const c of list) {
        const li = node('li');
        const b = node('button', 'history-item');
        b.type = 'button';
        b.dataset.id = c.id;
        b.dataset.rojo = c.rojo || '';
        b.title = c.title || 'Untitled';
        b.append(node('span', 'history-title', c.title || 'Untitled'));
        // A search hit's snippet, its match marked (panel-conversations.js).
        const snippet = conv && c.snippet ? conv.snippet(c.snippet) : null;
        if (snippet) b.append(snippet);
        b.append(node('span', 'history-meta', [c.rojo, ago(c.updatedAt)].filter(Boolean).join(' \u00B7 ')));
        // A search hit opens at the message that matched (its snippet's).
        const found = c.snippet && Number.isInteger(c.snippet.message) ? c.snippet.message : null;
        b.addEventListener('click', () => openConversation(c.id, c.rojo, found));
        li.appendChild(b);
        if (conv) conv.decorate(li, c);
        el.history.appendChild(li);
      }
      el.historyNote.textContent = q ? 'No conversation matches \u201C' + q + '\u201D.' : 'No conversations yet.';
      el.historyNote.hidden = list.length > 0;
      markActive();
    } catch (e) {
      if (e instanceof AuthError) return;
      el.historyNote.textContent = 'Cannot list conversations: ' + e.message;
      el.historyNote.hidden = false;
    }
  }

  function contentText(content) {
    if (typeof content === 'string') return content;
    if (Array.isArray(content)) {
      return content.map((p) => (p && typeof p.text === 'string' ? p.text : '')).join('');
    }
    return '';
  }

  function parseArgs(raw) {
    if (typeof raw !== 'string') return raw;
    try { return JSON.parse(raw); } catch (_) { return raw; }
  }

  // Draws a stored conversation: bubbles for user and assistant text, an activity line for
  // each tool call, finished by its `tool` message (whose text starts with "error: " when the
  // call failed, as the host stores it).
  // `compactions` (GET /conversations/{id}/compactions) are drawn where each summary starts
  // to stand for the messages before it (panel-compaction.js).
  // Each turn that has an answer ends with the line naming `rojo`, the conversation's; a
  // turn whose message comes before index `keptFrom` (`Rojos-Rojo-Kept-From`) says its rojo
  // was not recorded.
  function renderHistory(messages, compactions = [], rojo = null, keptFrom = 0) {
    clearThread();
    const lines = new Map();
    let answered = false; // the turn drawn so far has an answer, an error or a stop
    let start = 0; // the index of the turn's message
    const endTurn = () => {
      if (answered && rojo) addTurnRojo(rojo, start >= keptFrom);
      answered = false;
    };
    for (const [index, m] of messages.entries()) {
      if (compaction) for (const marker of compaction.before(compactions, index)) append(marker);
      if (!m || typeof m !== 'object') continue;
      if (m.role === 'user') {
        endTurn();
        start = index;
      } else if (m.role === 'assistant') answered = true;
      if (m.role === 'user' && m.rojos && typeof m.rojos === 'object' && m.rojos.undo) {
        // the record an undo left (docs/api.md, "Undo of file changes")
        const record = addUndoRecord(m.rojos.undo);
        if (record) record.dataset.message = String(index);
      } else if (m.role === 'user') {
        addUser(contentText(m.content)).dataset.message = String(index); // for panel-undo.js
      } else if (m.role === 'assistant') {
        const text = contentText(m.content);
        // How the run ended, as it was shown live (docs/api.md, "What a reopened
        // conversation shows"): the `(no answer: …)` placeholder is not drawn.
        const note = m.rojos && typeof m.rojos === 'object' ? m.rojos : {};
        if (text.trim() && note.noAnswer !== true) {
          const bubble = addAssistant();
          bubble.dataset.message = String(index); // where a search hit opens
          setAssistantText(bubble, text);
          finishBubble(bubble);
        }
        for (const call of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
          const fn = call.function || {};
          lines.set(call.id, addActivity(call.id, fn.name, parseArgs(fn.arguments)));
        }
        if (typeof note.error === 'string') addError(note.error);
        else if (note.stopped === true) addNote('Stopped.');
      } else if (m.role === 'tool') {
        const line = lines.get(m.tool_call_id);
        if (!line) continue;
        const text = contentText(m.content);
        finishActivity(line, !text.startsWith('error: '), text);
        const approval = m.rojos && typeof m.rojos === 'object' ? m.rojos.approval : null;
        if (approval && window.RojosApprove) window.RojosApprove.recorded(line, approval);
      }
    }
    endTurn();
    for (const line of lines.values()) interruptActivity(line, 'No result was stored for this call.');
    scrollDown(true);
  }

  // A conversation's stored messages, every page of them: GET /conversations/{id}?from=N
  // answers one page, and its `Rojos-Next-From` header names the next page's first message
  // (absent on the last page). `{ stale: true }` when another conversation was opened
  // meanwhile, `{ error }` when the server refused a page.
  async function fetchMessages(id, seq) {
    const messages = [];
    let from = 0;
    let rojo = null; // the conversation's rojo (`Rojos-Rojo`)
    let keptFrom = 0; // its turns before this message may have had another (docs/api.md)
    for (;;) {
      const query = from > 0 ? '?from=' + from : '';
      const response = await api('/conversations/' + encodeURIComponent(id) + query);
      if (seq !== state.openSeq) return { stale: true };
      if (!response.ok) return { error: await errorText(response) };
      const page = await response.json();
      if (seq !== state.openSeq) return { stale: true };
      if (!Array.isArray(page)) return { error: 'the server did not send a list of messages' };
      for (const message of page) messages.push(message);
      if (from === 0) {
        rojo = response.headers.get('Rojos-Rojo');
        keptFrom = Number(response.headers.get('Rojos-Rojo-Kept-From') || 0) || 0;
      }
      const next = Number(response.headers.get('Rojos-Next-From') || NaN);
      // A next page must start further on, or the list would never end.
      if (!(next > from) || page.length === 0) return { messages, rojo, keptFrom };
      from = next;
    }
  }

  // `found`: the index of the message a search found, scrolled to and outlined.
  async function openConversation(id, rojo, found = null) {
    leaveRun();
    while (state.busy) await new Promise((resolve) => setTimeout(resolve, 20));
    const seq = ++state.openSeq;
    closeSidebar();
    try {
      // The summaries are asked for beside the messages (panel-compaction.js).
      const summaries = compaction ? compaction.list(id) : Promise.resolve([]);
      summaries.catch(() => {}); // a refused token is handled by fetchMessages
      const { stale, error, messages, rojo: kept, keptFrom } = await fetchMessages(id, seq);
      if (stale) return;
      if (error !== undefined) {
        clearThread();
        addError('Cannot open the conversation: ' + error);
        setConversation(null);
        return;
      }
      if (rojo && [...el.rojo.options].some((o) => o.value === rojo)) el.rojo.value = rojo;
      const compactions = await summaries;
      if (seq !== state.openSeq) return;
      setConversation(id);
      renderHistory(messages, compactions, kept || rojo, keptFrom);
      if (found !== null) showFound(found);
      showConversationRojo(kept || rojo);
      if (undo) undo.refresh();
      if (conv) conv.cancelEdit();
      if (conv) conv.refreshActions();
      await followLive(id, seq);
    } catch (e) {
      if (e instanceof AuthError) return;
      addError('Cannot open the conversation: ' + e.message);
    }
  }

  // The bubble of stored message `index`, a search hit's, in view and outlined.
  function showFound(index) {
    const bubble = el.thread.querySelector('.msg[data-message="' + index + '"]');
    if (!bubble) return;
    bubble.classList.add('found');
    bubble.scrollIntoView({ block: 'center' });
  }

  // ---- rojos and projects ------------------------------------------------------------------

  async function loadRojos() {
    const response = await api('/rojos');
    if (!response.ok) throw new Error(await errorText(response));
    const rojos = await response.json();
    const current = el.rojo.value;
    state.rojos = rojos;
    el.rojo.replaceChildren();
    for (const r of rojos) {
      const option = node('option', null, r.model ? r.name + ' \u00B7 ' + r.model : r.name);
      option.value = r.name;
      option.title = (r.tools || []).join(', ') || 'no tools';
      el.rojo.appendChild(option);
    }
    const saved = current || localStorage.getItem(KEY_ROJO);
    const names = rojos.map((r) => r.name);
    el.rojo.value = names.includes(saved) ? saved : names.includes('default') ? 'default' : names[0] || '';
    showProvider();
  }

  // The banner above the input says, before anything is typed, why the selected rojo cannot
  // answer and what to do; the line below the input says which provider and model it uses.
  // `/rojos` is read again every 10 s while the rojo is not ready, every 60 s once it is, and
  // whenever the page comes back into view (docs/panel.md, "Provider banner").
  function showProvider() {
    const rojo = state.rojos.find((r) => r.name === el.rojo.value);
    const status = rojo ? rojo.status : 'ready';
    const unavailable = status === 'unavailable';
    const fix = unavailable ? rojo.fix || 'No provider of this rojo is available.' : '';
    // panel-firstrun.js: the fix as a card with its commands to copy.
    if (window.RojosFirstRun && fix) window.RojosFirstRun.fill(el.providerBanner, fix);
    else { el.providerBanner.textContent = fix; delete el.providerBanner.dataset.fix; }
    el.providerBanner.hidden = !unavailable;
    let note = '';
    if (rojo && rojo.provider) {
      note = 'Uses ' + rojo.provider.label + ' \u00B7 ' + rojo.provider.model;
      if (status === 'checking') note += ' (checking)';
    } else if (status === 'checking') {
      note = 'Checking its providers\u2026';
    }
    el.providerNote.textContent = note;
    window.RojosA11y.showTools(rojo);
    clearTimeout(state.rojosTimer);
    state.rojosTimer = setTimeout(refreshRojos, status === 'ready' ? 60000 : 10000);
  }

  async function refreshRojos() {
    if (!state.started || state.busy || document.hidden) {
      showProvider();
      return;
    }
    try {
      await loadRojos();
    } catch (_) {
      showProvider(); // try again later; an invalid token already asked for a new one
    }
  }

  async function loadProjects() {
    let projects = [];
    try {
      const response = await api('/projects');
      if (response.ok) projects = await response.json();
    } catch (e) {
      if (e instanceof AuthError) throw e;
    }
    el.projectList.replaceChildren(...projects.map((p) => { const o = node('option'); o.value = p; return o; }));
    const saved = localStorage.getItem(KEY_PROJECT);
    el.project.value = saved || projects[0] || 'demo';
  }

  // ---- the token ---------------------------------------------------------------------------

  function askToken(message) {
    localStorage.removeItem(KEY_TOKEN);
    state.token = null;
    el.tokenError.textContent = message || '';
    el.tokenError.hidden = !message;
    el.tokenInput.value = '';
    window.RojosA11y.openModal(el.overlay, el.tokenInput);
  }

  // A `#token=...` link (printed by the server) is read once and removed from the address
  // bar at once, whatever happens next, so no history entry keeps it. A token other than the
  // one kept here is taken only if the user says so: a link from someone else must not
  // silently switch the panel to their token (docs/panel.md, "Token links").
  // Resolves to whether the kept token changed.
  async function tokenFromUrl() {
    const params = new URLSearchParams(location.hash.slice(1));
    const token = params.get('token');
    if (!token) return false;
    params.delete('token');
    const rest = params.toString();
    history.replaceState(null, '', location.pathname + location.search + (rest ? '#' + rest : ''));
    const current = localStorage.getItem(KEY_TOKEN);
    if (current === token) return false;
    if (current && !(await askToSwitch())) return false;
    localStorage.setItem(KEY_TOKEN, token);
    return true;
  }

  // The modal dialog: focus starts on "Keep the current one"; Escape also keeps it.
  function askToSwitch() {
    const dialog = el.tokenSwitch;
    return new Promise((resolve) => {
      dialog.returnValue = '';
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'switch'), { once: true });
      dialog.showModal();
    });
  }

  async function start() {
    state.token = localStorage.getItem(KEY_TOKEN);
    if (!state.token) { askToken(''); return; }
    try {
      await loadRojos();
      await loadProjects();
    } catch (e) {
      if (!(e instanceof AuthError)) addError('Cannot load the panel: ' + e.message);
      return;
    }
    window.RojosA11y.closeModal(el.overlay);
    state.started = true;
    if (window.RojosFiles) window.RojosFiles.start({ api, errorText, project: () => el.project.value.trim() });
    if (window.RojosApprove) window.RojosApprove.start({ api, errorText, project: () => el.project.value.trim() });
    await loadHistory();
    const wanted = new URLSearchParams(location.hash.slice(1)).get('c');
    if (wanted) await openConversation(wanted, null);
    document.body.dataset.ready = 'true';
    el.input.focus();
  }

  // ---- the sidebar at phone width ----------------------------------------------------------

  function closeSidebar() {
    el.app.classList.remove('sidebar-open');
    el.toggle.setAttribute('aria-expanded', 'false');
  }

  // ---- wiring ------------------------------------------------------------------------------

  el.composer.addEventListener('submit', (e) => { e.preventDefault(); send(); });
  el.input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
      e.preventDefault();
      send();
    }
  });
  el.input.addEventListener('input', autosize);
  el.stop.addEventListener('click', stopRun);
  el.newChat.addEventListener('click', newChat);
  el.rojo.addEventListener('change', () => {
    localStorage.setItem(KEY_ROJO, el.rojo.value);
    showProvider();
  });
  document.addEventListener('visibilitychange', () => { if (!document.hidden) refreshRojos(); });
  window.addEventListener('focus', refreshRojos);
  el.project.addEventListener('change', () => {
    const p = el.project.value.trim();
    if (p) localStorage.setItem(KEY_PROJECT, p);
    newChat();
    loadHistory();
    if (window.RojosFiles) window.RojosFiles.projectChanged();
  });
  el.toggle.addEventListener('click', () => {
    const open = el.app.classList.toggle('sidebar-open');
    el.toggle.setAttribute('aria-expanded', String(open));
  });
  el.backdrop.addEventListener('click', closeSidebar);
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') closeSidebar(); });
  el.forget.addEventListener('click', () => {
    if (state.abort) state.abort.abort();
    askToken('');
  });
  el.tokenForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const token = el.tokenInput.value.trim();
    if (!token) return;
    localStorage.setItem(KEY_TOKEN, token);
    start();
  });
  window.addEventListener('hashchange', async () => {
    if (location.hash.includes('token=') && (await tokenFromUrl())) start();
  });

  if (undo) {
    undo.attach({
      api,
      errorText,
      isAuthError: (e) => e instanceof AuthError,
      conversationId: () => state.conversationId,
    });
  }

  if (compaction) {
    compaction.attach({
      api,
      isAuthError: (e) => e instanceof AuthError,
      conversationId: () => state.conversationId,
    });
  }

  if (conv) {
    conv.attach({
      api,
      errorText,
      isAuthError: (e) => e instanceof AuthError,
      loadHistory,
      newChat,
      send,
      busy: () => state.busy,
      conversationId: () => state.conversationId,
    });
  }

  tokenFromUrl().then(start);
})();
