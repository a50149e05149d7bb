// Starts the real `rojos` binary (`target/debug/rojos`, or `$ROJOS_BIN`) on `127.0.0.1:0`
// with a generated config: fresh temp storage, the seven built-in plugins from
// `target/debug/`, a `scripted` provider pointing at a scripted upstream, two rojos and two
// tokens. Conversations are read in pages of at most 1 KiB (the smallest allowed), so every
// reopened conversation of more than a few messages is loaded page by page. The server's log
// goes to `test-output/browser/logs/`.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const OUTPUT = path.join(ROOT, 'test-output', 'browser');
/** Allowed on every project. */
export const TOKEN = 'browser-test-token-all';
/** Allowed on project `demo` only. */
export const DEMO_TOKEN = 'browser-test-token-demo';

const TOOLS = [
  'read_path_meta', 'get_text_content', 'write_text_content', 'list_files', 'create_directory',
  'delete_path', 'move_path',
];

function binary() {
  const bin = process.env.ROJOS_BIN || path.join(ROOT, 'target', 'debug', 'rojos');
  if (!fs.existsSync(bin)) throw new Error(`${bin} is missing: run \`cargo build --workspace\` first`);
  return bin;
}

function config(upstreamUrl, provider, extra) {
  const libs = TOOLS.map((t) => {
    const lib = path.join(ROOT, 'target', 'debug', `librojos_tool_${t}.so`);
    if (!fs.existsSync(lib)) throw new Error(`${lib} is missing: run \`cargo build --workspace\` first`);
    return JSON.stringify(lib);
  });
  return `
[server]
bind = "127.0.0.1:0"
storage = "storage"

[[auth.tokens]]
token = "${TOKEN}"
projects = ["*"]

[[auth.tokens]]
token = "${DEMO_TOKEN}"
projects = ["demo"]

[plugins]
load = [${libs.join(', ')}]
call_timeout_secs = 5

[limits]
max_conversation_page_bytes = 1024

[providers.scripted]
${provider || `base_url = "${upstreamUrl}"
model = "scripted-model"
max_attempts = 1
idle_timeout_secs = 10`}

[rojos.default]
provider = "scripted"
system_prompt = "You are Rojo."
tools = "*"
max_steps = 6

[rojos.reader]
provider = "scripted"
tools = ["read_path_meta", "get_text_content", "list_files"]
max_steps = 4
${extra || ''}`;
}

/**
 * A running host: `url`, `dir` (config and storage), `projectRoot(id)`, `stop()`. `provider`,
 * when given, replaces the body of `[providers.scripted]` (e.g. a `kind` and a `base_url`);
 * `extra` is TOML appended to the config (e.g. another rojo).
 */
export async function startHost(upstream, name = 'host', { provider, extra } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rojos-browser-'));
  const configPath = path.join(dir, 'rojos.toml');
  fs.writeFileSync(configPath, config(upstream.baseUrl, provider, extra));
  fs.mkdirSync(path.join(OUTPUT, 'logs'), { recursive: true });
  const log = fs.openSync(path.join(OUTPUT, 'logs', `${name.replace(/[^\w.-]+/g, '_')}.log`), 'w');
  const child = spawn(binary(), ['--config', configPath], {
    stdio: ['ignore', 'pipe', log],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'rojos=info' },
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`rojos did not start in 30 s; stdout: ${out}`)), 30000);
    child.stdout.on('data', (data) => {
      out += data;
      const m = out.match(/listening on (http:\/\/[\d.:]+)\//);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`rojos exited with ${code}; see ${name}.log`)); });
  });
  return {
    url,
    dir,
    projectRoot: (id) => {
      const root = path.join(dir, 'storage', id, 'root');
      fs.mkdirSync(root, { recursive: true });
      return root;
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      fs.closeSync(log);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
