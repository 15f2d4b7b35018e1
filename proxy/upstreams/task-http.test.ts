import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUpstreamAgent } from './http.js';
import { openUrl } from './task-http.js';
import { ProviderError } from './task-provider.js';
import type { CompiledBackend } from './types.js';

// A result file fetched from two real origins through the gateway's own undici Agent: the
// provider's API (the backend) and a storage host it redirects to.
interface Origin {
  server: Server;
  url: string;
  seen: { path: string; headers: IncomingHttpHeaders }[];
  handle: (path: string, res: ServerResponse) => void;
}
const agent = createUpstreamAgent();
let api: Origin;
let storage: Origin;

async function origin(): Promise<Origin> {
  const o = { seen: [], handle: () => {} } as unknown as Origin;
  o.server = createServer((req, res) => {
    o.seen.push({ path: req.url!, headers: req.headers });
    o.handle(req.url!, res);
  });
  await new Promise<void>((resolve) => o.server.listen(0, '127.0.0.1', resolve));
  o.url = `http://127.0.0.1:${(o.server.address() as AddressInfo).port}`;
  return o;
}

beforeAll(async () => {
  [api, storage] = [await origin(), await origin()];
});
afterAll(async () => {
  await agent.close();
  for (const o of [api, storage]) await new Promise((resolve) => o.server.close(resolve));
});

const target = () => ({ backend: { baseURL: `${api.url}/v1`, timeoutMs: 5_000, provider: 'fal', model: 'm' } as CompiledBackend, dispatcher: agent });
const open = (url: string) => openUrl(target(), url, new AbortController().signal, { authorization: 'Key sk-provider-secret' });
const failure = (url: string) =>
  open(url).then(
    () => {
      throw new Error('the fetch succeeded');
    },
    (err: unknown) => err as ProviderError,
  );

describe('a result file fetched from the provider', () => {
  it('follows redirects to the bytes, the credential sent to the backend origin only', async () => {
    api.seen.length = storage.seen.length = 0;
    api.handle = (path, res) => {
      if (path === '/files/a')
        res.writeHead(302, { location: '/files/a/download' }).end(); // relative: the same origin
      else res.writeHead(307, { location: `${storage.url}/bucket/a.mp4?sig=1` }).end();
    };
    storage.handle = (_path, res) => res.writeHead(200, { 'content-type': 'video/mp4' }).end('the bytes');
    const { body, contentType } = await open(`${api.url}/files/a`);
    const bytes: Buffer[] = [];
    for await (const c of body) bytes.push(c as Buffer);
    expect(Buffer.concat(bytes).toString()).toBe('the bytes');
    expect(contentType).toBe('video/mp4');
    expect(api.seen.map((s) => [s.path, s.headers.authorization])).toEqual([
      ['/files/a', 'Key sk-provider-secret'],
      ['/files/a/download', 'Key sk-provider-secret'],
    ]);
    expect(storage.seen.map((s) => [s.path, s.headers.authorization])).toEqual([['/bucket/a.mp4?sig=1', undefined]]);
  });

  it('a file on another origin from the start is fetched without the credential', async () => {
    storage.seen.length = 0;
    storage.handle = (_path, res) => res.writeHead(200, { 'content-type': 'image/png' }).end('png');
    expect((await open(`${storage.url}/cdn/b.png`)).contentType).toBe('image/png');
    expect(storage.seen[0]!.headers.authorization).toBeUndefined();
  });

  it('gives up after five redirects, and on a redirect to a URL that is not http(s) or no URL at all', async () => {
    api.seen.length = 0;
    api.handle = (path, res) => res.writeHead(302, { location: `${path}x` }).end();
    const loop = await failure(`${api.url}/r`);
    expect(loop).toBeInstanceOf(ProviderError);
    expect([loop.code, loop.retryable]).toEqual(['result_unavailable', false]);
    expect(api.seen).toHaveLength(6);
    api.handle = (_path, res) => res.writeHead(302, { location: 'file:///etc/passwd' }).end();
    const scheme = await failure(`${api.url}/s`);
    expect([scheme.code, scheme.retryable]).toEqual(['upstream_invalid_response', false]);
    api.handle = (_path, res) => res.writeHead(302, { location: 'http://[::1' }).end();
    const malformed = await failure(`${api.url}/m`);
    expect([malformed.code, malformed.retryable]).toEqual(['upstream_invalid_response', false]);
  });

  it('a storage host that fails after the redirect: retryable on 5xx, not on 4xx', async () => {
    api.handle = (_path, res) => res.writeHead(302, { location: `${storage.url}/gone` }).end();
    storage.handle = (_path, res) => res.writeHead(503).end();
    const busy = await failure(`${api.url}/f`);
    expect([busy.code, busy.retryable, busy.opts.status]).toEqual(['result_unavailable', true, 503]);
    storage.handle = (_path, res) => res.writeHead(403).end();
    const denied = await failure(`${api.url}/f`);
    expect([denied.code, denied.retryable, denied.opts.status]).toEqual(['result_unavailable', false, 403]);
  });
});
