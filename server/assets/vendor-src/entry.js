// The panel's third-party code, bundled by scripts/vendor-panel into ONE file,
// server/assets/vendor/markdown.js, which sets `window.RojosVendor`. Our own rendering code
// (server/assets/panel-render.js) configures and uses these; nothing here touches the page.
//
// - markdown-it: CommonMark parser with GFM tables and strikethrough; we use its token stream
//   only, never its HTML renderer.
// - lowlight: highlight.js's grammars (the `common` set, ~37 languages) returning a syntax
//   tree (hast) instead of HTML, so highlighted code is built from DOM nodes too.
// - diff (jsdiff): the line diff of a written, deleted or moved file against what was there
//   (Myers' algorithm, bounded by `maxEditLength`), as a list of change objects, never HTML.
import MarkdownIt from 'markdown-it';
import { common, createLowlight } from 'lowlight';
import { diffLines } from 'diff';

globalThis.RojosVendor = Object.freeze({ MarkdownIt, lowlight: createLowlight(common), diffLines });
