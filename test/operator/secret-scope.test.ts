import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyHash } from '../support/resources.js';
import {
  API_VERSION,
  NS,
  apiKeyOf,
  groupOf,
  modelRoute,
  ready,
  secret,
  startCluster,
  startOperator,
  waitFor,
  type Cluster,
  type TestOperator,
} from './harness.js';

/**
 * The operator reads only the Secrets it needs: each Secret a ModelRoute references, watched by
 * name (field selector metadata.name), and the minted-key Secrets, selected by their label. Helm's
 * release records and other applications' Secrets are never listed, watched or cached.
 */

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

/** The operator's list and watch requests on Secrets, query decoded. */
const secretReads = () =>
  cluster.api.requests
    .filter((r) => r.method === 'GET' && r.path.startsWith(`/api/v1/namespaces/${NS}/secrets?`))
    .map((r) => Object.fromEntries(new URL(r.path, 'http://x').searchParams));
const watchesOf = (name: string) => secretReads().filter((q) => q.watch === 'true' && q.fieldSelector === `metadata.name=${name}`).length;
const credential = (model: string) => op.snapshot()?.models[model]?.backends[0]?.credential;

describe('operator Secret scope', () => {
  it('watches the referenced Secret by name and the minted ones by label, never the rest of the namespace', async () => {
    // A Helm release record, as helm install writes it, and another application's Secret.
    await cluster.core.createNamespacedSecret({
      namespace: NS,
      body: {
        metadata: { name: 'sh.helm.release.v1.tollgate.v1', labels: { owner: 'helm', name: 'tollgate', status: 'deployed', version: '1' } },
        type: 'helm.sh/release.v1',
        data: { release: Buffer.alloc(64 * 1024, 1).toString('base64') },
      },
    });
    await cluster.apply(secret('other-app', { password: 'not-for-tollgate' }));
    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream' }));
    await cluster.apply(modelRoute('sim-gpt', 'http://127.0.0.1:1'));
    await waitFor(() => ready(cluster, 'ModelRoute', 'sim-gpt')?.status === 'True', 'the route Ready with its Secret');
    expect(credential('sim-gpt')).toEqual({ value: 'sk-upstream' });

    const reads = secretReads();
    expect(reads.length).toBeGreaterThan(0);
    for (const q of reads) {
      expect([q.fieldSelector, q.labelSelector], JSON.stringify(q)).toContainEqual(expect.stringMatching(/^(metadata\.name=upstream|tollgate\.dev\/apikey)$/));
    }
    expect(watchesOf('upstream')).toBeGreaterThan(0);
  });

  it('a rotated credential reaches the snapshot; a deleted one takes the route out (SecretNotFound)', async () => {
    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream-rotated' }));
    await waitFor(() => (credential('sim-gpt') as { value?: string } | undefined)?.value === 'sk-upstream-rotated', 'the rotated credential');

    await cluster.core.deleteNamespacedSecret({ name: 'upstream', namespace: NS });
    await waitFor(() => ready(cluster, 'ModelRoute', 'sim-gpt')?.reason === 'SecretNotFound', 'SecretNotFound once the Secret is gone');
    expect(op.snapshot()?.models['sim-gpt']).toBeUndefined();

    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream-back' }));
    await waitFor(() => (credential('sim-gpt') as { value?: string } | undefined)?.value === 'sk-upstream-back', 'the route back with the new Secret');
  });

  it('a route that moves to another Secret: that one is watched, the old one no longer', async () => {
    await cluster.apply(secret('upstream-2', { apiKey: 'sk-second' }));
    await cluster.patch('ModelRoute', 'sim-gpt', {
      spec: { backends: [{ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1', credentials: { secretRef: { name: 'upstream-2', key: 'apiKey' } } }] },
    });
    await waitFor(() => (credential('sim-gpt') as { value?: string } | undefined)?.value === 'sk-second', 'the credential of the new Secret');
    expect(watchesOf('upstream-2')).toBeGreaterThan(0);

    // The old Secret's watch is closed: its changes no longer compile anything.
    const version = op.snapshot()!.version;
    const upstreamWatches = watchesOf('upstream');
    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream-ignored' }));
    await op.idle();
    expect(op.snapshot()!.version).toBe(version);
    expect(watchesOf('upstream')).toBe(upstreamWatches);
  });

  it('a Secret minted before Secrets carried the label is found by name and its key served, untouched', async () => {
    const legacyKey = 'sk-service-minted-by-an-older-operator-0001';
    await cluster.apply(groupOf('default', ['sim-gpt']));
    // The ApiKey first (with a hash, so nothing is minted), then its Secret as an older operator wrote it.
    await cluster.apply(apiKeyOf('legacy', { keyHash: keyHash('sk-service-placeholder-0001') }));
    const owner = await waitFor(() => cluster.get('ApiKey', 'legacy'), 'the ApiKey');
    await cluster.core.createNamespacedSecret({
      namespace: NS,
      body: {
        metadata: {
          name: 'legacy-key',
          ownerReferences: [{ apiVersion: API_VERSION, kind: 'ApiKey', name: 'legacy', uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true }],
        },
        data: { apiKey: Buffer.from(legacyKey).toString('base64') },
      },
    });
    await cluster.patch('ApiKey', 'legacy', { spec: { keyHash: null } });
    await waitFor(() => op.snapshot()?.keys[keyHash(legacyKey).slice(7)], 'the legacy key in the snapshot');
    await waitFor(() => ready(cluster, 'ApiKey', 'legacy')?.status === 'True', 'the legacy ApiKey Ready');
    expect(watchesOf('legacy-key')).toBeGreaterThan(0);
    const stored = cluster.api.get('v1', 'secrets', NS, 'legacy-key')!;
    expect(Buffer.from(stored.data.apiKey as string, 'base64').toString()).toBe(legacyKey);
    expect(stored.metadata.labels).toBeUndefined();

    // A newly minted key's Secret carries the label, so the label informer holds it.
    await cluster.apply(apiKeyOf('fresh', {}));
    await waitFor(() => ready(cluster, 'ApiKey', 'fresh')?.status === 'True', 'the fresh key minted');
    expect(cluster.api.get('v1', 'secrets', NS, 'fresh-key')!.metadata.labels).toMatchObject({ 'tollgate.dev/apikey': 'fresh' });
    expect(watchesOf('fresh-key')).toBe(0);
  });
});
