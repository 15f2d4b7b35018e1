import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKeyOf, groupOf, modelRoute, secret, startCluster, startOperator, waitFor, type Cluster, type TestOperator } from './harness.js';

/** Without --namespace the operator watches every namespace; status and minted Secrets land beside their resource. */

let cluster: Cluster;
let op: TestOperator;

beforeAll(async () => {
  cluster = await startCluster();
  for (const name of ['team-a', 'team-b']) await cluster.core.createNamespace({ body: { metadata: { name } } });
  op = await startOperator(cluster, 'op-all', { namespace: undefined, lease: { namespace: 'default', identity: 'op-all', retryMs: 100, durationMs: 1500 } });
});
afterAll(async () => {
  await op?.stop();
  await cluster?.close();
});

const create = async (namespace: string, obj: { kind: string; metadata: { name: string }; [k: string]: unknown }) => {
  const body = { ...obj, metadata: { ...obj.metadata, namespace } };
  if (obj.kind === 'Secret') await cluster.core.createNamespacedSecret({ namespace, body });
  else await cluster.custom.createNamespacedCustomObject({ group: 'tollgate.dev', version: 'v1alpha1', namespace, plural: `${obj.kind.toLowerCase()}s`, body });
};
const readyIn = (namespace: string, plural: string, name: string) =>
  (
    cluster.api.get('tollgate.dev/v1alpha1', plural, namespace, name)?.status?.conditions as { type: string; status: string; reason: string }[] | undefined
  )?.find((c) => c.type === 'Ready');

describe('operator over all namespaces', () => {
  it('compiles resources from every namespace, each route reading Secrets of its own namespace', async () => {
    await create('team-a', secret('upstream', { apiKey: 'a-secret' }));
    await create('team-a', modelRoute('model-a', 'http://127.0.0.1:1'));
    // team-b's route names a Secret that exists only in team-a: not found, as in Kubernetes.
    await create('team-b', modelRoute('model-b', 'http://127.0.0.1:1'));
    await create('team-b', groupOf('shared', ['model-a']));
    await create('team-b', apiKeyOf('bob', { group: 'shared' }));

    await waitFor(() => readyIn('team-a', 'modelroutes', 'model-a')?.status === 'True', 'model-a Ready');
    await waitFor(() => readyIn('team-b', 'modelroutes', 'model-b')?.reason === 'SecretNotFound', 'model-b missing its Secret');
    await waitFor(() => readyIn('team-b', 'apikeys', 'bob')?.status === 'True', 'bob minted and Ready');
    expect(cluster.api.get('v1', 'secrets', 'team-b', 'bob-key')?.data.apiKey).toBeTruthy();
    expect(cluster.api.get('v1', 'secrets', 'team-a', 'bob-key')).toBeUndefined();
    const snap = op.snapshot()!;
    expect(Object.keys(snap.models)).toEqual(['model-a']);
    expect(snap.models['model-a']!.backends[0]!.credential).toEqual({ value: 'a-secret' });
    expect(Object.values(snap.keys).map((k) => k.name)).toEqual(['bob']);
    expect(cluster.api.get('coordination.k8s.io/v1', 'leases', 'default', 'tollgate-operator')?.spec.holderIdentity).toBe('op-all');
  });

  it('names are cluster-wide: the same Group name in two namespaces is a Conflict on the second', async () => {
    await create('team-a', groupOf('shared', ['model-a']));
    // Resources are taken in namespace/name order, so team-a's Group wins.
    await waitFor(() => readyIn('team-b', 'groups', 'shared')?.reason === 'Conflict', 'team-b in Conflict');
    // The two status writes land in either order: wait for team-a's too.
    await waitFor(() => readyIn('team-a', 'groups', 'shared')?.status === 'True', 'team-a Ready');
  });
});
