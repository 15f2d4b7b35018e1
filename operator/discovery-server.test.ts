import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { discoveryService, type DiscoveryRequest, type DiscoveryResponse } from '../api/snapshot/discovery.js';
import { compile, type GatewayConfig } from '../api/snapshot/index.js';
import { DiscoveryServer } from './discovery-server.js';
import type { Logger } from '../kernel/log.js';

/** The operator's side of ConfigDiscovery, driven by a raw gRPC client that can ACK, NACK and lie. */

type Line = { level: string; msg: string; fields?: Record<string, unknown> };
function memoryLog(lines: Line[] = []): Logger {
  const w = (level: string) => (msg: string, fields?: Record<string, unknown>) => void lines.push({ level, msg, fields });
  return { info: w('info'), warn: w('warn'), error: w('error'), child: () => memoryLog(lines) };
}

function config(price: string): GatewayConfig {
  return compile([
    {
      object: {
        apiVersion: 'tollgate.dev/v1alpha1',
        kind: 'ModelRoute',
        metadata: { name: 'm' },
        spec: { type: 'chat', backends: [{ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1' }], pricing: { inputPerMillion: price } },
      },
    },
    { object: { apiVersion: 'tollgate.dev/v1alpha1', kind: 'Group', metadata: { name: 'g' }, spec: { models: ['m'] } } },
  ]).config;
}

async function waitFor(pred: () => boolean, what: string) {
  const end = Date.now() + 5000;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function serve(opts: Partial<ConstructorParameters<typeof DiscoveryServer>[0]> = {}) {
  const lines: Line[] = [];
  const server = new DiscoveryServer({ token: 'tok', log: memoryLog(lines), ...opts });
  const port = await server.listen(0, '127.0.0.1');
  closers.push(() => server.close());
  return { server, port, lines };
}

function connect(port: number, token = 'tok', creds = grpc.credentials.createInsecure(), host = '127.0.0.1') {
  const Client = discoveryService();
  const client = new Client(`${host}:${port}`, creds);
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  const call = (client as unknown as { Stream(md: grpc.Metadata): grpc.ClientDuplexStream<DiscoveryRequest, DiscoveryResponse> }).Stream(md);
  const got: DiscoveryResponse[] = [];
  let status: grpc.StatusObject | undefined;
  call.on('data', (r: DiscoveryResponse) => got.push(r));
  call.on('status', (s: grpc.StatusObject) => (status = s));
  call.on('error', () => {});
  closers.push(() => {
    call.cancel();
    client.close();
  });
  const send = (r: Partial<DiscoveryRequest>) => call.write({ version_info: '', response_nonce: '', error_detail: '', node_id: 'raw', ...r });
  return { call, got, send, status: () => status };
}

describe('discovery server', () => {
  it('pushes the snapshot, counts ACKs per version, logs and counts a NACK without resending, ignores stale nonces', async () => {
    const { server, port, lines } = await serve();
    const v1 = config('1');
    server.setSnapshot(v1);
    const c = connect(port);
    c.send({});
    await waitFor(() => c.got.length === 1, 'the first push');
    expect(c.got[0]!.version_info).toBe(v1.version);
    expect(server.stats()).toMatchObject({ connected: 1, acked: 0 });
    c.send({ version_info: v1.version, response_nonce: c.got[0]!.nonce });
    await waitFor(() => server.stats().acked === 1, 'the ACK counted');

    const v2 = config('2');
    server.setSnapshot(v2);
    await waitFor(() => c.got.length === 2, 'the second push');
    expect(server.stats().acked).toBe(0); // acked means "holds the current version"
    // An answer to an older nonce is stale and changes nothing.
    c.send({ version_info: 'bogus', response_nonce: c.got[0]!.nonce });
    c.send({ version_info: v1.version, response_nonce: c.got[1]!.nonce, error_detail: 'price not usable' });
    await waitFor(() => server.nacks === 1, 'the NACK counted');
    expect(server.stats().peers[0]).toMatchObject({ nodeId: 'raw', acked: v1.version, lastNack: v2.version });
    expect(lines.find((l) => l.msg.includes('NACK'))?.fields).toMatchObject({ node: 'raw', version: v2.version, keeps: v1.version, error: 'price not usable' });
    server.setSnapshot(v2); // the same version again: not resent
    await new Promise((r) => setTimeout(r, 50));
    expect(c.got).toHaveLength(2);
  });

  it('does not resend the version a reconnecting proxy already holds', async () => {
    const { server, port } = await serve();
    const v1 = config('1');
    server.setSnapshot(v1);
    const c = connect(port);
    c.send({ version_info: v1.version });
    await waitFor(() => server.stats().acked === 1, 'the held version counted');
    await new Promise((r) => setTimeout(r, 50));
    expect(c.got).toHaveLength(0);
  });

  it('refuses a stream with a wrong token (UNAUTHENTICATED)', async () => {
    const { server, port } = await serve();
    server.setSnapshot(config('1'));
    const c = connect(port, 'nope');
    c.send({});
    await waitFor(() => c.status() !== undefined, 'the status');
    expect(c.status()!.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(c.got).toHaveLength(0);
    expect(server.stats().connected).toBe(0);
  });

  it.skipIf(!existsSync('/usr/bin/openssl'))('serves over TLS with --tls-cert / --tls-key', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tg-optls-'));
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
        'subjectAltName=DNS:localhost',
      ],
      { stdio: 'ignore' },
    );
    const { server, port } = await serve({ tlsCert: join(dir, 'cert.pem'), tlsKey: join(dir, 'key.pem') });
    const v1 = config('1');
    server.setSnapshot(v1);
    const { readFileSync } = await import('node:fs');
    const c = connect(port, 'tok', grpc.credentials.createSsl(readFileSync(join(dir, 'cert.pem'))), 'localhost');
    c.send({});
    await waitFor(() => c.got.length === 1, 'the push over TLS');
    expect(c.got[0]!.version_info).toBe(v1.version);
    // A plain-text client gets nothing from a TLS server.
    const plain = connect(port);
    plain.send({});
    await waitFor(() => plain.status() !== undefined, 'the plain client failing');
    expect(plain.status()!.code).toBe(grpc.status.UNAVAILABLE);
  });
});
