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

/**
 * A cluster in one process: kube-API test server, operator (real client-node), simulator and a
 * gateway fed over gRPC, answering the official openai SDK. The scenarios run in order and share
 * the cluster, as an operator's life would.
 */

const KEY = 'sk-service-scenario-key-0001';
const UPSTREAM_SECRET = 'sk-upstream-0123456789-do-not-leak';
const LATE_SECRET = 'sk-upstream-late-secret-never-in-status';

let cluster: Cluster;
let sim: Simulator;
let op: TestOperator;
let proxy: Proxy;
const extra: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  cluster = await startCluster();
  sim = await startSimulator();
  op = await startOperator(cluster, 'op-a');
  proxy = await startProxy(op.grpcPort);
});
afterAll(async () => {
  for (const x of extra) await x.close().catch(() => {});
  await proxy?.close();
  await op?.stop();
  await sim?.close();
  await cluster?.close();
});

const chat = (key: string, p: Proxy = proxy, marker = `m-${Math.random().toString(36).slice(2)}`) =>
  p.client(key).chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: `hello ${marker}` }] });
const version = (p: Proxy = proxy) => p.source.current()?.version;
const outputPrice = (p: Proxy = proxy) => p.source.current()?.groups.default?.models['sim-gpt']?.outputPerMillion;

/** Every status of every Tollgate resource, every Event and every log line, as one string. */
function everythingVisible(): string {
  const statuses = (['modelroutes', 'groups', 'apikeys'] as const).flatMap((p) => cluster.api.list('tollgate.dev/v1alpha1', p).map((o) => o.status));
  const events = [...cluster.api.list('v1', 'events'), ...cluster.api.list('events.k8s.io/v1', 'events')];
  return JSON.stringify({ statuses, events, operator: op.logs.lines, proxy: proxy.log.lines });
}

describe('operator -> gRPC -> proxy', () => {
  it('applied resources become a snapshot the proxy serves chat from, with the upstream credential from its Secret', async () => {
    await cluster.apply(secret('upstream', { apiKey: UPSTREAM_SECRET }));
    await cluster.apply(modelRoute('sim-gpt', sim.url));
    await cluster.apply(groupOf('default', ['sim-gpt']));
    await cluster.apply(apiKeyOf('hashed', { keyHash: keyHash(KEY) }));

    await waitFor(() => proxy.source.current()?.keys[keyHash(KEY).slice(7)], 'the key in the proxy snapshot');
    const admin = await fetch(`${proxy.gw.adminUrl}/readyz`);
    expect(admin.status).toBe(200);
    expect(((await admin.json()) as { configVersion: string }).configVersion).toBe(op.snapshot()!.version);

    const r = await chat(KEY, proxy, 'first-call');
    expect(r.choices[0]!.message.content).toBeTruthy();
    const [upstream] = sim.recorder.find('first-call');
    expect(upstream!.headers.authorization).toBe(`Bearer ${UPSTREAM_SECRET}`);
    expect((JSON.parse(upstream!.body.toString()) as { model: string }).model).toBe('gpt-sim');

    for (const [kind, name] of [
      ['ModelRoute', 'sim-gpt'],
      ['Group', 'default'],
      ['ApiKey', 'hashed'],
    ] as const) {
      const c = await waitFor(() => ready(cluster, kind, name), `${kind} ${name} Ready`);
      expect(c).toMatchObject({ status: 'True', observedGeneration: 1 });
    }
    // The MODEL printer column reads status.model: the code, also when spec.model is left out.
    expect(cluster.get('ModelRoute', 'sim-gpt')?.status?.model).toBe('sim-gpt');
    await waitFor(() => op.proxies().acked === 1, 'the ACK reaching the operator');
    expect(op.logs.lines.some((l) => l.msg === 'snapshot published' && l.version === version())).toBe(true);
  });

  it('a price change reaches the proxy as a new version, and the status follows the generation', async () => {
    const before = version();
    await cluster.patch('ModelRoute', 'sim-gpt', { spec: { pricing: { outputPerMillion: '2' } } });
    // Arrival is what is asserted; the generous timeout is not a latency claim.
    await waitFor(() => outputPrice() === '2000000', 'the new price at the proxy', 5000);
    expect(version()).not.toBe(before);
    await waitFor(() => ready(cluster, 'ModelRoute', 'sim-gpt')?.observedGeneration === 2, 'observedGeneration 2');
    await waitFor(() => op.proxies().acked === 1 && op.proxies().peers[0]?.acked === version(), 'the ACK of the new version');
  });

  it('an invalid Group is Ready False naming the field, while everything else keeps serving', async () => {
    const before = version();
    await cluster.apply(groupOf('broken', ['sim-gpt', 'no-such-model']));
    const c = await waitFor(() => ready(cluster, 'Group', 'broken'), 'the broken Group condition');
    expect(c).toMatchObject({ status: 'False', reason: 'ModelNotFound', observedGeneration: 1 });
    expect(c.message).toContain('spec.models[1]');
    expect(c.message).toContain('no-such-model');
    expect(ready(cluster, 'Group', 'default')?.status).toBe('True');
    expect(proxy.source.current()?.groups.broken).toBeUndefined();
    expect(version()).toBe(before); // an invalid resource adds nothing, so nothing changed
    await expect(chat(KEY)).resolves.toBeTruthy();

    // Fixing it clears the condition.
    await cluster.patch('Group', 'broken', { spec: { models: ['sim-gpt'] } });
    await waitFor(() => ready(cluster, 'Group', 'broken')?.status === 'True', 'the fixed Group Ready');
    expect(ready(cluster, 'Group', 'broken')?.observedGeneration).toBe(2);
    // Both transitions are Events on the Group, as kubectl describe shows them.
    const events = await waitFor(() => {
      const evs = cluster.api.list('v1', 'events', NS).filter((e) => e.involvedObject.kind === 'Group' && e.involvedObject.name === 'broken');
      // Listed by name (random suffixes); the order of creation is the resourceVersion's.
      return evs.length === 2 ? evs.sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion)) : undefined;
    }, 'two events on the Group');
    expect(events.map((e) => [e.type, e.reason])).toEqual([
      ['Warning', 'ModelNotFound'],
      ['Normal', 'Compiled'],
    ]);
    expect(events[0]!.message).toContain('spec.models[1]');
  });

  it('a ModelRoute whose credentials Secret is missing is not Ready with the reason; the credential never shows', async () => {
    await cluster.apply(
      modelRoute('needs-secret', sim.url, {
        backends: [{ provider: 'openai', baseURL: `${sim.url}/v1`, credentials: { secretRef: { name: 'late', key: 'apiKey' } } }],
      }),
    );
    const c = await waitFor(() => ready(cluster, 'ModelRoute', 'needs-secret'), 'the needs-secret condition');
    expect(c).toMatchObject({ status: 'False', reason: 'SecretNotFound' });
    expect(c.message).toContain('spec.backends[0].credentials.secretRef');
    expect(c.message).toContain('"late"');
    expect(proxy.source.current()?.models['needs-secret']).toBeUndefined();

    await cluster.apply(secret('late', { apiKey: LATE_SECRET }));
    await waitFor(() => ready(cluster, 'ModelRoute', 'needs-secret')?.status === 'True', 'needs-secret Ready once the Secret exists');
    await waitFor(() => proxy.source.current()?.models['needs-secret'], 'the model at the proxy');
    expect(proxy.source.current()!.models['needs-secret']!.backends[0]!.credential).toEqual({ value: LATE_SECRET });

    const seen = everythingVisible();
    expect(seen).not.toContain(LATE_SECRET);
    expect(seen).not.toContain(UPSTREAM_SECRET);
    expect(seen).not.toContain(Buffer.from(LATE_SECRET).toString('base64'));
  });

  it('an ApiKey without keyHash gets a minted key in a Secret it owns; the key works; rotated; revoked -> 401; deleted -> Secret gone', async () => {
    await cluster.apply(apiKeyOf('minted', {}));
    const secretName = await waitFor(() => cluster.get('ApiKey', 'minted')?.status?.secretName as string | undefined, 'status.secretName');
    const s = await cluster.core.readNamespacedSecret({ name: secretName, namespace: NS });
    const owner = cluster.get('ApiKey', 'minted')!;
    expect(s.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ apiVersion: 'tollgate.dev/v1alpha1', kind: 'ApiKey', name: 'minted', uid: owner.metadata.uid, controller: true }),
    ]);
    const key = Buffer.from(s.data!.apiKey!, 'base64').toString();
    expect(key).toMatch(/^sk-service-[A-Za-z0-9_-]{43}$/);
    expect(await waitFor(() => ready(cluster, 'ApiKey', 'minted')?.status === 'True', 'the minted ApiKey Ready')).toBe(true);

    await waitFor(() => proxy.source.current()?.keys[keyHash(key).slice(7)], 'the minted key at the proxy');
    await expect(chat(key)).resolves.toMatchObject({ object: 'chat.completion' });
    expect(everythingVisible()).not.toContain(key);

    // Rotation: deleting the Secret gets a new key; the old one stops working.
    await cluster.core.deleteNamespacedSecret({ name: secretName, namespace: NS });
    const rotated = await waitFor(() => {
      const d = cluster.api.get('v1', 'secrets', NS, secretName)?.data?.apiKey as string | undefined;
      const k = d && Buffer.from(d, 'base64').toString();
      return k && k !== key ? k : undefined;
    }, 'a new key in the Secret');
    await waitFor(() => proxy.source.current()?.keys[keyHash(rotated).slice(7)], 'the new key at the proxy');
    await expect(chat(key)).rejects.toMatchObject({ status: 401 });
    await expect(chat(rotated)).resolves.toMatchObject({ object: 'chat.completion' });

    await cluster.patch('ApiKey', 'minted', { spec: { revoked: true } });
    await waitFor(
      async () => {
        try {
          await chat(rotated);
          return false;
        } catch (err) {
          return (err as { status?: number }).status === 401;
        }
      },
      'a 401 for the revoked key',
      5000,
    );
    await waitFor(() => ready(cluster, 'ApiKey', 'minted')?.reason === 'Revoked', 'Ready False Revoked');
    await expect(chat(KEY)).resolves.toBeTruthy(); // the other key is untouched

    await cluster.remove('ApiKey', 'minted');
    expect(cluster.api.get('v1', 'secrets', NS, secretName)).toBeUndefined();
  });

  it('a minted key whose Secret name is taken by a foreign Secret waits, says why, and is minted once the name is free', async () => {
    await cluster.apply(secret('taken-key', { apiKey: 'sk-service-not-ours' }));
    await cluster.apply(apiKeyOf('taken', {}));
    const c = await waitFor(
      () => (ready(cluster, 'ApiKey', 'taken')?.message.includes('not owned') ? ready(cluster, 'ApiKey', 'taken') : undefined),
      'the conflict reported',
    );
    expect(c).toMatchObject({ status: 'False', reason: 'SecretNameTaken' });
    expect(c.message).toContain('Secret "taken-key"');
    await waitFor(
      () => cluster.api.list('v1', 'events', NS).some((e) => e.involvedObject.name === 'taken' && e.reason === 'SecretNameTaken' && e.type === 'Warning'),
      'the Warning event',
    );
    // The foreign Secret is left alone and its value never served.
    expect(Buffer.from(cluster.api.get('v1', 'secrets', NS, 'taken-key')!.data.apiKey as string, 'base64').toString()).toBe('sk-service-not-ours');
    expect(proxy.source.current()?.keys[keyHash('sk-service-not-ours').slice(7)]).toBeUndefined();

    await cluster.core.deleteNamespacedSecret({ name: 'taken-key', namespace: NS });
    await waitFor(() => ready(cluster, 'ApiKey', 'taken')?.status === 'True', 'minted once the name is free');
    expect(cluster.api.get('v1', 'secrets', NS, 'taken-key')!.metadata.ownerReferences[0].name).toBe('taken');
    await cluster.remove('ApiKey', 'taken');
  });

  it('a key that expires later stops working and turns Ready False Expired without any other change', async () => {
    const soon = 'sk-service-expires-soon-0001';
    await cluster.apply(apiKeyOf('expiring', { keyHash: keyHash(soon), expiresAt: new Date(Date.now() + 1500).toISOString() }));
    await waitFor(() => proxy.source.current()?.keys[keyHash(soon).slice(7)], 'the expiring key at the proxy');
    await expect(chat(soon)).resolves.toBeTruthy();
    await waitFor(() => ready(cluster, 'ApiKey', 'expiring')?.reason === 'Expired', 'Ready False Expired', 8000);
    await waitFor(() => !proxy.source.current()?.keys[keyHash(soon).slice(7)], 'the key leaving the snapshot');
    await expect(chat(soon)).rejects.toMatchObject({ status: 401 });
  });

  it('a watch answered 410 Gone relists, and later changes still arrive', async () => {
    const lists = () =>
      cluster.api.requests.filter((r) => r.method === 'GET' && /\/modelroutes$/.test(r.path.split('?')[0]!) && !r.path.includes('watch=')).length;
    const before = lists();
    // Something the operator does not watch moves the version on; then history is dropped and
    // every watch cut, so each informer resumes from a version the server no longer has.
    await cluster.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'unrelated' }, data: {} } });
    cluster.api.compact();
    cluster.api.dropWatches();
    await waitFor(() => lists() > before, 'a relist of modelroutes after 410');
    await cluster.patch('ModelRoute', 'sim-gpt', { spec: { pricing: { outputPerMillion: '3' } } });
    await waitFor(() => outputPrice() === '3000000', 'the change after the relist');
  });

  it('the proxy keeps serving while the operator is away; a restarted operator resyncs it, and a new proxy waits for it to be ready', async () => {
    const port = op.grpcPort;
    await op.stop();
    await waitFor(() => !proxy.source.connected, 'the proxy noticing');
    await expect(chat(KEY)).resolves.toBeTruthy();
    expect((await fetch(`${proxy.gw.adminUrl}/readyz`)).status).toBe(200);

    // A change made while no operator runs, and a proxy that starts with nothing.
    await cluster.patch('ModelRoute', 'sim-gpt', { spec: { pricing: { outputPerMillion: '4' } } });
    const late = await startProxy(port, 'proxy-late');
    extra.push(late);
    expect((await fetch(`${late.gw.adminUrl}/readyz`)).status).toBe(503);
    await expect(chat(KEY, late)).rejects.toMatchObject({ status: 503 });

    op = await startOperator(cluster, 'op-a', { grpcPort: port });
    await waitFor(() => outputPrice() === '4000000', 'the first proxy resynced');
    await waitFor(() => outputPrice(late) === '4000000', 'the late proxy ready');
    expect((await fetch(`${late.gw.adminUrl}/readyz`)).status).toBe(200);
    await expect(chat(KEY, late)).resolves.toBeTruthy();
    await waitFor(() => op.proxies().connected === 2 && op.proxies().acked === 2, 'both proxies ACKed');
  });

  it('counts proxies and versions in /metrics, and refuses a stream without the token', async () => {
    const metered = await startOperator(cluster, 'op-metrics', { metricsPort: 0, metricsHost: '127.0.0.1', debounceMs: 300 });
    extra.push({ close: () => metered.stop() });
    const p = await startProxy(metered.grpcPort, 'proxy-m');
    extra.push(p);
    await waitFor(() => p.source.current(), 'a snapshot from the second operator');
    // Same resources, same version, whichever operator compiled them.
    expect(p.source.current()!.version).toBe(version());
    const body = await waitFor(async () => {
      const text = await (await fetch(`http://127.0.0.1:${metered.metricsPort}/metrics`)).text();
      return /tollgate_operator_proxies_acked 1/.test(text) ? text : undefined;
    }, 'proxies_acked 1');
    expect(body).toContain(`tollgate_operator_snapshot_info{version="${version()}"} 1`);
    expect((await fetch(`http://127.0.0.1:${metered.metricsPort}/readyz`)).status).toBe(200);

    const { GrpcConfigSource } = await import('../../proxy/config/grpc-source.js');
    const { memoryLog } = await import('./harness.js');
    const log = memoryLog();
    const intruder = new GrpcConfigSource({ url: `grpc://127.0.0.1:${metered.grpcPort}`, token: 'wrong', log, backoff: { initialMs: 20, maxMs: 50 } });
    await intruder.start();
    await waitFor(() => log.lines.some((l) => l.msg.includes('refused')), 'the refusal');
    await intruder.stop();
    expect(intruder.current()).toBeUndefined();
  });

  it('a burst of changes is compiled once, not once per event', async () => {
    const burst = await startOperator(cluster, 'op-burst', { debounceMs: 300 });
    extra.push({ close: () => burst.stop() });
    await waitFor(() => burst.snapshot(), 'the first snapshot');
    await burst.idle();
    const passes = async () => (await burst.metrics.reconciles.get()).values[0]?.value ?? 0;
    const before = await passes();
    await Promise.all(Array.from({ length: 10 }, (_, i) => cluster.apply(groupOf(`burst-${i}`, ['sim-gpt']))));
    await waitFor(() => Object.keys(burst.snapshot()!.groups).filter((g) => g.startsWith('burst-')).length === 10, 'all ten groups');
    await burst.idle();
    const after = await passes();
    expect(after - before).toBeGreaterThanOrEqual(1);
    // Ten events; a loaded machine may spread the creates over two or three windows.
    expect(after - before).toBeLessThanOrEqual(4);
  });
});
