import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NS, modelRoute, ready, secret, startCluster, startOperator, waitFor, type Cluster, type TestOperator } from './harness.js';

/** The operator's Secret cache leaves out Helm's release records (label owner=helm), the largest Secrets of a namespace. */

let cluster: Cluster;
let op: TestOperator;

beforeAll(async () => {
  cluster = await startCluster();
  op = await startOperator(cluster, 'op-secrets');
});
afterAll(async () => {
  await op?.stop();
  await cluster?.close();
});

describe('operator Secret scope', () => {
  it('lists and watches Secrets without owner=helm; a route still finds its credentials', async () => {
    // A Helm release record, as helm install writes it.
    await cluster.core.createNamespacedSecret({
      namespace: NS,
      body: {
        metadata: { name: 'sh.helm.release.v1.tollgate.v1', labels: { owner: 'helm', name: 'tollgate', status: 'deployed', version: '1' } },
        type: 'helm.sh/release.v1',
        data: { release: Buffer.alloc(64 * 1024, 1).toString('base64') },
      },
    });
    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream' }));
    await cluster.apply(modelRoute('sim-gpt', 'http://127.0.0.1:1'));
    await waitFor(() => ready(cluster, 'ModelRoute', 'sim-gpt')?.status === 'True', 'the route Ready with its Secret');
    const secretReads = cluster.api.requests.filter((r) => r.method === 'GET' && r.path.startsWith(`/api/v1/namespaces/${NS}/secrets?`));
    expect(secretReads.length).toBeGreaterThan(0);
    for (const r of secretReads) expect(decodeURIComponent(r.path)).toContain('labelSelector=owner!=helm');
  });
});
