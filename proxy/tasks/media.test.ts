import { readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderError } from '../upstreams/task-provider.js';
import { MediaFetcher } from './media.js';

// Media a client named, downloaded from real HTTP servers on loopback (which this policy allows,
// as the quickstart's does) through the fetcher's own guarded agent.
interface Host {
  server: Server;
  url: string;
  paths: string[];
  handle: (path: string, res: ServerResponse) => void;
}
const fetcher = new MediaFetcher({ allowLoopback: true, allowPrivate: false }, 1 << 20);
let short: Host;
let images: Host;

async function host(): Promise<Host> {
  const h = { paths: [], handle: () => {} } as unknown as Host;
  h.server = createServer((req, res) => {
    h.paths.push(req.url!);
    h.handle(req.url!, res);
  });
  await new Promise<void>((resolve) => h.server.listen(0, '127.0.0.1', resolve));
  h.url = `http://127.0.0.1:${(h.server.address() as AddressInfo).port}`;
  return h;
}

beforeAll(async () => {
  [short, images] = [await host(), await host()];
});
afterAll(async () => {
  await fetcher.close();
  for (const h of [short, images]) await new Promise((resolve) => h.server.close(resolve));
});

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
const fetchIt = (url: string) => fetcher.fetch(url, 'image_url', new AbortController().signal);
const refusal = (url: string) =>
  fetchIt(url).then(
    () => {
      throw new Error('the download succeeded');
    },
    (err: unknown) => err as ProviderError,
  );

describe('media downloads', () => {
  it('follow redirects to the file: a short link, then another host', async () => {
    short.paths.length = images.paths.length = 0;
    short.handle = (path, res) => {
      if (path === '/s/abc') res.writeHead(301, { location: '/s/abc/' }).end();
      else res.writeHead(302, { location: `${images.url}/photos/cat.png?v=2` }).end();
    };
    images.handle = (_path, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    const media = await fetchIt(`${short.url}/s/abc`);
    expect(readFileSync(media.path)).toEqual(PNG);
    expect(media).toMatchObject({ size: PNG.length, contentType: 'image/png', filename: 'cat.png' });
    expect(short.paths).toEqual(['/s/abc', '/s/abc/']);
    expect(images.paths).toEqual(['/photos/cat.png?v=2']);
    await fetcher.discard([media]);
  });

  it('check every hop as the first: a redirect to a metadata address, another scheme or no URL fails the task', async () => {
    short.handle = (_path, res) => res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    const metadata = await refusal(`${short.url}/m`);
    expect(metadata).toBeInstanceOf(ProviderError);
    expect([metadata.code, metadata.retryable]).toEqual(['invalid_media', false]);
    expect(metadata.message).toBe(
      'image_url: URL points at a link-local or metadata address (169.254.169.254), which this gateway does not call (after 1 redirect)',
    );
    short.handle = (_path, res) => res.writeHead(302, { location: 'file:///etc/passwd' }).end();
    expect((await refusal(`${short.url}/f`)).message).toBe('image_url: URL must be an http or https URL (after 1 redirect)');
    short.handle = (_path, res) => res.writeHead(302, { location: 'http://[::1' }).end();
    expect((await refusal(`${short.url}/x`)).message).toBe('image_url: URL is not a valid URL (after 1 redirect)');
  });

  it('give up after five redirects; a redirect without a Location is the answer it is', async () => {
    short.paths.length = 0;
    short.handle = (path, res) => res.writeHead(302, { location: `${path}x` }).end();
    const loop = await refusal(`${short.url}/r`);
    expect([loop.code, loop.message]).toEqual(['invalid_media', 'image_url: redirected more than 5 times']);
    expect(short.paths).toHaveLength(6);
    short.handle = (_path, res) => res.writeHead(304).end();
    expect((await refusal(`${short.url}/n`)).message).toBe('image_url: downloading it answered HTTP 304');
  });
});
