// Rojos chat panel: the files pane and the written-file view of `write_text_content` lines
// (docs/panel.md, "Files pane"). Talks to GET/PUT /projects/{id}/files[/content]
// (docs/api.md, "Project files") through the page's `api` (bearer token, 401 handling),
// which panel.js hands over in `RojosFiles.start`. panel-changes.js (through panel-undo.js)
// calls `markChanged` with what the newest turn changed: those entries carry a mark. panel.js calls four hooks: `start`,
// `projectChanged`, `decorate` (a new activity line), `toolFinished` (a TOOL_RESULT) and `refresh` (an undo changed the files).
//
// Safety rule, as in panel.js: file names, paths, file content and server messages are only
// ever put in the page as text (textContent / text nodes); no markup is parsed from them.
'use strict';

window.RojosFiles = (() => {
  // The tools that change the project's files (plugins/): their results refresh the pane.
  const CHANGING_TOOLS = new Set(['write_text_content', 'create_directory', 'move_path', 'delete_path']);
  // Whether the pane was open, kept across reloads.
  const KEY_OPEN = 'rojos.files.open';
  // How long a burst of tool results is gathered into one refresh, in ms.
  const REFRESH_DELAY = 120;

  const $ = (id) => document.getElementById(id);
  const el = {
    app: $('app'), toggle: $('files-toggle'), pane: $('files-pane'), project: $('files-project'),
    tree: $('files-tree'), refresh: $('files-refresh'), close: $('files-close'),
    target: $('files-target'), upload: $('files-upload'), message: $('files-message'),
    view: $('files-view'), viewPath: $('files-view-path'), viewMeta: $('files-view-meta'),
    download: $('files-download'), viewClose: $('files-view-close'), viewBody: $('files-view-body'),
  };

  const state = {
    api: null,
    errorText: null, // panel.js's reading of a refused response
    project: () => '',
    open: new Set(['.']), // expanded folders, by path ('.' is the root)
    folder: '.', // where an upload goes
    file: null, // the path of the file shown, or null
    refreshTimer: null,
    changed: new Map(), // path → what the newest turn did to it ("created", "modified", …)
    seq: 0, // bumped by every tree rebuild, so a slow answer never paints over a newer one
  };

  function node(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // The characters that show as nothing or reorder the text around them, as the server's
  // rojos-fs-guard `is_invisible` (docs/security.md, "Invisible characters in names"): each is
  // shown as `\u{XXXX}`, so a name made outside Rojos cannot pass for another.
  const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u3164\uFFA0]/gu;
  const shown = (name) => name.replace(INVISIBLE, (c) => '\\u{' + c.codePointAt(0).toString(16).padStart(4, '0') + '}');

  const join = (folder, name) => (folder === '.' ? name : folder + '/' + name);
  const parentOf = (path) => (path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '.');
  const baseName = (path) => path.slice(path.lastIndexOf('/') + 1);
  const shownFolder = (path) => (path === '.' ? 'the project root' : shown(path) + '/');

  function url(route, path, extra) {
    let q = '/projects/' + encodeURIComponent(state.project()) + route + '?path=' + encodeURIComponent(path);
    if (extra) q += '&' + extra;
    return q;
  }

  // The server's `{"error": …}` text of a refused response (panel.js's own reading of it).
  function errorText(response) {
    return state.errorText(response);
  }

  function say(text, kind, action) {
    el.message.replaceChildren();
    el.message.dataset.kind = kind || '';
    if (!text) return;
    el.message.append(node('span', 'files-message-text', text));
    if (action) el.message.append(action);
  }

  function size(n) {
    if (n < 1024) return n + ' B';
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KB';
    return (n / 1024 / 1024).toFixed(1) + ' MB';
  }

  // ---- the tree ----------------------------------------------------------------------------

  async function list(path) {
    const response = await state.api(url('/files', path));
    if (!response.ok) throw new Error(await errorText(response));
    return response.json();
  }

  // One entry as a button inside a tree item; folders carry their (lazy) children list.
  function item(folder, entry, seq) {
    const path = join(folder, entry.name);
    const li = node('li', 'files-node');
    const isDir = entry.type === 'directory';
    const button = node('button', 'files-item ' + (isDir ? 'folder' : 'file'));
    button.type = 'button';
    button.dataset.path = path;
    button.append(
      node('span', 'files-icon', isDir ? '\u25B8' : ''),
      node('span', 'files-name', shown(entry.name)),
    );
    if (entry.symlink) button.append(node('span', 'files-link', '\u2192 link'));
    const change = state.changed.get(path) || (isDir && [...state.changed.keys()].some((p) => p.startsWith(path + '/')) ? 'changed inside' : '');
    if (change) {
      li.dataset.change = change;
      button.append(node('span', 'files-change', change));
    }
    if (!isDir) button.append(node('span', 'files-size', size(entry.size)));
    li.appendChild(button);
    if (isDir) {
      const open = state.open.has(path);
      button.setAttribute('aria-expanded', String(open));
      button.title = 'Open or close this folder; uploads go to the folder chosen last';
      button.addEventListener('click', () => toggleFolder(li, button, path));
      if (open) fillFolder(li, path, seq);
    } else {
      button.title = 'Show this file';
      button.addEventListener('click', () => showFile(path));
    }
    if (path === state.folder && isDir) button.classList.add('target');
    if (path === state.file) button.setAttribute('aria-current', 'true');
    return li;
  }

  // Lists `path` into a new child list of `li`, or (no `li`) into the tree itself, whose old
  // content stays until the new listing is there (a refresh does not flicker or scroll).
  async function fillFolder(li, path, seq) {
    const ul = node('ul', 'files-children');
    ul.appendChild(node('li', 'files-loading muted small', 'Loading\u2026'));
    if (li) li.appendChild(ul); else if (!el.tree.firstChild) el.tree.appendChild(ul);
    let listing;
    try {
      listing = await list(path);
    } catch (e) {
      if (seq !== state.seq) return;
      ul.replaceChildren(node('li', 'files-error', e.message));
      if (!li) el.tree.replaceChildren(ul);
      return;
    }
    if (seq !== state.seq) return;
    if (!li) {
      const top = el.tree.scrollTop;
      el.tree.replaceChildren(ul);
      el.tree.scrollTop = top;
    }
    const items = listing.entries.map((entry) => item(path, entry, seq));
    if (items.length === 0) items.push(node('li', 'files-empty muted small', path === '.' ? 'No files yet.' : 'Empty folder.'));
    if (listing.truncated) items.push(node('li', 'muted small', listing.omitted + ' more not shown'));
    ul.replaceChildren(...items);
  }

  function toggleFolder(li, button, path) {
    chooseFolder(path);
    if (state.open.has(path)) {
      state.open.delete(path);
      button.setAttribute('aria-expanded', 'false');
      const children = li.querySelector(':scope > .files-children');
      if (children) children.remove();
    } else {
      state.open.add(path);
      button.setAttribute('aria-expanded', 'true');
      fillFolder(li, path, state.seq);
    }
  }

  function chooseFolder(path) {
    state.folder = path;
    el.target.textContent = shownFolder(path);
    for (const b of el.tree.querySelectorAll('.files-item.target')) b.classList.remove('target');
    const chosen = [...el.tree.querySelectorAll('.files-item.folder')].find((b) => b.dataset.path === path);
    if (chosen) chosen.classList.add('target');
  }

  // Rebuilds the tree from the root, keeping open folders open and focus where it was.
  async function refresh() {
    if (!state.api || el.pane.hidden) return;
    const seq = ++state.seq;
    const focused = document.activeElement && el.tree.contains(document.activeElement)
      ? document.activeElement.dataset.path : null;
    el.project.textContent = state.project();
    el.target.textContent = shownFolder(state.folder);
    await fillFolder(null, '.', seq);
    if (state.file) showFile(state.file, { quiet: true });
    if (focused) {
      // Children of open folders arrive on their own; give them a moment, then refocus.
      setTimeout(() => {
        const again = [...el.tree.querySelectorAll('.files-item')].find((b) => b.dataset.path === focused);
        if (again) again.focus();
      }, 200);
    }
  }

  function scheduleRefresh() {
    clearTimeout(state.refreshTimer);
    state.refreshTimer = setTimeout(refresh, REFRESH_DELAY);
  }

  // ---- the file view -----------------------------------------------------------------------

  // Text with a line number beside each line (the numbers cannot be selected or copied).
  // A file's text, each line numbered; the box scrolls sideways for long lines, so it is a
  // focusable, named region (keyboard users can scroll it; WCAG 2.1.1).
  function numbered(text, className, label) {
    const box = node('div', className);
    box.tabIndex = 0;
    box.setAttribute('role', 'region');
    box.setAttribute('aria-label', label);
    const lines = text.split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    for (const [i, line] of lines.entries()) {
      const row = node('div', 'files-line');
      const number = node('span', 'files-ln', String(i + 1));
      number.setAttribute('aria-hidden', 'true');
      row.append(number, node('span', 'files-text', line));
      box.appendChild(row);
    }
    return box;
  }

  async function showFile(path, options = {}) {
    state.file = path;
    for (const b of el.tree.querySelectorAll('.files-item[aria-current]')) b.removeAttribute('aria-current');
    const current = [...el.tree.querySelectorAll('.files-item.file')].find((b) => b.dataset.path === path);
    if (current) current.setAttribute('aria-current', 'true');
    el.view.hidden = false;
    el.viewPath.textContent = shown(path);
    if (!options.quiet) {
      el.viewMeta.textContent = '';
      el.viewBody.replaceChildren(node('p', 'muted small', 'Loading\u2026'));
    }
    let response;
    try {
      response = await state.api(url('/files/content', path));
    } catch (e) {
      el.viewBody.replaceChildren(node('p', 'files-error', e.message));
      return;
    }
    if (state.file !== path) return;
    if (!response.ok) {
      el.viewMeta.textContent = '';
      el.viewBody.replaceChildren(node('p', 'files-error', await errorText(response)));
      el.download.hidden = true;
      return;
    }
    const file = await response.json();
    if (state.file !== path) return;
    el.download.hidden = false;
    el.viewMeta.textContent = size(file.size) + (file.modifiedAt ? ' \u00B7 ' + file.modifiedAt.replace('T', ' ').replace('Z', ' UTC') : '');
    if (typeof file.text === 'string') {
      el.viewBody.replaceChildren(numbered(file.text, 'files-code', 'Text of ' + path));
    } else {
      el.viewBody.replaceChildren(node('p', 'files-note', typeof file.note === 'string' ? file.note : 'This file cannot be shown as text.'));
    }
  }

  function closeFile() {
    state.file = null;
    el.view.hidden = true;
    for (const b of el.tree.querySelectorAll('.files-item[aria-current]')) b.removeAttribute('aria-current');
  }

  // The download needs the bearer token, so it is fetched and handed to the browser as a blob.
  async function download() {
    const path = state.file;
    if (!path) return;
    const response = await state.api(url('/files/content', path, 'download=1'));
    if (!response.ok) { say(await errorText(response), 'error'); return; }
    const blob = await response.blob();
    const link = node('a');
    link.href = URL.createObjectURL(blob);
    link.download = shown(baseName(path));
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  }

  // ---- uploads -----------------------------------------------------------------------------

  async function upload(file, overwrite) {
    const path = join(state.folder, file.name);
    say('Uploading ' + shown(file.name) + '\u2026', 'busy');
    let response;
    try {
      response = await state.api(url('/files/content', path, overwrite ? 'overwrite=1' : ''), { method: 'PUT', body: file });
    } catch (e) {
      say('Upload failed: ' + e.message, 'error');
      return;
    }
    if (response.status === 409 && !overwrite) {
      const replace = node('button', 'btn files-replace', 'Replace it');
      replace.type = 'button';
      replace.addEventListener('click', () => upload(file, true));
      say(shown(file.name) + ' already exists in ' + shownFolder(state.folder) + '.', 'error', replace);
      replace.focus();
      return;
    }
    if (!response.ok) {
      say('Not uploaded: ' + (await errorText(response)), 'error');
      return;
    }
    say('Uploaded ' + path + '.', 'ok');
    if (state.folder !== '.') state.open.add(state.folder);
    await refresh();
  }

  async function uploadAll(files) {
    for (const file of files) await upload(file, false);
  }

  // ---- the pane ----------------------------------------------------------------------------

  function setOpen(open) {
    el.pane.hidden = !open;
    el.app.classList.toggle('files-open', open);
    el.toggle.setAttribute('aria-expanded', String(open));
    localStorage.setItem(KEY_OPEN, open ? '1' : '0');
    if (open) refresh();
  }

  // Opens the pane on `path`, with the folders on its way expanded.
  function openFile(path) {
    for (let folder = parentOf(path); folder !== '.'; folder = parentOf(folder)) state.open.add(folder);
    state.file = path;
    if (el.pane.hidden) setOpen(true); else refresh();
    showFile(path);
  }

  // A `write_text_content` line shows the written text, numbered, instead of its JSON, and a
  // link to the file in the pane. (Whether it replaced a file, and a diff against what was
  // there, is not known to the page: the tool's result is `{"ok":true}`; docs/panel.md.)
  function decorate(line, name, args) {
    if (name !== 'write_text_content' || !args || typeof args !== 'object') return;
    if (typeof args.path !== 'string' || typeof args.text !== 'string') return;
    const raw = line.querySelector('.act-args-full');
    if (!raw) return;
    const head = node('div', 'act-written');
    const open = node('button', 'files-open-link', 'Open in files');
    open.type = 'button';
    open.title = 'Show ' + args.path + ' in the files pane';
    open.addEventListener('click', () => openFile(args.path));
    head.append(node('span', 'act-written-path', args.path), open);
    raw.replaceWith(head, numbered(args.text, 'files-code act-written-text', 'Text written to ' + args.path));
  }

  // Marks the files the newest turn changed ([{ path, kind }], panel-changes.js); a deleted
  // file is gone from the tree, so only what is still there shows a mark.
  function markChanged(files) {
    const next = new Map(files.filter((f) => f.kind !== 'deleted').map((f) => [f.path, f.kind]));
    const same = next.size === state.changed.size && [...next].every(([p, k]) => state.changed.get(p) === k);
    state.changed = next;
    if (!same) scheduleRefresh();
  }

  function toolFinished(name) {
    if (CHANGING_TOOLS.has(name)) scheduleRefresh();
  }

  function start(options) {
    state.api = options.api;
    state.errorText = options.errorText;
    state.project = options.project;
    if (!el.pane.hidden) refresh();
    else if (localStorage.getItem(KEY_OPEN) === '1') setOpen(true);
  }

  function projectChanged() {
    el.tree.replaceChildren();
    state.changed = new Map();
    state.open = new Set(['.']);
    state.folder = '.';
    closeFile();
    say('');
    refresh();
  }

  el.toggle.addEventListener('click', () => setOpen(el.pane.hidden));
  el.close.addEventListener('click', () => { setOpen(false); el.toggle.focus(); });
  el.refresh.addEventListener('click', refresh);
  el.viewClose.addEventListener('click', closeFile);
  el.download.addEventListener('click', download);
  el.upload.addEventListener('change', async () => {
    const files = [...el.upload.files];
    el.upload.value = '';
    await uploadAll(files);
  });
  el.pane.addEventListener('dragover', (e) => {
    if (!e.dataTransfer || ![...e.dataTransfer.types].includes('Files')) return;
    e.preventDefault();
    el.pane.classList.add('dropping');
  });
  el.pane.addEventListener('dragleave', (e) => {
    if (!el.pane.contains(e.relatedTarget)) el.pane.classList.remove('dropping');
  });
  el.pane.addEventListener('drop', (e) => {
    el.pane.classList.remove('dropping');
    if (!e.dataTransfer || e.dataTransfer.files.length === 0) return;
    e.preventDefault();
    uploadAll([...e.dataTransfer.files]);
  });
  // Escape inside the pane closes it, at any width (elsewhere panel-keys.js decides).
  el.pane.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !e.shiftKey && !el.pane.hidden) {
      e.preventDefault();
      setOpen(false);
      el.toggle.focus();
    }
  });

  return { start, projectChanged, decorate, toolFinished, openFile, markChanged, refresh: scheduleRefresh };
})();
