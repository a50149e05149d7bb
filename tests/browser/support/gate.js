// A pass-through proxy in front of the real host that can hold `TOOL_RESULT` lines of a
// `POST /chat` stream until the test releases them, so the browser sees a tool call while it
// is still running. Everything else passes through unchanged.

import http from 'node:http';

export async function startGate(hostUrl) {
  const target = new URL(hostUrl);
  let held = false;
  let waiters = [];
  const gate = {
    /** From now on, each `TOOL_RESULT` waits for `release()`. */
    hold() { held = true; },
    /** Lets the held results (and later ones) through. */
    release() {
      held = false;
      for (const resolve of waiters) resolve();
      waiters = [];
    },
  };
  const opened = () => (held ? new Promise((resolve) => waiters.push(resolve)) : Promise.resolve());

  const server = http.createServer((req, res) => {
    const upstream = http.request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      async (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        if (!(req.url === '/chat' && answer.statusCode === 200)) {
          answer.pipe(res);
          return;
        }
        let buffer = '';
        for await (const part of answer) {
          buffer += part;
          let i;
          while ((i = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, i + 1);
            buffer = buffer.slice(i + 1);
            if (line.includes('"type":"TOOL_RESULT"')) await opened();
            res.write(line);
          }
        }
        res.end(buffer);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  const sockets = new Set();
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  gate.url = `http://127.0.0.1:${server.address().port}`;
  gate.stop = async () => {
    gate.release();
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  };
  return gate;
}
