import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compile } from '../api/snapshot/index.js';
import { StaticConfigSource } from '../proxy/config/folder-source.js';
import { startGateway, type Gateway } from '../proxy/front/gateway.js';
import { readJson } from '../proxy/http/body.js';
import type { Route } from '../proxy/http/context.js';
import { createLogger } from '../kernel/log.js';
import { sendJson } from '../proxy/http/send.js';
import { apiKey, chatRoute, group } from './support/resources.js';

const KEY = 'sk-service-servertest';
/** One head object for every request: the request id must not be written into it. */
const SHARED_HEAD = Object.freeze({ 'content-type': 'text/plain' });
let gw: Gateway;
let source: StaticConfigSource;

const resources = [
  chatRoute('m', 'http://127.0.0.1:1/v1'),
  group('g', ['m']),
  group('limited', ['m'], { rateLimits: { requestsPerMinute: 2 } }),
  apiKey('k', KEY, 'g'),
  apiKey('lim', 'sk-service-limited', 'limited'),
  apiKey('old', 'sk-service-old', 'g', { expiresAt: '2099-01-01T00:00:00Z' }),
];

beforeAll(async () => {
  source = new StaticConfigSource(compile(resources.map((object) => ({ object }))).config);
  gw = await startGateway({
    source,
    port: 0,
    adminPort: 0,
    adminToken: 'admin-secret',
    bodyLimitBytes: 1024,
    bodyTimeoutMs: 300,
    log: createLogger({}, 'silent'),
    billing: () => ({ holdChat: () => Promise.reject(new Error('not used')), close: async () => {} }),
    features: [
      () => ({
        routes: [
          {
            method: 'POST',
            path: '/v1/echo/:id',
            shape: 'openai',
            auth: 'key',
            handler: async (ctx) => {
              const { json } = await readJson(ctx);
              sendJson(ctx.res, 200, { id: ctx.params.id, key: ctx.key!.name, account: ctx.key!.account, json });
            },
          },
          { method: 'POST', path: '/v1/messages', shape: 'anthropic', auth: 'key', handler: async (ctx) => sendJson(ctx.res, 200, {}) },
          // Every way a route can write its head, for the request id's test.
          ...(<[string, (res: ServerResponse) => unknown][]>[
            ['implicit', (res) => (res.setHeader('x-a', '1'), res.end('ok'))],
            ['flat', (res) => res.writeHead(200, ['content-type', 'text/plain', 'x-a', '1']).end('ok')],
            ['pairs', (res) => res.writeHead(200, [['content-type', 'text/plain']]).end('ok')],
            ['reason', (res) => res.writeHead(201, 'Made', { 'x-a': '1' }).end('ok')],
            ['no-reason', (res) => res.writeHead(200, undefined, { 'x-a': '1' }).end('ok')],
            ['shared', (res) => res.writeHead(200, SHARED_HEAD).end('ok')],
            ['own', (res) => res.writeHead(200, { 'x-request-id': 'route-own' }).end('ok')],
          ]).map(([name, write]): Route => ({
            method: 'GET',
            path: `/v1/head/${name}`,
            shape: 'openai',
            auth: 'none',
            handler: async (ctx) => void write(ctx.res),
          })),
        ],
      }),
    ],
  });
});
afterAll(() => gw.close());

const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(gw.url + path, { method: 'POST', body, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers } });

describe('API server', () => {
  it('authenticates by key hash and routes with path parameters', async () => {
    const r = await post('/v1/echo/abc', '{"a":1}', { 'x-request-id': 'req-1' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-request-id')).toBe('req-1');
    expect(await r.json()).toEqual({ id: 'abc', key: 'k', account: 'acct', json: { a: 1 } });
  });

  it('sends the request id on every head: given whole, implicit, raw, with a reason, an error, another port', async () => {
    for (const name of ['implicit', 'flat', 'pairs', 'reason', 'no-reason', 'shared']) {
      const r = await fetch(`${gw.url}/v1/head/${name}`, { headers: { 'x-request-id': `rid-${name}` } });
      expect(r.status, name).toBe(name === 'reason' ? 201 : 200);
      expect(r.headers.get('x-request-id'), name).toBe(`rid-${name}`);
      expect(await r.text()).toBe('ok');
    }
    for (const name of ['implicit', 'flat', 'reason', 'no-reason']) expect((await fetch(`${gw.url}/v1/head/${name}`)).headers.get('x-a'), name).toBe('1');
    // A second request through the shared head gets its own id, not the first one's.
    const again = await fetch(`${gw.url}/v1/head/shared`);
    expect(again.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(SHARED_HEAD).toEqual({ 'content-type': 'text/plain' });
    // A route that names its own id keeps it (one header, not two).
    expect((await fetch(`${gw.url}/v1/head/own`, { headers: { 'x-request-id': 'client' } })).headers.get('x-request-id')).toBe('route-own');
    // An id that is not a token is replaced by a fresh one.
    const bad = await fetch(`${gw.url}/v1/head/flat`, { headers: { 'x-request-id': 'a b' } });
    expect(bad.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const denied = await post('/v1/echo/x', '{}', { authorization: '', 'x-request-id': 'rid-401' });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('x-request-id')).toBe('rid-401');
    const missing = await fetch(`${gw.url}/v1/nowhere`, { headers: { 'x-request-id': 'rid-404' } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-request-id')).toBe('rid-404');
    const admin = await fetch(`${gw.adminUrl}/healthz`, { headers: { 'x-request-id': 'rid-admin' } });
    expect(admin.headers.get('x-request-id')).toBe('rid-admin');
  });

  it('rejects missing, malformed, unknown and wrongly prefixed keys with 401 in the route shape', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ authorization: '' }, /missing Authorization header/],
      [{ authorization: 'Basic abc' }, /must be "Bearer <key>"/],
      [{ authorization: 'Bearer sk-other-123' }, /keys start with "sk-service-"/],
      [{ authorization: 'Bearer sk-service-unknown' }, /unknown, revoked or expired/],
    ];
    for (const [headers, msg] of cases) {
      const r = await post('/v1/echo/x', '{}', headers);
      expect(r.status).toBe(401);
      const body = (await r.json()) as { error: { type: string; message: string; code: string } };
      expect(body.error.type).toBe('authentication_error');
      expect(body.error.message).toMatch(msg);
      expect(JSON.stringify(body)).not.toContain('sk-service-unknown');
    }
    const a = await post('/v1/messages', '{}', { authorization: '', 'x-api-key': KEY });
    expect(a.status).toBe(401);
    const ab = (await a.json()) as { type: string; error: { type: string; message: string } };
    expect(ab.type).toBe('error');
    expect(ab.error.message).toMatch(/ANTHROPIC_AUTH_TOKEN/);
  });

  it('a key revoked in a new config is refused at once', async () => {
    const revoked = resources.map((r) => (r.metadata.name === 'old' ? { ...r, spec: { ...r.spec, revoked: true } } : r));
    const before = await post('/v1/echo/x', '{}', { authorization: 'Bearer sk-service-old' });
    expect(before.status).toBe(200);
    source.set(compile(revoked.map((object) => ({ object }))).config);
    const after = await post('/v1/echo/x', '{}', { authorization: 'Bearer sk-service-old' });
    expect(after.status).toBe(401);
    source.set(compile(resources.map((object) => ({ object }))).config);
  });

  it('answers bad bodies with 400, 413 and 415', async () => {
    const bad = await post('/v1/echo/x', '{nope');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/not valid JSON/);
    expect((await post('/v1/echo/x', '[1]')).status).toBe(400);
    expect((await post('/v1/echo/x', 'x'.repeat(2000))).status).toBe(413);
    expect((await post('/v1/echo/x', '{}', { 'content-type': 'text/plain' })).status).toBe(415);
  });

  it('reads a body that came with its head, in parts, chunked, or pipelined, on one kept-alive connection', async () => {
    const { port } = new URL(gw.url);
    const socket = connect(Number(port), '127.0.0.1');
    // latin1: one character per byte, as content-length counts.
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    // The answers so far, each head's status and its body (every answer here has a content-length).
    const answers = () => {
      const out: { status: number; body: string }[] = [];
      let rest = text;
      for (;;) {
        const head = /^HTTP\/1\.1 (\d+)[^]*?content-length: (\d+)\r\n[^]*?\r\n\r\n/i.exec(rest);
        if (!head || rest.length < head[0].length + Number(head[2])) return out;
        const body = rest.slice(head[0].length, head[0].length + Number(head[2]));
        out.push({ status: Number(head[1]), body: Buffer.from(body, 'latin1').toString() });
        rest = rest.slice(head[0].length + Number(head[2]));
      }
    };
    const until = async (n: number) => {
      for (let i = 0; i < 200 && answers().length < n; i++) await new Promise((r) => setTimeout(r, 10));
      return answers();
    };
    const head = (id: string, length: number | 'chunked') =>
      `POST /v1/echo/${id} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\ncontent-type: application/json\r\n` +
      (length === 'chunked' ? 'transfer-encoding: chunked\r\n\r\n' : `content-length: ${length}\r\n\r\n`);
    const whole = '{"whole":"ä"}';
    socket.write(head('whole', Buffer.byteLength(whole)) + whole);
    await until(1);
    const parts = ['{"parts":', '[1,2]}'];
    socket.write(head('parts', parts.join('').length) + parts[0]);
    await new Promise((r) => setTimeout(r, 50));
    socket.write(parts[1]!);
    await until(2);
    socket.write(`${head('chunked', 'chunked')}6\r\n{"a":1\r\n`);
    await new Promise((r) => setTimeout(r, 20));
    socket.write('1\r\n}\r\n0\r\n\r\n');
    await until(3);
    socket.write(head('one', 9) + '{"one":1}' + head('two', 9) + '{"two":2}' + head('empty', 0));
    const got = await until(6);
    socket.destroy();
    expect(got.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 400]);
    expect(got.slice(0, 5).map((a) => JSON.parse(a.body) as { id: string; json: unknown })).toEqual([
      { id: 'whole', key: 'k', account: 'acct', json: { whole: 'ä' } },
      { id: 'parts', key: 'k', account: 'acct', json: { parts: [1, 2] } },
      { id: 'chunked', key: 'k', account: 'acct', json: { a: 1 } },
      { id: 'one', key: 'k', account: 'acct', json: { one: 1 } },
      { id: 'two', key: 'k', account: 'acct', json: { two: 2 } },
    ]);
    expect(got[5]!.body).toContain('request body is empty');
  });

  it('answers a body that stalls with 408 after the body timeout, in the route shape, and closes the connection', async () => {
    const { port } = new URL(gw.url);
    const socket = connect(Number(port), '127.0.0.1');
    // A lower bound on the gateway's timers, which count whole milliseconds as Date.now() does (a forward
    // step of the wall clock only lengthens it); performance.now() could read a fraction short of it.
    const started = Date.now();
    socket.write(`POST /v1/echo/x HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a":`);
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString()));
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(text).toContain('"type":"invalid_request_error"');
    expect(text).toContain('did not arrive within');
  });

  it('answers unknown paths with 404 and wrong methods with 405', async () => {
    const r = await fetch(`${gw.url}/v1/nothing`);
    expect(r.status).toBe(404);
    const m = await fetch(`${gw.url}/v1/echo/x`);
    expect(m.status).toBe(405);
    expect(m.headers.get('allow')).toBe('POST');
    const h = await fetch(`${gw.url}/`, { method: 'HEAD' });
    expect(h.status).toBe(200);
  });
});

describe('group rate limits', () => {
  it('answers 429 with retry-after once a key passes requestsPerMinute', async () => {
    const auth = { authorization: 'Bearer sk-service-limited' };
    expect((await post('/v1/echo/1', '{}', auth)).status).toBe(200);
    expect((await post('/v1/echo/2', '{}', auth)).status).toBe(200);
    const r = await post('/v1/echo/3', '{}', auth);
    expect(r.status).toBe(429);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await r.json()) as { error: { type: string } }).error.type).toBe('rate_limit_error');
    // other keys are not affected
    expect((await post('/v1/echo/4', '{}')).status).toBe(200);
  });
});

describe('admin port', () => {
  it('serves health, readiness and metrics with route labels', async () => {
    expect((await fetch(`${gw.adminUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${gw.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(((await ready.json()) as { configVersion: string }).configVersion).toBe(source.current()!.version);
    await post('/v1/echo/zzz', '{}');
    const text = await (await fetch(`${gw.adminUrl}/metrics`)).text();
    expect(text).toMatch(/tollgate_http_requests_total\{route="\/v1\/echo\/:id",status="200"\} \d+/);
    expect(text).toContain('process_resident_memory_bytes');
    expect(text).not.toContain('zzz');
    expect(text).not.toContain(KEY);
  });

  it('names the config version in service in its metrics, and follows a swap', async () => {
    const before = source.current()!.version;
    const metric = async () => (await (await fetch(`${gw.adminUrl}/metrics`)).text()).split('\n').filter((l) => l.startsWith('tollgate_config_info{'));
    expect(await metric()).toEqual([`tollgate_config_info{version="${before}"} 1`]);
    const next = compile([...resources, group('second', ['m'])].map((object) => ({ object }))).config;
    source.set(next);
    expect(next.version).not.toBe(before);
    expect(await metric()).toEqual([`tollgate_config_info{version="${next.version}"} 1`]);
    source.set(compile(resources.map((object) => ({ object }))).config);
  });
});
