import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyHash } from '../support/resources.js';
import {
  NS,
  apiKeyOf,
  groupOf,
  modelRoute,
  ready,
  secret,
  startCluster,
  startOperator,
  startProxy,
  startSimulator,
  waitFor,
  type Cluster,
  type Proxy,
  type Simulator,
  type TestOperator,
} from './harness.js';

/** Two operator replicas on one Lease: one writes, both serve snapshots; the standby takes over. */

let cluster: Cluster;
let sim: Simulator;
let a: TestOperator;
let b: TestOperator;
let proxy: Proxy;

beforeAll(async () => {
  cluster = await startCluster();
  sim = await startSimulator();
  a = await startOperator(cluster, 'op-a');
  b = await startOperator(cluster, 'op-b');
});
afterAll(async () => {
  await proxy?.close();
  await a?.stop();
  await b?.stop();
  await sim?.close();
  await cluster?.close();
});

const statusWrites = () => cluster.api.requests.filter((r) => r.method === 'PATCH' && r.path.split('?')[0]!.endsWith('/status')).length;
const writesBy = async (op: TestOperator) => (await op.metrics.statusWrites.get()).values.reduce((n, v) => n + v.value, 0);

describe('leader election', () => {
  it('one leader holds the Lease and alone writes status; the standby still serves snapshots', async () => {
    await waitFor(() => a.isLeader() !== b.isLeader(), 'exactly one leader');
    const [leader, standby] = a.isLeader() ? [a, b] : [b, a];
    const lease = cluster.api.get('coordination.k8s.io/v1', 'leases', NS, 'tollgate-operator');
    expect(lease?.spec.holderIdentity).toBe(leader === a ? 'op-a' : 'op-b');

    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream' }));
    await cluster.apply(modelRoute('sim-gpt', sim.url));
    await cluster.apply(groupOf('default', ['sim-gpt']));
    await cluster.apply(apiKeyOf('hashed', { keyHash: keyHash('sk-service-leader-test') }));
    await cluster.apply(apiKeyOf('minted', {}));
    await waitFor(() => ready(cluster, 'ApiKey', 'minted')?.status === 'True', 'the minted key Ready');
    await waitFor(() => ready(cluster, 'ApiKey', 'hashed')?.status === 'True' && ready(cluster, 'Group', 'default')?.status === 'True', 'all Ready');

    expect(await writesBy(leader)).toBeGreaterThan(0);
    expect(await writesBy(standby)).toBe(0);
    expect((await standby.metrics.keysMinted.get()).values[0]?.value ?? 0).toBe(0);
    // One minted Secret, not one per replica.
    expect(cluster.api.list('v1', 'secrets', NS).filter((s) => s.metadata.labels?.['tollgate.dev/apikey'] === 'minted')).toHaveLength(1);

    // The standby compiled the same snapshot and serves it.
    await waitFor(() => standby.snapshot()?.version === leader.snapshot()?.version, 'the same version on both');
    proxy = await startProxy(standby.grpcPort);
    await waitFor(() => proxy.source.current()?.version === leader.snapshot()!.version, 'the proxy fed by the standby');
    const key = Buffer.from(cluster.api.get('v1', 'secrets', NS, 'minted-key')!.data.apiKey as string, 'base64').toString();
    await expect(proxy.client(key).chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }] })).resolves.toMatchObject({
      object: 'chat.completion',
    });
  });

  it('status is written only when it changes', async () => {
    await Promise.all([a.idle(), b.idle()]);
    const before = statusWrites();
    // A Secret nobody references: a recompile happens, no condition changes.
    await cluster.apply(secret('unrelated', { x: 'y' }));
    await cluster.apply(secret('upstream', { apiKey: 'sk-upstream', other: 'z' }));
    await new Promise((r) => setTimeout(r, 300));
    await Promise.all([a.idle(), b.idle()]);
    expect(statusWrites()).toBe(before);
  });

  it('when the leader stops, the standby takes the Lease and writes', async () => {
    const [leader, standby] = a.isLeader() ? [a, b] : [b, a];
    await leader.stop();
    await waitFor(() => standby.isLeader(), 'the standby leading');
    await cluster.apply(groupOf('broken', ['missing']));
    await waitFor(() => ready(cluster, 'Group', 'broken')?.reason === 'ModelNotFound', 'a status written by the new leader');
    // The cluster holds the status before the PATCH's answer reaches the operator, which counts it then.
    await waitFor(async () => (await writesBy(standby)) > 0, 'the write counted by the new leader', 2_000);
  });
});
