// Rojos chat panel: what a tool call will do, in words, for the approval box
// (panel-approve.js; docs/panel.md, "Approvals"). One global, `RojosWhat`:
//
// - sentence(tool, args): at once, from the arguments alone: "Delete notes/a.md?",
//   "Move a.md → b/a.md?", "Create the folder docs?", "Write notes/a.md?";
// - explain(tool, args, { api, project }): resolves to { sentence, detail } once the files
//   concerned were read (GET /projects/{id}/files/content): a delete names the file's size
//   and when it last changed and offers its text (what will be lost); a write says whether it
//   creates or replaces the file and shows its diff against the file as it is now. `null`
//   when there is nothing more to say.
//
// Paths and file text are only ever set as textContent.
'use strict';

window.RojosWhat = (() => {
  function node(tag, className, text) {
    const n = document.createElement(tag);
    if (className) n.className = className;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  const str = (v) => (typeof v === 'string' ? v : '');
  const plural = (n, one) => n + ' ' + one + (n === 1 ? '' : 's');

  function sentence(tool, args) {
    const path = str(args.path);
    switch (tool) {
      case 'delete_path':
        return args.recursive === true ? 'Delete ' + path + ' and everything in it?' : 'Delete ' + path + '?';
      case 'move_path':
        return 'Move ' + str(args.from) + ' \u2192 ' + str(args.to) + '?';
      case 'create_directory':
        return 'Create the folder ' + path + '?';
      case 'write_text_content':
        return 'Write ' + path + ' (' + plural(window.RojosDiff.lines(str(args.text)).length, 'line') + ')?';
      default:
        return 'Run ' + tool + ' with these arguments?';
    }
  }

  // "5 minutes ago", "yesterday", from an RFC 3339 time.
  function ago(iso) {
    const then = Date.parse(iso);
    if (Number.isNaN(then)) return '';
    let value = (then - Date.now()) / 1000;
    const rtf = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
    for (const [size, unit] of [[60, 'second'], [60, 'minute'], [24, 'hour'], [7, 'day'], [4.35, 'week'], [12, 'month']]) {
      if (Math.abs(value) < size) return rtf.format(Math.round(value), unit);
      value /= size;
    }
    return rtf.format(Math.round(value), 'year');
  }

  // The file at `path` now: { exists, size, modifiedAt, text? } or null when unknown (a
  // folder, a refusal, no connection). Found by listing its folders from the root (each
  // listing answers 200), so a file that does not exist yet costs no failed request.
  async function current(ctx, path) {
    const base = '/projects/' + encodeURIComponent(ctx.project) + '/files';
    const names = path.split('/').filter((n) => n && n !== '.');
    if (!names.length) return null;
    try {
      let folder = '.';
      let entry = null;
      for (const [i, name] of names.entries()) {
        const response = await ctx.api(base + '?path=' + encodeURIComponent(folder));
        if (!response.ok) return null;
        const listing = await response.json();
        entry = (listing.entries || []).find((e) => e.name === name);
        if (!entry) return listing.truncated ? null : { exists: false };
        if (i < names.length - 1 && entry.type !== 'directory') return { exists: false };
        folder = folder === '.' ? name : folder + '/' + name;
      }
      if (entry.type !== 'file') return null;
      const response = await ctx.api(base + '/content?path=' + encodeURIComponent(path));
      if (!response.ok) return null;
      const file = await response.json();
      return { exists: true, size: file.size, modifiedAt: file.modifiedAt, text: typeof file.text === 'string' ? file.text : null };
    } catch (_) {
      return null;
    }
  }

  // A folded section ("Show what will be deleted") holding `content`.
  function fold(summary, content) {
    const details = node('details', 'approve-more');
    details.append(node('summary', null, summary), content);
    return details;
  }

  async function explain(tool, args, ctx) {
    if (!ctx.project) return null;
    const path = str(args.path);
    if (tool === 'delete_path' && path) {
      const file = await current(ctx, path);
      if (!file || !file.exists) return null;
      const size = window.RojosA11y ? window.RojosA11y.formatBytes(file.size) : file.size + ' B';
      const when = file.modifiedAt ? ', last changed ' + ago(file.modifiedAt) : '';
      const result = { sentence: 'Delete ' + path + ' (' + size + when + ')?' };
      if (file.text !== null) {
        const lost = window.RojosDiff.lines(file.text);
        const rows = lost.map((line) => ['-', line]);
        result.detail = fold(
          'Show what will be deleted (' + plural(lost.length, 'line') + ')',
          window.RojosDiff.view(rows, 'The text of ' + path + ', deleted if you approve'),
        );
      }
      return result;
    }
    if (tool === 'write_text_content' && path && typeof args.text === 'string') {
      const file = await current(ctx, path);
      if (!file) return null;
      const count = plural(window.RojosDiff.lines(args.text).length, 'line');
      if (!file.exists) return { sentence: 'Create ' + path + ' (' + count + ')?' };
      if (file.text === null) return { sentence: 'Replace ' + path + ' (' + window.RojosA11y.formatBytes(file.size) + ', not text) with ' + count + ' of text?' };
      const rows = window.RojosDiff.rows(file.text, args.text);
      if (rows === null) return { sentence: 'Replace ' + path + ' with ' + count + '? (too many lines change to show the diff)' };
      const change = window.RojosDiff.said(window.RojosDiff.counts(rows));
      if (!change) return { sentence: 'Write ' + path + '? (the same text it holds now)' };
      return {
        sentence: 'Change ' + path + ' (' + change + ' lines)?',
        detail: window.RojosDiff.view(rows, 'What the write changes in ' + path),
      };
    }
    return null;
  }

  return { sentence, explain };
})();
