// Approvals in the chat panel (docs/panel.md, "Approvals"). When a run streams
// APPROVAL_REQUIRED, the call's line says "waiting for your approval" (no spinner, no typing
// dots: nothing runs) and a box under it says what will happen as a sentence (panel-what.js:
// "Delete notes/a.md (2.1 KB, last changed 5 minutes ago)?", a move from → to, a write's diff
// against the file now); focus moves to the box, which is announced. It offers
// Approve, "Always allow <tool>" and Deny (with an optional reason); the choice is sent to
// POST /conversations/{id}/approvals/{approvalId} (the event's approvalId: the model's call
// ids are unique only within a turn). Once decided (or timed out, or the run
// stopped) the buttons go and the line says what was decided; a reopened conversation shows
// the decision stored in the tool message's `rojos.approval` note. Announced through the
// panel's polite live region (panel-a11y.js).
//
// The tools always allowed in the open conversation are listed under the input, each with an
// "Ask again" button (GET and DELETE /conversations/{id}/always-allowed[/{tool}]):
// showAllowed(conversationId) redraws them.
//
// panel.js calls: start({ api, errorText, project }), ask(line, event), settle(line, ok, result) when
// the call's result arrives or the run ends, and recorded(line, approval) for a stored note.
// Text from the model or the server is only ever set as textContent.
'use strict';

window.RojosApprove = (() => {
  let ctx = null;

  // What the line says once the call's approval is settled, by stored decision.
  const SAID = {
    approve: 'approved',
    approve_always: 'always allowed',
    deny: 'denied',
    timeout: 'not answered in time: denied',
    cancelled: 'not run: the run stopped',
  };

  function node(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function announce(text) {
    if (window.RojosA11y) window.RojosA11y.announce(text);
  }

  function start(context) {
    ctx = context;
  }

  // The "approved" / "denied: reason" tag on the line's summary.
  function tag(line, decision, reason) {
    let mark = line.querySelector('.act-approval');
    if (!mark) {
      mark = node('span', 'act-approval');
      const status = line.querySelector('.act-status');
      status.parentNode.insertBefore(mark, status);
    }
    const said = SAID[decision] || String(decision);
    mark.textContent = reason ? said + ': ' + reason : said;
    line.dataset.approval = decision;
    return said;
  }

  function removeBox(line) {
    const box = line.querySelector('.approve-box');
    if (box) box.remove();
    delete line.dataset.waiting;
    // No call waits any more: the typing dots come back while the run goes on.
    if (!document.querySelector('.activity[data-waiting="true"]')) {
      document.getElementById('app').classList.remove('awaiting');
    }
  }

  // Shows the box for one waiting call: a sentence saying what will happen (panel-what.js
  // fills in what is known of the files), the buttons, and focus on the box.
  function ask(line, event) {
    if (!line || line.querySelector('.approve-box')) return;
    const name = typeof event.name === 'string' ? event.name : 'tool';
    const args = event.args && typeof event.args === 'object' ? event.args : {};
    line.dataset.waiting = 'true';
    line.querySelector('.act-status').textContent = 'waiting for your approval';
    const result = line.querySelector('.act-result');
    if (result) result.textContent = 'Not run: waiting for your approval.';
    document.getElementById('app').classList.add('awaiting');

    const box = node('div', 'approve-box');
    box.setAttribute('role', 'group');
    box.tabIndex = -1;
    const what = window.RojosWhat ? window.RojosWhat.sentence(name, args) : 'Run ' + name + ' with these arguments?';
    const title = node('p', 'approve-title', what);
    title.id = 'approve-title-' + Math.random().toString(36).slice(2);
    box.setAttribute('aria-labelledby', title.id);
    const detail = node('div', 'approve-detail');
    const approve = node('button', 'btn primary approve-yes', 'Approve');
    const always = node('button', 'btn approve-always', 'Always allow ' + name);
    always.title = 'Run every later ' + name + ' call of this conversation without asking (you can take it back under the input)';
    const label = node('label', 'approve-reason-label', 'Reason (optional)');
    const reason = node('input', 'approve-reason');
    reason.type = 'text';
    reason.maxLength = 500;
    reason.id = title.id + '-reason';
    label.htmlFor = reason.id;
    const deny = node('button', 'btn approve-no', 'Deny');
    for (const b of [approve, always, deny]) b.type = 'button';
    const problem = node('p', 'approve-error');
    problem.setAttribute('role', 'alert');
    problem.hidden = true;
    const actions = node('div', 'approve-actions');
    actions.append(approve, always, label, reason, deny);
    box.append(title, actions, detail, problem);
    // The box goes right under the summary line, where the eye is; the raw arguments stay
    // one click away (the line is not opened).
    const details = line.querySelector('details');
    line.insertBefore(box, details ? details.nextSibling : null);
    if (window.RojosWhat && ctx && ctx.project) {
      window.RojosWhat.explain(name, args, { api: ctx.api, project: ctx.project() }).then((known) => {
        if (!known || !box.isConnected) return;
        if (known.sentence) title.textContent = known.sentence;
        if (known.detail) detail.replaceChildren(known.detail);
      });
    }

    const conversation = event.conversationId;
    // A server from before approval ids named the call by its id alone.
    const approvalId = typeof event.approvalId === 'string' ? event.approvalId : event.id;
    const send = async (decision) => {
      const body = { decision };
      const why = reason.value.trim();
      if (decision === 'deny' && why) body.reason = why;
      for (const b of box.querySelectorAll('button, input')) b.disabled = true;
      problem.hidden = true;
      try {
        const response = await ctx.api(
          '/conversations/' + encodeURIComponent(conversation) + '/approvals/' + encodeURIComponent(approvalId),
          { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) },
        );
        if (response.ok) {
          const hadFocus = box.contains(document.activeElement);
          removeBox(line);
          const said = tag(line, decision, body.reason);
          line.querySelector('.act-status').textContent = decision === 'deny' ? 'denied' : 'running\u2026';
          if (result) result.textContent = decision === 'deny' ? 'Not run: denied.' : 'Running\u2026';
          announce(name + ' ' + said + '.');
          if (decision === 'approve_always') showAllowed(conversation);
          if (hadFocus) document.getElementById('input').focus();
          return;
        }
        problem.textContent = await ctx.errorText(response);
      } catch (e) {
        problem.textContent = 'The decision was not sent: ' + (e && e.message ? e.message : e);
      }
      problem.hidden = false;
      for (const b of box.querySelectorAll('button, input')) b.disabled = false;
    };
    approve.addEventListener('click', () => send('approve'));
    always.addEventListener('click', () => send('approve_always'));
    deny.addEventListener('click', () => send('deny'));
    reason.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); send('deny'); }
    });
    announce('Waiting for your approval: ' + title.textContent + ' Approve or Deny is on the focused box.');
    box.scrollIntoView({ block: 'nearest' });
    box.focus();
  }

  // ---- always allowed: the line under the input, each tool with its "Ask again" button ----

  let allowedSeq = 0;

  // Reads GET /conversations/{id}/always-allowed and shows the tools (nothing when none, or
  // for a new chat).
  async function showAllowed(conversation) {
    const bar = document.getElementById('always-allowed');
    if (!bar || !ctx) return;
    const mine = ++allowedSeq;
    if (!conversation) { bar.replaceChildren(); bar.hidden = true; return; }
    let tools = [];
    try {
      const response = await ctx.api('/conversations/' + encodeURIComponent(conversation) + '/always-allowed');
      if (!response.ok) return;
      const body = await response.json();
      tools = Array.isArray(body.tools) ? body.tools.filter((t) => typeof t === 'string') : [];
    } catch (_) {
      return; // an extra: the list stays as it was
    }
    if (mine !== allowedSeq) return;
    bar.replaceChildren();
    bar.hidden = tools.length === 0;
    if (!tools.length) return;
    bar.append(node('span', 'allowed-label', 'Runs without asking in this conversation:'));
    for (const tool of tools) {
      const item = node('span', 'allowed-tool');
      const revoke = node('button', 'btn allowed-revoke', 'Ask again');
      revoke.type = 'button';
      revoke.setAttribute('aria-label', 'Ask again before ' + tool + ' runs');
      revoke.addEventListener('click', async () => {
        revoke.disabled = true;
        try {
          const response = await ctx.api(
            '/conversations/' + encodeURIComponent(conversation) + '/always-allowed/' + encodeURIComponent(tool),
            { method: 'DELETE' },
          );
          if (response.ok || response.status === 404) {
            announce(tool + ' will ask for your approval again.');
            await showAllowed(conversation);
            document.getElementById('input').focus();
            return;
          }
          announce(await ctx.errorText(response));
        } catch (_) { /* the button comes back */ }
        revoke.disabled = false;
      });
      item.append(node('code', 'allowed-name', tool), revoke);
      bar.append(item);
    }
  }

  // The call's result came (or the run ended): no more buttons. A call still waiting when
  // its result arrives was not answered in time, or the run stopped.
  function settle(line, ok, result) {
    if (!line || line.dataset.waiting !== 'true') return;
    removeBox(line);
    const timedOut = typeof result === 'string' && result.includes('did not answer within');
    const said = tag(line, timedOut ? 'timeout' : 'cancelled');
    announce((line.dataset.tool || 'The tool') + ': ' + said + '.');
  }

  // A stored tool message's note: { decision, reason? }.
  function recorded(line, approval) {
    if (!line || !approval || typeof approval.decision !== 'string') return;
    tag(line, approval.decision, typeof approval.reason === 'string' ? approval.reason : '');
  }

  return { start, ask, settle, recorded, showAllowed };
})();
