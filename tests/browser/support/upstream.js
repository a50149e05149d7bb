// A scripted OpenAI-compatible provider on loopback, the Node twin of the Rust e2e tests'
// `host/tests/e2e/support/upstream.rs`. `POST /v1/chat/completions` serves one queued turn
// per request (a 500 when the queue is empty), in the providers' exact SSE wire format:
// `data: {chat.completion.chunk}\n\n` events, then `data: [DONE]\n\n`. It records every
// request body, and counts responses the client abandoned before their end. Instead of a
// queue, a `responder` may choose each turn from the request (`ScriptedUpstream.responding`).

import http from 'node:http';

const CHUNK_ID = 'chatcmpl-scripted';

function chunk(delta, finish = null) {
  const body = {
    id: CHUNK_ID,
    object: 'chat.completion.chunk',
    created: 1756212345,
    model: 'scripted-model',
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
  return `data: ${JSON.stringify(body)}\n\n`;
}

function pieces(text, size) {
  const chars = [...text];
  const out = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}

/** One model turn as the upstream sends it. */
export class Turn {
  constructor(events) {
    this.events = events;
    this.status = null;
    this.delayMs = 0;
  }

  /** A text answer, a few characters a chunk, ending with `stop` and `[DONE]`. */
  static text(text) {
    const events = [chunk({ role: 'assistant', content: '' })];
    for (const piece of pieces(text, 8)) events.push(chunk({ content: piece }));
    events.push(chunk({}, 'stop'), 'data: [DONE]\n\n');
    return new Turn(events);
  }

  /**
   * Tool calls `[id, name, args]` in OpenAI's canonical shape: id and name in the first delta
   * of each call, the arguments' JSON text split across deltas, finish `tool_calls`. A string
   * `args` is sent as it is (valid JSON or not).
   */
  static toolCalls(calls) {
    const events = [chunk({ role: 'assistant', content: null })];
    calls.forEach(([id, name, args], index) => {
      const text = typeof args === 'string' ? args : JSON.stringify(args);
      events.push(chunk({ tool_calls: [{ index, id, type: 'function', function: { name, arguments: '' } }] }));
      for (const piece of pieces(text, 7)) {
        events.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
      }
    });
    events.push(chunk({}, 'tool_calls'), 'data: [DONE]\n\n');
    return new Turn(events);
  }

  /** An HTTP error status with a provider-style JSON error body. */
  static status(code, message) {
    const turn = new Turn([]);
    turn.status = { code, body: JSON.stringify({ error: { message, type: 'scripted_error' } }) };
    return turn;
  }

  /** Pauses before each SSE event. */
  chunkDelay(ms) {
    this.delayMs = ms;
    return this;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A running scripted upstream. */
export class ScriptedUpstream {
  constructor() {
    this.turns = [];
    this.received = [];
    this.dropped = 0;
    this.server = http.createServer((req, res) => this.serve(req, res));
    this.sockets = new Set();
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  /** Starts on `127.0.0.1:0` with `turns` queued; `baseUrl` is then the URL to configure. */
  static async start(turns = []) {
    const upstream = new ScriptedUpstream();
    upstream.push(...turns);
    await new Promise((resolve) => upstream.server.listen(0, '127.0.0.1', resolve));
    upstream.baseUrl = `http://127.0.0.1:${upstream.server.address().port}/v1`;
    return upstream;
  }

  /**
   * Starts an upstream that answers each request with `responder(body)`, a Turn (for a
   * conversation of any length, e.g. one the host compacts).
   */
  static async responding(responder) {
    const upstream = await ScriptedUpstream.start([]);
    upstream.responder = responder;
    return upstream;
  }

  /** Queues more turns. */
  push(...turns) {
    this.turns.push(...turns);
  }

  /** How many turns were queued but never asked for. */
  left() {
    return this.turns.length;
  }

  async serve(req, res) {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404).end();
      return;
    }
    const parts = [];
    for await (const part of req) parts.push(part);
    let body = null;
    try { body = JSON.parse(Buffer.concat(parts).toString('utf8')); } catch { /* recorded as null */ }
    this.received.push({ body, headers: req.headers });
    const turn = this.responder ? this.responder(body) : this.turns.shift();
    if (!turn) {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('scripted upstream: no turn left for this request');
      return;
    }
    if (turn.status) {
      res.writeHead(turn.status.code, { 'content-type': 'application/json' }).end(turn.status.body);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let finished = false;
    res.on('close', () => { if (!finished) this.dropped += 1; });
    for (const event of turn.events) {
      if (turn.delayMs) await sleep(turn.delayMs);
      if (res.destroyed) return;
      res.write(event);
    }
    finished = true;
    res.end();
  }

  async stop() {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
