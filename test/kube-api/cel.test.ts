import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ApiException, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import { kubeConfigFor } from '../operator/harness.js';
import { k8sTools } from '../support/k8s-tools.js';
import { startKubeApi, type KubeApi } from './server.js';

/**
 * The CRDs' CEL rules (x-kubernetes-validations, generated from api/v1alpha1) as the API server
 * enforces them: the real kubectl and @kubernetes/client-node write to the kube-API test server,
 * which evaluates the rules on create, update and patch (dry runs included) and answers 422
 * Invalid with each rule's message.
 */

const run = promisify(execFile);
const root = new URL('../../', import.meta.url).pathname;
const NS = 'default';
let KUBECTL = '';
let api: KubeApi;
let dir: string;
let custom: CustomObjectsApi;

/** kubectl's stdout, or its stderr as the thrown error's message (what a user reads). */
async function kubectl(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(KUBECTL, ['--kubeconfig', join(dir, 'kubeconfig'), '--cache-dir', join(dir, 'cache'), ...args], { cwd: root });
    return stdout;
  } catch (err) {
    throw new Error((err as { stderr?: string }).stderr || String(err));
  }
}

async function apply(doc: object, ...flags: string[]): Promise<string> {
  const file = join(dir, `m-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, stringify(doc));
  return kubectl('apply', '--validate=false', ...flags, '-f', file);
}

const route = (name: string, spec: object) => ({ apiVersion: 'tollgate.dev/v1alpha1', kind: 'ModelRoute', metadata: { name }, spec });
const group = (name: string, spec: object) => ({ apiVersion: 'tollgate.dev/v1alpha1', kind: 'Group', metadata: { name }, spec });
const backends = [{ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1' }];

beforeAll(async () => {
  KUBECTL = process.env.KUBECTL ?? (await k8sTools()).kubectl;
  api = await startKubeApi();
  dir = await mkdtemp(join(tmpdir(), 'kube-api-cel-'));
  await api.kubeconfig(join(dir, 'kubeconfig'), NS);
  custom = kubeConfigFor(api.url).makeApiClient(CustomObjectsApi);
  await kubectl('apply', '--validate=false', '-f', 'crds/');
});
afterAll(async () => {
  await api?.close();
});

describe('CEL validation rules of the CRDs', () => {
  it('a chat route needs both token prices; an image route does not', async () => {
    await expect(apply(route('cheap', { type: 'chat', backends, pricing: { inputPerMillion: '1' } }))).rejects.toThrow(
      'The ModelRoute "cheap" is invalid: spec.pricing: Required value: a chat route needs pricing.inputPerMillion and pricing.outputPerMillion ("0" for a free model)',
    );
    await expect(apply(route('cheap', { type: 'chat', backends }))).rejects.toThrow(/spec\.pricing: Required value: a chat route needs/);
    expect(api.get('tollgate.dev/v1alpha1', 'modelroutes', NS, 'cheap')).toBeUndefined();

    expect(await apply(route('cheap', { type: 'chat', backends, pricing: { inputPerMillion: '1', outputPerMillion: '0' } }))).toContain(
      'modelroute.tollgate.dev/cheap created',
    );
    expect(await apply(route('pictures', { type: 'image', backends, pricing: { perImage: { '1024x1024': '0.04' } } }))).toContain('created');
    // A patch that removes a price is refused too, and leaves the stored route as it was.
    await expect(kubectl('patch', 'mr', 'cheap', '--type', 'merge', '-p', '{"spec":{"pricing":{"outputPerMillion":null}}}')).rejects.toThrow(
      /spec\.pricing: Required value/,
    );
    expect(api.get('tollgate.dev/v1alpha1', 'modelroutes', NS, 'cheap')!.spec.pricing.outputPerMillion).toBe('0');
  });

  it('minDuration must not exceed maxDuration', async () => {
    const video = (min: number, max: number) => route('clips', { type: 'video', backends, capabilities: { minDuration: min, maxDuration: max } });
    await expect(apply(video(12, 10))).rejects.toThrow('spec.capabilities: Invalid value: "object": minDuration must not exceed maxDuration');
    expect(await apply(video(5, 10))).toContain('created');
    await expect(
      kubectl('patch', 'mr', 'clips', '--type', 'json', '-p', '[{"op":"replace","path":"/spec/capabilities/minDuration","value":11}]'),
    ).rejects.toThrow(/minDuration must not exceed maxDuration/);
  });

  it('a Group names its models or selects them; its price overrides stay within its models', async () => {
    await expect(apply(group('empty', { priceMultiplier: '2' }))).rejects.toThrow(
      'spec: Required value: name the models (models) or select them by label (modelSelector)',
    );
    await expect(apply(group('typo', { models: ['cheap'], priceOverrides: { chepa: { inputPerMillion: '1' } } }))).rejects.toThrow(
      'spec.priceOverrides: Invalid value: "object": every key of priceOverrides must be one of models',
    );
    expect(await apply(group('priced', { models: ['cheap'], priceOverrides: { cheap: { inputPerMillion: '1' } } }))).toContain('created');
    // With a selector the members are known when the operator compiles: any key is admitted.
    expect(await apply(group('selected', { modelSelector: { matchLabels: { tier: 'a' } }, priceOverrides: { anything: { inputPerMillion: '1' } } }))).toContain(
      'created',
    );
  });

  it("an ApiKey's account is immutable (a transition rule); its other fields change", async () => {
    const key = (account: string, revoked = false) => ({
      apiVersion: 'tollgate.dev/v1alpha1',
      kind: 'ApiKey',
      metadata: { name: 'team' },
      spec: { group: 'priced', account, revoked },
    });
    expect(await apply(key('team-a'))).toContain('created');
    await expect(apply(key('team-b'))).rejects.toThrow('spec.account: Invalid value: "string": account is immutable: make a new ApiKey for another account');
    expect(await apply(key('team-a', true))).toContain('configured');
    expect(api.get('tollgate.dev/v1alpha1', 'apikeys', NS, 'team')!.spec).toMatchObject({ account: 'team-a', revoked: true });
    // Server-side apply and a dry run are judged the same way.
    await expect(apply(key('team-c'), '--server-side')).rejects.toThrow(/account is immutable/);
    await expect(apply(key('team-c'), '--dry-run=server')).rejects.toThrow(/account is immutable/);
  });

  it('@kubernetes/client-node gets 422 Invalid with the rule as a cause', async () => {
    const err = await custom
      .createNamespacedCustomObject({ group: 'tollgate.dev', version: 'v1alpha1', namespace: NS, plural: 'groups', body: group('bare', {}) })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiException);
    const e = err as ApiException<string>;
    expect(e.code).toBe(422);
    const status = JSON.parse(e.body) as { reason: string; message: string; details: { kind: string; causes: object[] } };
    expect(status).toMatchObject({
      reason: 'Invalid',
      message: 'Group.tollgate.dev "bare" is invalid: spec: Required value: name the models (models) or select them by label (modelSelector)',
      details: {
        kind: 'Group',
        causes: [{ reason: 'FieldValueRequired', field: 'spec', message: 'Required value: name the models (models) or select them by label (modelSelector)' }],
      },
    });
    // A merge patch is judged on the object it makes.
    const patched = await custom
      .patchNamespacedCustomObject(
        { group: 'tollgate.dev', version: 'v1alpha1', namespace: NS, plural: 'apikeys', name: 'team', body: { spec: { account: 'someone-else' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      )
      .catch((e: unknown) => e);
    expect((patched as ApiException<string>).code).toBe(422);
  });

  it('ratcheting: an object stored before a rule existed can still change elsewhere, not where the rule looks', async () => {
    // The CRD without its rules, a route the rules would refuse, then the CRD with its rules again.
    const crd = parseYaml(await readFile(join(root, 'crds/modelroutes.tollgate.dev.yaml'), 'utf8')) as Record<string, any>;
    const spec = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec;
    const rules = spec['x-kubernetes-validations'];
    delete spec['x-kubernetes-validations'];
    await writeFile(join(dir, 'crd-norules.yaml'), stringify(crd));
    await kubectl('apply', '--validate=false', '-f', join(dir, 'crd-norules.yaml'));
    expect(await apply(route('legacy', { type: 'chat', backends, pricing: { inputPerMillion: '1' } }))).toContain('created');
    expect(rules).toBeDefined();
    await kubectl('apply', '--validate=false', '-f', 'crds/modelroutes.tollgate.dev.yaml');

    expect(await kubectl('label', 'mr', 'legacy', 'tier=a')).toContain('labeled');
    await expect(kubectl('patch', 'mr', 'legacy', '--type', 'merge', '-p', '{"spec":{"pricing":{"inputPerMillion":"2"}}}')).rejects.toThrow(
      /spec\.pricing: Required value/,
    );
    expect(await kubectl('patch', 'mr', 'legacy', '--type', 'merge', '-p', '{"spec":{"pricing":{"outputPerMillion":"2"}}}')).toContain('patched');
  });

  it('a CRD whose rule does not compile is refused', async () => {
    const crd = parseYaml(await readFile(join(root, 'crds/groups.tollgate.dev.yaml'), 'utf8')) as Record<string, any>;
    crd.metadata.name = 'widgets.example.com';
    crd.spec.group = 'example.com';
    crd.spec.names = { kind: 'Widget', listKind: 'WidgetList', plural: 'widgets', singular: 'widget' };
    crd.spec.versions[0].schema.openAPIV3Schema.properties.spec['x-kubernetes-validations'] = [{ rule: 'has(self.models) ||', message: 'x' }];
    await writeFile(join(dir, 'bad-crd.yaml'), stringify(crd));
    await expect(kubectl('apply', '--validate=false', '-f', join(dir, 'bad-crd.yaml'))).rejects.toThrow(
      /The CustomResourceDefinition "widgets.example.com" is invalid: .*x-kubernetes-validations\[0\]\.rule: Invalid value: .*compilation failed/,
    );
    expect(api.get('apiextensions.k8s.io/v1', 'customresourcedefinitions', undefined, 'widgets.example.com')).toBeUndefined();
  });
});
