// Bundles entry.js into ../vendor/markdown.js (IIFE, minified) with a banner naming each
// bundled package, its version and licence, and copies their licence texts to
// ../vendor/licenses/. Run through scripts/vendor-panel (after `npm ci`); the output depends
// only on package-lock.json, so a rerun gives the same bytes.
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);
// The output folder: ../vendor, or the first argument (scripts/vendor-panel --check).
const out = path.resolve(process.argv[2] || path.join(here, '..', 'vendor'));

const result = await esbuild.build({
  entryPoints: [path.join(here, 'entry.js')],
  absWorkingDir: here,
  bundle: true,
  format: 'iife',
  minify: true,
  target: 'es2020',
  legalComments: 'none',
  charset: 'ascii',
  metafile: true,
  write: false,
});

// The packages whose code is in the bundle, from esbuild's list of inputs.
const names = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) names.add(m[1]);
}
const packages = [...names].sort().map((name) => {
  const dir = path.join(here, 'node_modules', name);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const licence = fs.readdirSync(dir).find((f) => /^licen[sc]e/i.test(f));
  if (!licence) throw new Error(`${name}: no licence file`);
  return { name, version: meta.version, license: meta.license, licenceFile: path.join(dir, licence) };
});

fs.rmSync(path.join(out, 'licenses'), { recursive: true, force: true });
fs.mkdirSync(path.join(out, 'licenses'), { recursive: true });
for (const p of packages) {
  const text = fs.readFileSync(p.licenceFile, 'utf8');
  fs.writeFileSync(path.join(out, 'licenses', `${p.name.replace('/', '__')}.txt`), text);
}

const banner = [
  '/*! server/assets/vendor/markdown.js: built by scripts/vendor-panel from server/assets/vendor-src',
  ' * (esbuild ' + esbuild.version + '); do not edit. Bundled packages (licence texts in vendor/licenses/):',
  ...packages.map((p) => ` *   ${p.name} ${p.version} (${p.license})`),
  ' */',
].join('\n');
const code = result.outputFiles[0].text;
fs.writeFileSync(path.join(out, 'markdown.js'), `${banner}\n${code}`);
console.log(`wrote ${path.relative(process.cwd(), path.join(out, 'markdown.js'))}: ${fs.statSync(path.join(out, "markdown.js")).size} bytes, ${packages.length} packages`);
