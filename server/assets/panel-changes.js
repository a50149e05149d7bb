// Rojos chat panel: a turn's file changes, first-class (docs/panel.md, "File changes").
// After a turn that changed files, a card lists each file created, modified, deleted or
// moved, with its +/− line counts; each entry opens its diff (a delete: the text that went).
// The collapsed line of each call says what it did ("modified +6 −2", "created +12",
// "deleted −40", "moved"), and the files pane marks what the newest turn changed.
//
// panel-undo.js calls `show(bubble, checkpoint, lines, place)` for each turn with a
// checkpoint (docs/api.md, "Undo of file changes"): the turn's state before it ran is read
// from GET /conversations/{id}/checkpoints/{run}/before?path=P, the state after it from the
// turn's own calls, in order (a later turn may have changed the file since). One global,
// `RojosChanges`; `attach({ api, conversationId })` first; panel-undo.js hands over each
// activity line's arguments (`note`).
//
// Paths and file text are only ever set as textContent.
'use strict';

window.RojosChanges = (() => {
  let panel = null;
  // "run\npath" → Promise of { existed, text } (or null when unknown): each is read once.
  const befores = new Map();

  function attach(handed) {
    panel = handed;
  }

  function node(tag, className, text) {
    const n = document.createElement(tag);
    if (className) n.className = className;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // The arguments of each file tool's activity line (handed over in `note`).
  const argsByLine = new WeakMap();
  const FILE_TOOLS = new Set(['write_text_content', 'delete_path', 'move_path']);

  function note(line, name, args) {
    if (FILE_TOOLS.has(name) && args && typeof args === 'object') argsByLine.set(line, args);
  }

  function argsOf(line) {
    return argsByLine.get(line) || null;
  }

  // The state of `path` before the turn `run` ran.
  function before(run, path) {
    const key = run + '\n' + path;
    if (!befores.has(key)) {
      const id = panel.conversationId();
      const url = '/conversations/' + encodeURIComponent(id) + '/checkpoints/' + encodeURIComponent(run) +
        '/before?path=' + encodeURIComponent(path);
      befores.set(key, panel.api(url).then(async (response) => {
        if (!response.ok) return null;
        const body = await response.json();
        return { existed: body.existed === true, text: typeof body.text === 'string' ? body.text : null };
      }).catch(() => null));
    }
    return befores.get(key);
  }

  // Walks the turn's successful file calls in order. Returns the files as the turn left them
  // (path → { kind, before, after, rows, from }) and, per line, what that call did.
  async function follow(run, lines, available) {
    const now = new Map(); // path → { text, existed } as the turn went on
    const files = new Map();
    const perLine = [];
    const startOf = async (path) => {
      if (now.has(path)) return now.get(path);
      const was = available ? await before(run, path) : null;
      const state = was ? { existed: was.existed, text: was.text } : { existed: null, text: null };
      now.set(path, state);
      if (!files.has(path)) files.set(path, { first: state });
      return state;
    };
    for (const line of lines) {
      const tool = line.dataset.tool;
      const args = argsOf(line);
      if (!args) continue;
      if (tool === 'write_text_content' && typeof args.path === 'string' && typeof args.text === 'string') {
        const was = await startOf(args.path);
        let rows = null;
        if (was.existed === false) rows = window.RojosDiff.rows('', args.text);
        else if (typeof was.text === 'string') rows = window.RojosDiff.rows(was.text, args.text);
        const kind = was.existed === false ? 'created' : was.existed ? 'modified' : 'written';
        perLine.push([line, kind, rows]);
        now.set(args.path, { existed: true, text: args.text });
      } else if (tool === 'delete_path' && typeof args.path === 'string') {
        const was = await startOf(args.path);
        const rows = typeof was.text === 'string' ? window.RojosDiff.rows(was.text, '') : null;
        perLine.push([line, 'deleted', rows]);
        now.set(args.path, { existed: false, text: null });
      } else if (tool === 'move_path' && typeof args.from === 'string' && typeof args.to === 'string') {
        const was = await startOf(args.from);
        perLine.push([line, 'moved', null]);
        const entry = files.get(args.from);
        files.delete(args.from);
        files.set(args.to, { first: entry ? entry.first : was, from: entry && entry.from ? entry.from : args.from });
        now.set(args.to, was);
        now.set(args.from, { existed: false, text: null });
      }
    }
    const out = [];
    for (const [path, entry] of files) {
      const first = entry.first;
      const last = now.get(path) || { existed: null, text: null };
      let kind;
      if (entry.from) kind = 'moved';
      else if (first.existed === false && last.existed) kind = 'created';
      else if (first.existed && last.existed === false) kind = 'deleted';
      else if (first.existed === false && last.existed === false) continue; // made and removed again
      else kind = first.existed === null ? 'written' : 'modified';
      let rows = null;
      const beforeText = first.existed === false ? '' : first.text;
      const afterText = last.existed === false ? '' : last.text;
      if (typeof beforeText === 'string' && typeof afterText === 'string') rows = window.RojosDiff.rows(beforeText, afterText);
      out.push({ path, kind, rows, from: entry.from });
    }
    return { files: out, perLine };
  }

  function said(kind, rows) {
    const counts = rows ? window.RojosDiff.said(window.RojosDiff.counts(rows)) : '';
    return counts ? kind + ' ' + counts : kind;
  }

  function card(files) {
    const box = node('section', 'changes-card');
    const title = node('h3', 'changes-title', files.length === 1 ? '1 file changed' : files.length + ' files changed');
    title.id = 'changes-' + Math.random().toString(36).slice(2);
    box.setAttribute('aria-labelledby', title.id);
    const list = node('ul', 'changes-list');
    for (const file of files) {
      const item = node('li', 'changes-item');
      item.dataset.kind = file.kind;
      item.dataset.path = file.path;
      const head = [
        node('span', 'change-kind', file.kind),
        node('span', 'change-path', file.from ? file.from + ' \u2192 ' + file.path : file.path),
      ];
      const counts = file.rows ? window.RojosDiff.said(window.RojosDiff.counts(file.rows)) : '';
      if (counts) head.push(node('span', 'change-count', counts));
      const showsDiff = file.rows && file.rows.some((r) => r[0] !== ' ');
      if (showsDiff) {
        const details = node('details', 'change-details');
        const summary = node('summary', 'change-summary');
        summary.append(...head);
        details.append(summary);
        const label = file.kind === 'deleted' ? 'The text deleted with ' + file.path : 'Changes to ' + file.path + ' in this turn';
        details.addEventListener('toggle', () => {
          if (details.open && !details.querySelector('.diff')) details.append(window.RojosDiff.view(file.rows, label));
        });
        item.append(details);
      } else {
        const row = node('div', 'change-summary');
        row.append(...head);
        item.append(row);
      }
      list.append(item);
    }
    box.append(title, list);
    return box;
  }

  // Draws the card of the turn that starts at `bubble` (its checkpoint `checkpoint`, its
  // activity lines `lines`), with `place(element)` putting it after the turn. Resolves to
  // the files it lists.
  async function show(bubble, checkpoint, lines, place) {
    if (!panel) return [];
    const ok = lines.filter((l) => l.dataset.status === 'ok');
    const { files, perLine } = await follow(checkpoint.run, ok, checkpoint.available !== false);
    for (const [line, kind, rows] of perLine) {
      line.querySelector('.act-status').textContent = said(kind, rows);
      line.dataset.change = kind;
    }
    const old = [...document.querySelectorAll('.changes-card')].find((c) => c.dataset.run === checkpoint.run);
    if (old) old.remove();
    if (!files.length || !bubble.isConnected) return files;
    const element = card(files);
    element.dataset.run = checkpoint.run;
    if (checkpoint.undone) element.dataset.undone = 'true';
    place(element);
    return files;
  }

  return { attach, note, show };
})();
