import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callUpstream, createUpstreamAgent, UpstreamError } from './http.js';
import type { CompiledBackend } from './types.js';

// The upstream call against a real HTTP server through the gateway's own undici Agent: the
// answer's body as a reader sees it, and what the server sees of the reader.
let server: Server;
let baseURL: string;
const agent = createUpstreamAgent();
let handle: (req: IncomingMessage, res: ServerResponse) => void = () => {};

beforeAll(async () => {
  server = createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await agent.close();
  await new Promise((resolve) => server.close(resolve));
});

const call = (signal = new AbortController().signal, dispatcher = agent) =>
  callUpstream({
    backend: { baseURL, timeoutMs: 5_000, provider: 'openai', model: 'm' } as CompiledBackend,
    path: '/x',
    headers: { 'content-type': 'application/json' },
    body: Buffer.from('{}'),
    signal,
    dispatcher,
  });

/** Writes `chunks` chunks of `size` bytes as fast as the client takes them. */
function streamOut(res: ServerResponse, chunks: number, size: number): { written: () => number; ended: Promise<{ written: number; finished: boolean }> } {
  let written = 0;
  let sent = 0;
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  const more = () => {
    while (sent < chunks) {
      sent++;
      written += size;
      if (!res.write(Buffer.alloc(size, sent % 256))) return void res.once('drain', more);
    }
    res.end();
  };
  const ended = new Promise<{ written: number; finished: boolean }>((resolve) => res.once('close', () => resolve({ written, finished: res.writableFinished })));
  more();
  return { written: () => written, ended };
}

describe('an upstream answer body', () => {
  it('is read whole, and holds the upstream back while nobody reads it', async () => {
    let out!: ReturnType<typeof streamOut>;
    handle = (req, res) => {
      req.resume();
      out = streamOut(res, 512, 64 * 1024); // 32 MiB
    };
    const resp = await call();
    expect(resp.statusCode).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    // Bounded by the body's queue and the sockets' buffers, far short of the 32 MiB.
    expect(out.written()).toBeLessThan(16 * 1024 * 1024);
    const bytes = await resp.body.bytes();
    expect(bytes.length).toBe(32 * 1024 * 1024);
    expect(bytes[0]).toBe(1);
    expect(bytes[bytes.length - 1]).toBe(0); // chunk 512 % 256
    expect(await out.ended).toEqual({ written: 32 * 1024 * 1024, finished: true });
  });

  it('lets the upstream go when its reader leaves the loop early', async () => {
    let out!: ReturnType<typeof streamOut>;
    handle = (req, res) => {
      req.resume();
      out = streamOut(res, 4096, 64 * 1024); // 256 MiB, never all sent
    };
    const resp = await call();
    let read = 0;
    for await (const chunk of resp.body) {
      read += chunk.length;
      if (read > 1024 * 1024) break;
    }
    const end = await out.ended;
    expect(end.finished).toBe(false);
    expect(end.written).toBeLessThan(256 * 1024 * 1024);
  });

  it('gives what arrived, then fails, when the upstream cuts the connection', async () => {
    handle = (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      setTimeout(() => res.socket!.destroy(), 50);
    };
    const resp = await call();
    const got: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of resp.body) got.push(chunk.toString());
      })(),
    ).rejects.toThrow();
    expect(got.join('')).toBe('data: 1\n\n');
  });

  it('fails its reader when the caller aborts mid-answer, and the upstream sees the request go', async () => {
    let ended!: Promise<{ written: number; finished: boolean }>;
    handle = (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      ended = new Promise((resolve) => res.once('close', () => resolve({ written: 9, finished: res.writableFinished })));
    };
    const abort = new AbortController();
    const resp = await call(abort.signal);
    const it = resp.body[Symbol.asyncIterator]();
    expect((await it.next()).value?.toString()).toBe('data: 1\n\n');
    setTimeout(() => abort.abort(), 20);
    await expect(it.next()).rejects.toThrow();
    expect((await ended).finished).toBe(false);
  });

  it('is refused as aborted when the caller gave up before the call', async () => {
    handle = (req, res) => res.end();
    const abort = new AbortController();
    abort.abort();
    const err = await call(abort.signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).kind).toBe('aborted');
  });

  it('dumped keeps its connection when the rest is short, and closes it when long', async () => {
    let socket!: IncomingMessage['socket'];
    let rest = 0;
    handle = (req, res) => {
      socket = req.socket;
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' });
      res.write('{"error":"');
      // The rest comes after the reader has started to dump.
      setTimeout(() => {
        for (let i = 0; i < rest; i += 8192) res.write('x'.repeat(8192));
        res.end('"}');
      }, 50);
    };
    rest = 8192;
    await (await call()).body.dump();
    await new Promise((r) => setTimeout(r, 100));
    expect(socket.destroyed).toBe(false);

    rest = 1024 * 1024;
    await (await call()).body.dump();
    await new Promise((r) => setTimeout(r, 100));
    expect(socket.destroyed).toBe(true);
  });
});
