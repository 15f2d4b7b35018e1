import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startCli } from '../support/cli.js';
import { ACCOUNT, TOKEN, apiKeyOf, groupOf, modelRoute, secret, startCluster, startSimulator, waitFor, type Cluster, type Simulator } from './harness.js';

/** `tollgate operator` and `tollgate serve --config-from` as processes, the way the README runs them. */

describe('tollgate operator / serve --config-from (processes)', () => {
  const children: { kill(sig: NodeJS.Signals): boolean }[] = [];
  let cluster: Cluster | undefined;
  let sim: Simulator | undefined;
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await sim?.close();
    await cluster?.close();
  });

  it('bad flags are one-line usage errors (exit 2)', async () => {
    const cases: [string[], RegExp][] = [
      [['operator', '--grpc-port', 'x'], /--grpc-port must be a port number/],
      [['operator', '--tls-cert', 'a.pem'], /--tls-cert and --tls-key go together/],
      [['operator', '--kube-server', 'localhost:8001'], /--kube-server must be an http\(s\):\/\/ URL/],
      [['operator', '--kubeconfig', '/nonexistent/kubeconfig'], /--kubeconfig: \/nonexistent\/kubeconfig does not exist/],
      [['serve', '--config-from', 'http://op:50051'], /--config-from: .*grpc:\/\/HOST:PORT/],
      [['serve', '--config-from', 'grpc://op:50051', '--discovery-ca', 'ca.pem'], /CA file is only used with grpcs/],
      [['serve', '--config', 'x', '--discovery-ca', 'ca.pem'], /--discovery-ca goes with --config-from/],
    ];
    const results = await Promise.all(cases.map(([args]) => runCli(args)));
    results.forEach((r, i) => {
      expect(r.code, cases[i]![0].join(' ')).toBe(2);
      expect(r.stderr).toMatch(cases[i]![1]);
    });
    const help = await runCli(['--help']);
    expect(help.stdout).toMatch(/operator\s+run the Kubernetes operator/);
  });

  it('the operator process feeds a serve process, which answers the openai SDK; both stop on SIGTERM', async () => {
    cluster = await startCluster();
    sim = await startSimulator();
    const key = 'sk-service-cli-process-key';
    const { keyHash } = await import('../support/resources.js');
    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream' }));
    await cluster.apply(modelRoute('sim-gpt', sim.url));
    await cluster.apply(groupOf('default', ['sim-gpt']));
    await cluster.apply(apiKeyOf('k', { keyHash: keyHash(key) }));

    // The proxy keeps its state in memory (PGlite): a DATABASE_URL meant for the store suites
    // would point it at a shared schema.
    const env = { TOLLGATE_DISCOVERY_TOKEN: TOKEN, TOLLGATE_LOG_LEVEL: 'info', DATABASE_URL: '' };
    const op = await startCli(
      [
        'operator',
        '--kube-server',
        cluster.api.url,
        '--namespace',
        'tollgate',
        '--grpc-host',
        '127.0.0.1',
        '--grpc-port',
        '0',
        '--metrics-host',
        '127.0.0.1',
        '--metrics-port',
        '0',
        '--identity',
        'cli-op',
      ],
      (l) => l.msg === 'operator started',
      env,
    );
    children.push(op.child);
    const grpcPort = op.match.grpcPort as number;
    await waitFor(() => op.lines.some((l) => l.msg === 'snapshot published' && (l.keys as number) === 1), 'the first snapshot');

    const serve = await startCli(
      ['serve', '--config-from', `grpc://127.0.0.1:${grpcPort}`, '--port', '0', '--admin-port', '0', '--admin-token', 'cli-admin'],
      (l) => l.msg === 'gateway listening',
      env,
      60_000,
    );
    children.push(serve.child);
    const api = serve.match.api as string;
    const admin = serve.match.admin as string;
    await waitFor(async () => (await fetch(`${admin}/readyz`)).status === 200, 'the proxy ready');
    const grant = await fetch(`${admin}/admin/v1/accounts/${ACCOUNT}/grants`, {
      method: 'POST',
      headers: { authorization: 'Bearer cli-admin', 'content-type': 'application/json' },
      body: JSON.stringify({ credits: '5' }),
    });
    expect(grant.status).toBe(200);
    const r = await new OpenAI({ baseURL: `${api}/v1`, apiKey: key, maxRetries: 0 }).chat.completions.create({
      model: 'sim-gpt',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(r.object).toBe('chat.completion');
    await waitFor(() => op.lines.some((l) => l.msg === 'proxy acknowledged a snapshot' && l.proxiesAcked === 1), 'the ACK in the operator log');
    expect(JSON.stringify([...op.lines, ...serve.lines])).not.toContain('sk-upstream');

    serve.child.kill('SIGTERM');
    op.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
    expect(await op.exited).toBe(0);
  });

  it('the operator also finds the API server through KUBECONFIG (the file npm run kube-api -- --kubeconfig writes)', async () => {
    const { mkdtemp } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const file = await cluster!.api.kubeconfig(join(await mkdtemp(join(tmpdir(), 'tg-kc-')), 'kubeconfig'));
    const op = await startCli(
      ['operator', '--namespace', 'tollgate', '--grpc-port', '0', '--metrics-port', '0', '--grpc-host', '127.0.0.1', '--metrics-host', '127.0.0.1'],
      (l) => l.msg === 'snapshot published',
      { KUBECONFIG: file, TOLLGATE_DISCOVERY_TOKEN: TOKEN },
    );
    children.push(op.child);
    expect(op.match.keys).toBe(1);
    op.child.kill('SIGTERM');
    expect(await op.exited).toBe(0);
  });
});
