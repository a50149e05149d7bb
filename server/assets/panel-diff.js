// Rojos chat panel: line diffs (docs/panel.md, "File changes"). One global, `RojosDiff`:
//
// - rows(before, after): the line diff of two texts as [sign, text] rows (' ' kept, '-'
//   removed, '+' added), by jsdiff's `diffLines` (Myers' algorithm, in the bundled
//   vendor/markdown.js); `null` when the texts differ in more than MAX_EDIT lines (the diff
//   would be slow to find and too long to read);
// - counts(rows): { added, removed } lines;
// - view(rows, label): the rows as a focusable, named region (it scrolls), long unchanged
//   stretches folded to one row;
// - lines(text): a text's lines, as the rows count them.
//
// Text is only ever set as textContent.
'use strict';

window.RojosDiff = (() => {
  // Most lines added plus removed a diff is looked for over.
  const MAX_EDIT = 4000;
  // Unchanged lines kept around each change; longer unchanged stretches fold into one row.
  const CONTEXT = 3;

  function node(tag, className, text) {
    const n = document.createElement(tag);
    if (className) n.className = className;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function lines(text) {
    if (!text) return [];
    const all = String(text).split('\n');
    if (all[all.length - 1] === '') all.pop();
    return all;
  }

  // Every text ends in a line break before it is compared, so a last line without one is the
  // same line as with one (the file view shows no difference either).
  const closed = (text) => (text && !text.endsWith('\n') ? text + '\n' : text || '');

  function rows(before, after) {
    const changes = window.RojosVendor.diffLines(closed(before), closed(after), { maxEditLength: MAX_EDIT });
    if (!changes) return null;
    const out = [];
    for (const change of changes) {
      const sign = change.added ? '+' : change.removed ? '-' : ' ';
      for (const line of lines(change.value)) out.push([sign, line]);
    }
    return out;
  }

  function counts(list) {
    let added = 0;
    let removed = 0;
    for (const [sign] of list) {
      if (sign === '+') added++;
      else if (sign === '-') removed++;
    }
    return { added, removed };
  }

  // "+6 −2" (a true minus sign), "+6", "−2", or '' for no change.
  function said({ added, removed }) {
    return [added ? '+' + added : '', removed ? '\u2212' + removed : ''].filter(Boolean).join(' ');
  }

  function view(list, label) {
    const box = node('div', 'diff');
    box.tabIndex = 0;
    box.setAttribute('role', 'region');
    box.setAttribute('aria-label', label);
    const changed = list.map((r) => r[0] !== ' ');
    const near = (k) => changed.slice(Math.max(0, k - CONTEXT), k + CONTEXT + 1).some(Boolean);
    let folded = 0;
    const flush = () => {
      if (folded) box.append(node('div', 'diff-line diff-fold', '\u22EF ' + folded + ' unchanged line' + (folded === 1 ? '' : 's')));
      folded = 0;
    };
    list.forEach(([sign, text], k) => {
      if (sign === ' ' && !near(k)) { folded++; return; }
      flush();
      const kind = sign === '+' ? 'diff-add' : sign === '-' ? 'diff-del' : 'diff-same';
      const row = node('div', 'diff-line ' + kind);
      row.append(node('span', 'diff-sign', sign === '-' ? '\u2212' : sign), node('span', 'diff-text', text));
      box.append(row);
    });
    flush();
    return box;
  }

  return { rows, counts, said, view, lines };
})();
