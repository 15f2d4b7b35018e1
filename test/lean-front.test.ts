import { createServer, IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installLeanFront, type LeanFront } from '../proxy/front/lean.js';
import { readSettings } from '../kernel/settings.js';
import { startStack, type Stack } from './support/stack.js';
import { apiKey, chatRoute, group } from './support/resources.js';
import { frontCounts } from './support/prom.js';

/**
 * The lean front (proxy/front/lean.ts) against node:http: the same bytes sent to a node:http
 * server and to the same server behind the lean front get the same answers, byte for byte but the
 * Date and the `x-front` header that says who read the request. Requests outside the front's
 * subset are handed to node:http on the same socket, so they must be answered exactly as before.
 */

type Part = string | { wait: number };

/** Echoes what the route saw: the answers differ only where the fronts differ. */
function handler(req: IncomingMessage, res: ServerResponse): void {
  const front = req instanceof IncomingMessage ? 'node' : 'lean';
  if (req.url === '/early') {
    // Answered before its body is read, and never reads it: the connection must drop the rest.
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 5, 'x-front': front });
    res.end('early');
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('latin1');
    if (req.url === '/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'x-front': front });
      res.write('data: one\n\n');
      res.write(Buffer.from('data: two\n\n'));
      setTimeout(() => res.end('data: [DONE]\n\n'), 5);
      return;
    }
    if (req.url === '/inject') {
      try {
        res.setHeader('x-bad', 'a\r\nset-cookie: b');
      } catch (err) {
        res.writeHead(500, { 'x-front': front, 'content-type': 'text/plain' });
        res.end((err as NodeJS.ErrnoException).code);
        return;
      }
    }
    if (req.url === '/hold') return; // answered never: the client leaves
    if (req.url === '/implicit') {
      res.setHeader('x-front', front);
      res.end(body);
      return;
    }
    const echo = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(echo), 'x-front': front });
    res.end(echo);
  });
}

interface Pair {
  node: Server;
  lean: Server;
  front: LeanFront;
  closes: { node: boolean[]; lean: boolean[] };
}

async function listen(s: Server): Promise<number> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as AddressInfo).port;
}

let pair: Pair;
let ports: { node: number; lean: number };

beforeAll(async () => {
  const closes = { node: [] as boolean[], lean: [] as boolean[] };
  const make = (name: 'node' | 'lean') => {
    const s = createServer((req, res) => {
      res.once('close', () => closes[name].push(res.writableFinished));
      handler(req, res);
    });
    s.keepAliveTimeout = 65_000;
    return s;
  };
  const node = make('node');
  const lean = make('lean');
  const front = installLeanFront(lean, { paths: new Set(['/lean', '/stream', '/inject', '/hold', '/implicit', '/early']) });
  pair = { node, lean, front, closes };
  ports = { node: await listen(node), lean: await listen(lean) };
});

afterAll(async () => {
  for (const s of [pair.node, pair.lean]) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  pair.front.closeAll();
});

/** Sends the parts on one connection and returns every byte received until it closes or goes quiet (long enough for a busy CI machine). */
function exchange(port: number, parts: Part[], quietMs = 400): Promise<{ bytes: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let bytes = '';
    let timer: NodeJS.Timeout | undefined;
    const done = (closed: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ bytes, closed });
    };
    const quiet = () => {
      clearTimeout(timer);
      timer = setTimeout(() => done(false), quietMs);
    };
    socket.on('data', (d) => {
      bytes += d.toString('latin1');
      quiet();
    });
    socket.on('close', () => done(true));
    socket.on('error', reject);
    socket.on('connect', async () => {
      for (const p of parts) {
        if (typeof p === 'string') socket.write(Buffer.from(p, 'latin1'));
        else await new Promise((r) => setTimeout(r, p.wait));
      }
      quiet();
    });
  });
}

const normal = (bytes: string) => bytes.replace(/\r\nDate: [^\r]*/g, '').replace(/\r\nx-front: (lean|node)/g, '');
const fronts = (bytes: string) => [...bytes.matchAll(/\r\nx-front: (lean|node)/g)].map((m) => m[1]!);

/** The same parts to both servers: equal answers, and who read each request on the lean server. */
async function both(parts: Part[]): Promise<{ node: string; lean: string; served: string[]; closed: boolean }> {
  const [n, l] = await Promise.all([exchange(ports.node, parts), exchange(ports.lean, parts)]);
  expect(normal(l.bytes)).toBe(normal(n.bytes));
  expect(l.closed).toBe(n.closed);
  expect(fronts(n.bytes).every((f) => f === 'node')).toBe(true);
  return { node: n.bytes, lean: l.bytes, served: fronts(l.bytes), closed: l.closed };
}

const post = (path: string, body: string, extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n\r\n${body}`;

describe('the lean front', () => {
  it('serves a chat-shaped POST itself, with the answer node:http gives', async () => {
    const r = await both([post('/lean', '{"model":"m","messages":[]}', 'Authorization: Bearer sk-x\r\nConnection: keep-alive\r\n')]);
    expect(r.served).toEqual(['lean']);
    expect(r.lean).toMatch(
      /^HTTP\/1\.1 200 OK\r\ncontent-type: application\/json\r\ncontent-length: \d+\r\nx-front: lean\r\nDate: .+ GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=65\r\n\r\n\{/,
    );
    expect(r.lean).toContain('"authorization":"Bearer sk-x"');
  });

  it('streams with the same chunked framing', async () => {
    const r = await both([post('/stream', '{}')]);
    expect(r.served).toEqual(['lean']);
    expect(r.lean).toContain('Transfer-Encoding: chunked\r\n\r\nb\r\ndata: one\n\n\r\nb\r\ndata: two\n\n\r\n');
    expect(r.lean.endsWith('e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n')).toBe(true);
  });

  it('gives an answer ended whole its length, as node:http does', async () => {
    const r = await both([post('/implicit', 'abc')]);
    expect(r.served).toEqual(['lean']);
    expect(r.lean).toContain('Content-Length: 3\r\n');
  });

  it('refuses a header value with CR LF as node:http does (no response splitting)', async () => {
    const r = await both([post('/inject', '{}')]);
    expect(r.served).toEqual(['lean']);
    expect(r.lean).toContain('ERR_INVALID_CHAR');
  });

  it('answers pipelined requests in order, and requests after them', async () => {
    const r = await both([post('/lean', '{"n":1}') + post('/stream', '{}') + post('/lean', '{"n":3}'), { wait: 60 }, post('/lean', '{"n":4}')]);
    expect(r.served).toEqual(['lean', 'lean', 'lean', 'lean']);
    expect([...r.lean.matchAll(/"body":"\{\\"n\\":(\d)\}"/g)].map((m) => m[1])).toEqual(['1', '3', '4']);
  });

  it('reads heads and bodies that arrive in pieces', async () => {
    const body = JSON.stringify({ text: 'x'.repeat(100_000) });
    const whole = post('/lean', body);
    const r = await both([whole.slice(0, 7), { wait: 20 }, whole.slice(7, 40), { wait: 20 }, whole.slice(40, 5000), { wait: 20 }, whole.slice(5000)]);
    expect(r.served).toEqual(['lean']);
    expect(r.lean).toContain('x'.repeat(1000));
  });

  it('drops the rest of a body the route answered without reading, then serves the next request', async () => {
    // Larger than a stream's buffer: unread, it stops the connection reading until it is dropped.
    const early = post('/early', 'x'.repeat(200_000));
    const r = await both([early.slice(0, 1000), { wait: 30 }, early.slice(1000) + post('/lean', '{"n":2}')]);
    expect(r.served).toEqual(['lean', 'lean']);
    expect(r.lean).toContain('"body":"{\\"n\\":2}"');
  });

  it('hands every other route and method to node:http, also after a request it served', async () => {
    const r = await both([
      post('/lean', '{}'),
      { wait: 30 },
      'GET /lean HTTP/1.1\r\nHost: gw\r\n\r\n',
      { wait: 30 },
      post('/other', '{}'),
      { wait: 30 },
      post('/lean', '{}'),
    ]);
    // Once node:http has the connection it keeps it.
    expect(r.served).toEqual(['lean', 'node', 'node', 'node']);
  });

  it.each([
    ['a chunked body', 'POST /lean HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'],
    ['Expect: 100-continue', 'POST /lean HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}'],
    ['HTTP/1.0', 'POST /lean HTTP/1.0\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}'],
    ['Connection: close', 'POST /lean HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}'],
    ['no Host', 'POST /lean HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}'],
    ['no Content-Length', 'POST /lean HTTP/1.1\r\nHost: gw\r\n\r\n'],
    ['a bare LF', 'POST /lean HTTP/1.1\r\nHost: gw\nX-A: 1\r\nContent-Length: 2\r\n\r\n{}'],
    ['a bare CR', 'POST /lean HTTP/1.1\r\nHost: gw\rX-A: 1\r\nContent-Length: 2\r\n\r\n{}'],
    ['an obs-fold', 'POST /lean HTTP/1.1\r\nHost: gw\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\n{}'],
    ['a space before the colon', 'POST /lean HTTP/1.1\r\nHost : gw\r\nContent-Length: 2\r\n\r\n{}'],
    ['two Content-Lengths', 'POST /lean HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'],
    ['a signed Content-Length', 'POST /lean HTTP/1.1\r\nHost: gw\r\nContent-Length: +2\r\n\r\n{}'],
    ['a control character in a value', 'POST /lean HTTP/1.1\r\nHost: gw\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\n{}'],
    ['a repeated header', 'POST /lean HTTP/1.1\r\nHost: gw\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 2\r\n\r\n{}'],
    ['a head over 16 KiB', `POST /lean HTTP/1.1\r\nHost: gw\r\nX-A: ${'a'.repeat(17_000)}\r\nContent-Length: 2\r\n\r\n{}`],
    ['a target that is not origin-form', 'POST http://gw/lean HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}'],
  ])('leaves %s to node:http, which answers it as before', async (_name, request) => {
    const r = await both([request]);
    expect(r.served.every((f) => f === 'node')).toBe(true);
    expect(r.node.length).toBeGreaterThan(0);
  });

  it('the same, after a request it served on the connection', async () => {
    const r = await both([post('/lean', '{}'), { wait: 30 }, 'POST /lean HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n']);
    expect(r.served).toEqual(['lean', 'node']);
  });

  it("tells the route the client left before its answer (the response's close, unfinished)", async () => {
    const before = { node: pair.closes.node.length, lean: pair.closes.lean.length };
    await both([post('/hold', '{}'), { wait: 30 }]);
    const deadline = performance.now() + 2000;
    while ((pair.closes.node.length === before.node || pair.closes.lean.length === before.lean) && performance.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    expect(pair.closes.lean.slice(before.lean)).toEqual([false]);
    expect(pair.closes.node.slice(before.node)).toEqual([false]);
  });

  it('cuts off a head that takes longer than headersTimeout to arrive, however steadily it drips', async () => {
    pair.lean.headersTimeout = 300;
    try {
      const drip: Part[] = [];
      for (const c of 'POST /lean HTTP/1.1\r\nHost: gw\r\nX-A: 1234567890') drip.push(c, { wait: 25 });
      const r = await exchange(ports.lean, drip, 2000);
      expect(r.closed).toBe(true);
      expect(r.bytes).toBe('');
    } finally {
      pair.lean.headersTimeout = 60_000;
    }
  });

  it('closes a connection idle past keepAliveTimeout, as node:http does', async () => {
    pair.lean.keepAliveTimeout = pair.node.keepAliveTimeout = 200;
    try {
      const started = performance.now();
      const [n, l] = await Promise.all([exchange(ports.node, [post('/other', '{}')], 2000), exchange(ports.lean, [post('/lean', '{}')], 2000)]);
      expect(n.closed && l.closed).toBe(true);
      expect(performance.now() - started).toBeLessThan(1500);
    } finally {
      pair.lean.keepAliveTimeout = pair.node.keepAliveTimeout = 65_000;
    }
  });
});

describe('the gateway on the lean front', () => {
  const KEY = 'sk-service-leanfront';
  const stacks: Record<'node' | 'lean', Stack> = {} as Record<'node' | 'lean', Stack>;
  beforeAll(async () => {
    for (const front of ['node', 'lean'] as const) {
      stacks[front] = await startStack(
        (sim) => [chatRoute('sim-gpt', `${sim}/v1`, { backend: { model: 'gpt-sim' } }), group('g', ['sim-gpt']), apiKey('k', KEY, 'g')],
        { bodyTimeoutMs: 200, bodyLimitBytes: 4096, settings: Object.assign(readSettings({}), { httpFront: front }) },
      );
    }
  });
  afterAll(async () => {
    for (const s of Object.values(stacks)) await s.close();
  });

  const port = (front: 'node' | 'lean') => Number(new URL(stacks[front].gw.url).port);
  // What differs between two runs of the same request: the ids and times the simulator makes.
  const plain = (bytes: string) =>
    normal(bytes)
      .replace(/(chatcmpl|resp|msg)[-_][\w-]+/g, 'ID')
      .replace(/"created(_at)?":\d+/g, '"created":0')
      .replace(/\r\nx-request-id: [^\r]*/g, '');
  async function same(parts: Part[]): Promise<string> {
    const [n, l] = await Promise.all([exchange(port('node'), parts, 800), exchange(port('lean'), parts, 800)]);
    expect(plain(l.bytes)).toBe(plain(n.bytes));
    expect(l.closed).toBe(n.closed);
    return l.bytes;
  }
  const chat = (body: object | string, key = KEY) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    return post('/v1/chat/completions', text, `Authorization: Bearer ${key}\r\nX-Request-Id: same-id\r\n`);
  };
  const ask = { model: 'sim-gpt', messages: [{ role: 'user', content: 'hello there' }] };

  it('answers chat, JSON and SSE, as on node:http', async () => {
    expect(await same([chat(ask)])).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*"choices"/);
    expect(await same([chat({ ...ask, stream: true })])).toContain('data: [DONE]');
  });

  it("gives the contract's errors in order and shape as on node:http: 400, 401, 413, 408 (and closes after it)", async () => {
    expect(await same([chat('{"model":')])).toMatch(/^HTTP\/1\.1 400 /);
    expect(await same([chat(ask, 'sk-service-wrong')])).toMatch(/^HTTP\/1\.1 401 /);
    expect(await same([chat({ ...ask, pad: 'x'.repeat(5000) })])).toMatch(/^HTTP\/1\.1 413 /);
    const whole = chat(ask);
    const slow = await same([whole.slice(0, whole.length - 10), { wait: 400 }]);
    expect(slow).toMatch(/^HTTP\/1\.1 408 [\s\S]*\r\nconnection: close\r\n/);
  });

  it("counts on /metrics the connections it reads and those it hands to node:http, by reason; node:http's front counts none", async () => {
    const counts = (front: 'node' | 'lean') => frontCounts(stacks[front].gw.adminUrl);
    const before = await counts('lean');
    expect(before.closing).toBe(0);
    const on = (parts: Part[]) => exchange(port('lean'), parts, 300);
    await on([chat(ask), { wait: 50 }, chat(ask)]);
    await on(['HEAD / HTTP/1.1\r\nHost: gw\r\n\r\n']);
    await on([post('/v1/images/generations', '{}', `Authorization: Bearer ${KEY}\r\n`)]);
    await on(['POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n']);
    const after = await counts('lean');
    expect(after).toEqual({
      connections: before.connections + 4,
      method: before.method + 1,
      route: before.route + 1,
      head: before.head + 1,
      closing: 0,
    });
    const node = await counts('node');
    expect(node.connections).toBe(0);
  });
});
