// Approvals in the chat panel (docs/panel.md, "Approvals"). When a run streams
// APPROVAL_REQUIRED, the call's activity line opens to show its arguments and offers
// Approve, "Always allow <tool>" and Deny (with an optional reason); the choice is sent to
// POST /conversations/{id}/approvals/{approvalId} (the event's approvalId: the model's call
// ids are unique only within a turn). Once decided (or timed out, or the run
// stopped) the buttons go and the line says what was decided; a reopened conversation shows
// the decision stored in the tool message's `rojos.approval` note. Announced through the
// panel's polite live region (panel-a11y.js).
//
// panel.js calls: start({ api, errorText }), ask(line, event), settle(line, ok, result) when
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
  }

  // Shows the buttons for one waiting call.
  function ask(line, event) {
    if (!line || line.querySelector('.approve-box')) return;
    const name = typeof event.name === 'string' ? event.name : 'tool';
    line.dataset.waiting = 'true';
    line.querySelector('.act-status').textContent = 'needs approval';
    const details = line.querySelector('details');
    if (details) details.open = true;

    const box = node('div', 'approve-box');
    box.setAttribute('role', 'group');
    const title = node('p', 'approve-title', 'Run ' + name + ' with these arguments?');
    title.id = 'approve-title-' + Math.random().toString(36).slice(2);
    box.setAttribute('aria-labelledby', title.id);
    const approve = node('button', 'btn primary approve-yes', 'Approve');
    const always = node('button', 'btn approve-always', 'Always allow ' + name);
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
    box.append(title, actions, problem);
    line.appendChild(box);

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
          removeBox(line);
          const said = tag(line, decision, body.reason);
          line.querySelector('.act-status').textContent = decision === 'deny' ? 'denied' : 'running\u2026';
          announce(name + ' ' + said + '.');
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
    announce(name + ' needs your approval. The buttons are on its line.');
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

  return { start, ask, settle, recorded };
})();
