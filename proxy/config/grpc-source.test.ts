import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { compile, type GatewayConfig } from '../../api/snapshot/index.js';
import { discoveryService, encodeSnapshot, type DiscoveryRequest, type DiscoveryResponse } from '../../api/snapshot/discovery.js';
import type { Logger } from '../../kernel/log.js';
import { backoffDelay, GrpcConfigSource, parseDiscoveryUrl, RECONNECT } from './grpc-source.js';

/**
 * The proxy side of config discovery against a scripted ConfigDiscovery server (real gRPC on
 * loopback), so that the test can send what a healthy operator never would: broken snapshots.
 */

type Call = grpc.ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>;

interface Scripted {
  port: number;
  calls: { call: Call; metadata: grpc.Metadata; requests: DiscoveryRequest[] }[];
  close(): Promise<void>;
}

async function scriptedServer(opts: { port?: number; token?: string; creds?: grpc.ServerCredentials } = {}): Promise<Scripted> {
  const server = new grpc.Server();
  const calls: Scripted['calls'] = [];
  server.addService(discoveryService().service, {
    Stream: (call: Call) => {
      if (opts.token && call.metadata.get('authorization')[0] !== `Bearer ${opts.token}`) {
        call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: 'bad token' });
        return;
      }
      const entry = { call, metadata: call.metadata, requests: [] as DiscoveryRequest[] };
      calls.push(entry);
      call.on('data', (r: DiscoveryRequest) => entry.requests.push(r));
      call.on('error', () => {});
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${opts.port ?? 0}`, opts.creds ?? grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    port,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.forceShutdown();
        resolve();
      }),
  };
}

function config(price: string): GatewayConfig {
  const { config, errors } = compile([
    {
      object: {
        apiVersion: 'tollgate.dev/v1alpha1',
        kind: 'ModelRoute',
        metadata: { name: 'm' },
        spec: { type: 'chat', backends: [{ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1' }], pricing: { inputPerMillion: price } },
      },
    },
    { object: { apiVersion: 'tollgate.dev/v1alpha1', kind: 'Group', metadata: { name: 'g' }, spec: { models: ['m'] } } },
  ]);
  expect(errors).toEqual([]);
  return config;
}

function send(call: Call, c: GatewayConfig, nonce: string, bytes = encodeSnapshot(c)) {
  call.write({ version_info: c.version, nonce, config_json: bytes });
}

function memoryLog(): Logger & { lines: { level: string; msg: string; fields?: Record<string, unknown> }[] } {
  const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const log = {
    lines,
    info: (msg: string, fields?: Record<string, unknown>) => void lines.push({ level: 'info', msg, fields }),
    warn: (msg: string, fields?: Record<string, unknown>) => void lines.push({ level: 'warn', msg, fields }),
    error: (msg: string, fields?: Record<string, unknown>) => void lines.push({ level: 'error', msg, fields }),
    child: () => log,
  };
  return log;
}

async function waitFor(pred: () => boolean, what: string, ms = 5000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function source(url: string, extra: Partial<ConstructorParameters<typeof GrpcConfigSource>[0]> = {}) {
  const log = memoryLog();
  const s = new GrpcConfigSource({ url, token: 'discovery-token', nodeId: 'proxy-a', log, backoff: { initialMs: 20, maxMs: 100 }, ...extra });
  cleanups.push(() => s.stop());
  return { s, log };
}

describe('gRPC config source', () => {
  it('says what it holds, ACKs a good snapshot and swaps it in, NACKs a bad one and keeps the last good', async () => {
    const srv = await scriptedServer();
    cleanups.push(() => srv.close());
    const { s } = source(`grpc://127.0.0.1:${srv.port}`);
    const seen: string[] = [];
    s.onUpdate((c) => seen.push(c.version));
    await s.start();
    expect(s.current()).toBeUndefined();

    await waitFor(() => srv.calls[0]?.requests.length === 1, 'the first request');
    const { call, metadata, requests } = srv.calls[0]!;
    expect(metadata.get('authorization')).toEqual(['Bearer discovery-token']);
    expect(requests[0]).toMatchObject({ version_info: '', response_nonce: '', error_detail: '', node_id: 'proxy-a' });

    const v1 = config('1');
    send(call, v1, 'n1');
    await waitFor(() => requests.length === 2, 'the ACK');
    expect(requests[1]).toMatchObject({ version_info: v1.version, response_nonce: 'n1', error_detail: '' });
    expect(s.current()?.version).toBe(v1.version);
    expect(seen).toEqual([v1.version]);

    // Tampered: the body no longer matches its version.
    const v2 = config('2');
    send(call, v2, 'n2', Buffer.from(JSON.stringify({ ...v2, groups: {} })));
    await waitFor(() => requests.length === 3, 'the NACK');
    expect(requests[2]).toMatchObject({ version_info: v1.version, response_nonce: 'n2' });
    expect(requests[2]!.error_detail).toMatch(/does not match its content/);

    // Not JSON at all.
    call.write({ version_info: 'x', nonce: 'n3', config_json: Buffer.from('{nope') });
    await waitFor(() => requests.length === 4, 'the second NACK');
    expect(requests[3]!.error_detail).toMatch(/not JSON/);

    // Well-formed and correctly hashed, but a price the proxy cannot use.
    const bad = structuredClone(v2);
    bad.groups.g!.models.m!.inputPerMillion = '1.5';
    const { contentVersion } = await import('../../api/snapshot/index.js');
    bad.version = contentVersion({ models: bad.models, groups: bad.groups, keys: bad.keys });
    send(call, bad, 'n4');
    await waitFor(() => requests.length === 5, 'the third NACK');
    expect(requests[4]!.error_detail).toMatch(/cannot be served/);
    expect(s.current()?.version).toBe(v1.version);
    expect(seen).toEqual([v1.version]);

    send(call, v2, 'n5');
    await waitFor(() => requests.length === 6, 'the ACK of v2');
    expect(requests[5]).toMatchObject({ version_info: v2.version, response_nonce: 'n5', error_detail: '' });
    expect(seen).toEqual([v1.version, v2.version]);
  });

  it('keeps serving while the operator is away and tells the restarted one which version it holds', async () => {
    const first = await scriptedServer();
    const { s, log } = source(`grpc://127.0.0.1:${first.port}`);
    await s.start();
    await waitFor(() => first.calls[0]?.requests.length === 1, 'the first request');
    const v1 = config('1');
    send(first.calls[0]!.call, v1, 'n1');
    await waitFor(() => s.current()?.version === v1.version, 'v1');
    await first.close();

    await waitFor(() => log.lines.some((l) => l.msg.includes('stream lost')), 'the lost-stream log');
    expect(s.current()?.version).toBe(v1.version);
    expect(s.connected).toBe(false);

    const again = await scriptedServer({ port: first.port });
    cleanups.push(() => again.close());
    await waitFor(() => again.calls[0]?.requests.length === 1, 'the reconnect');
    expect(again.calls[0]!.requests[0]).toMatchObject({ version_info: v1.version, response_nonce: '' });
    const lost = log.lines.find((l) => l.msg.includes('stream lost'))!;
    expect(lost.fields).toMatchObject({ serving: v1.version });
  });

  it('with a wrong token it is refused, says why, keeps retrying, and never logs the token', async () => {
    const srv = await scriptedServer({ token: 'the-right-one' });
    cleanups.push(() => srv.close());
    const { s, log } = source(`grpc://127.0.0.1:${srv.port}`);
    await s.start();
    await waitFor(() => log.lines.filter((l) => l.msg.includes('refused')).length >= 2, 'two refusals');
    expect(s.current()).toBeUndefined();
    expect(JSON.stringify(log.lines)).not.toContain('discovery-token');
  });

  it.skipIf(!existsSync('/usr/bin/openssl'))('connects over TLS with a CA file (grpcs://)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tg-tls-'));
    execFileSync(
      '/usr/bin/openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    const creds = grpc.ServerCredentials.createSsl(
      null,
      [{ cert_chain: await readFile(join(dir, 'cert.pem')), private_key: await readFile(join(dir, 'key.pem')) }],
      false,
    );
    const srv = await scriptedServer({ creds });
    cleanups.push(() => srv.close());
    const { s } = source(`grpcs://localhost:${srv.port}`, { caFile: join(dir, 'cert.pem') });
    await s.start();
    await waitFor(() => srv.calls[0]?.requests.length === 1, 'the first request over TLS');
    const v1 = config('3');
    send(srv.calls[0]!.call, v1, 'n1');
    await waitFor(() => s.current()?.version === v1.version, 'v1 over TLS');
  });

  it("accepts a snapshot larger than gRPC's default 4 MiB message limit", async () => {
    const srv = await scriptedServer();
    cleanups.push(() => srv.close());
    const { s } = source(`grpc://127.0.0.1:${srv.port}`);
    await s.start();
    await waitFor(() => srv.calls[0]?.requests.length === 1, 'the first request');
    const big = config('1');
    for (let i = 0; i < 40_000; i++) big.keys[i.toString(16).padStart(64, '0')] = { name: `key-${i}`, group: 'g', account: `account-${i}` };
    const { contentVersion } = await import('../../api/snapshot/index.js');
    big.version = contentVersion({ models: big.models, groups: big.groups, keys: big.keys });
    const bytes = encodeSnapshot(big);
    expect(bytes.length).toBeGreaterThan(4 * 1024 * 1024);
    send(srv.calls[0]!.call, big, 'n1', bytes);
    await waitFor(() => s.current()?.version === big.version, 'the big snapshot');
    expect(Object.keys(s.current()!.keys)).toHaveLength(40_000);
  });

  it('parses config source URLs and refuses the rest with a clear message', () => {
    expect(parseDiscoveryUrl('grpc://tollgate-operator:50051')).toEqual({ target: 'tollgate-operator:50051', tls: false });
    expect(parseDiscoveryUrl('grpcs://op.example:443/')).toEqual({ target: 'op.example:443', tls: true });
    expect(() => parseDiscoveryUrl('http://op:50051')).toThrow(/grpc:\/\/HOST:PORT/);
    expect(() => parseDiscoveryUrl('grpc://op')).toThrow(/needs a port/);
    expect(() => new GrpcConfigSource({ url: 'grpc://op:1', caFile: '/x', log: memoryLog() })).toThrow(/grpcs/);
  });

  it('backs off exponentially up to a cap, with jitter in the upper half', () => {
    const lo = () => 0;
    const hi = () => 1;
    expect([0, 1, 2, 3].map((a) => backoffDelay(a, 100, 1000, hi))).toEqual([100, 200, 400, 800]);
    expect(backoffDelay(4, 100, 1000, hi)).toBe(1000);
    expect(backoffDelay(50, 100, 1000, hi)).toBe(1000);
    expect(backoffDelay(3, 100, 1000, lo)).toBe(400);
    // The default never waits more than 5 s, however long the operator was away.
    expect(backoffDelay(1000, RECONNECT.initialMs, RECONNECT.maxMs, hi)).toBe(5_000);
  });
});
