import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { startKubeApi } from '../kube-api/server.js';
import { ROOT } from './harness.js';
import { HelmLite, type Context } from './helm-lite.js';

/**
 * charts/tollgate without a helm binary: its CRDs are the generated ones byte for byte, its
 * values parse, every template renders (helm-lite: the subset the chart uses) into valid
 * manifests that read only values that exist, and kubectl applies the result.
 */

const CHART = join(ROOT, 'charts/tollgate');
const KUBECTL = process.env.KUBECTL ?? '/usr/bin/kubectl';

async function render(overrides: (v: Record<string, any>) => void): Promise<{ docs: Record<string, any>[]; text: string; helm: HelmLite }> {
  const values = parse(await readFile(join(CHART, 'values.yaml'), 'utf8')) as Record<string, any>;
  overrides(values);
  const chart = parse(await readFile(join(CHART, 'Chart.yaml'), 'utf8')) as { name: string; version: string; appVersion: string };
  const ctx: Context = {
    Values: values,
    Release: { Name: 'tollgate', Namespace: 'tollgate' },
    Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
  };
  const helm = new HelmLite();
  helm.addHelpers(await readFile(join(CHART, 'templates/_helpers.tpl'), 'utf8'));
  const parts: string[] = [];
  for (const f of (await readdir(join(CHART, 'templates'))).filter((x) => x.endsWith('.yaml')).sort()) {
    parts.push(`# ${f}\n${helm.render(await readFile(join(CHART, 'templates', f), 'utf8'), ctx)}`);
  }
  const text = parts.join('\n---\n');
  const docs = parseAllDocuments(text).map((d, i) => {
    expect(d.errors, `document ${i}`).toEqual([]);
    return d.toJS() as Record<string, any> | null;
  });
  return { docs: docs.filter((d): d is Record<string, any> => d !== null), text, helm };
}

const byKind = (docs: Record<string, any>[], kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata.name === name);

describe('charts/tollgate', () => {
  it('ships the generated CRDs byte for byte', async () => {
    const generated = (await readdir(join(ROOT, 'crds'))).sort();
    expect((await readdir(join(CHART, 'crds'))).sort()).toEqual(generated);
    // npm run crds writes both folders.
    for (const f of generated)
      expect(await readFile(join(CHART, 'crds', f)), `${f} differs from crds/: run npm run crds`).toEqual(await readFile(join(ROOT, 'crds', f)));
  });

  it('Chart.yaml and values.yaml parse; the defaults render to an operator, RBAC, a proxy and their Services', async () => {
    const chart = parse(await readFile(join(CHART, 'Chart.yaml'), 'utf8')) as Record<string, string>;
    expect(chart).toMatchObject({ apiVersion: 'v2', name: 'tollgate' });
    expect(chart.version).toMatch(/^\d+\.\d+\.\d+$/);

    const { docs, helm } = await render((v) => (v.discovery.token = 'a-token'));
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`).sort()).toEqual([
      'Deployment/tollgate-operator',
      'Deployment/tollgate-proxy',
      'Role/tollgate-operator',
      'RoleBinding/tollgate-operator',
      'Secret/tollgate-discovery',
      'Service/tollgate',
      'Service/tollgate-operator',
      'ServiceAccount/tollgate-operator',
    ]);
    const values = parse(await readFile(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
    for (const p of helm.valuePaths) {
      const v = p.split('.').reduce<any>((c, k) => c?.[k], values);
      expect(v, `.Values.${p} is read by a template but missing from values.yaml`).not.toBeUndefined();
    }
    expect(Buffer.from(byKind(docs, 'Secret', 'tollgate-discovery')!.data.token, 'base64').toString()).toBe('a-token');
    const op = byKind(docs, 'Deployment', 'tollgate-operator')!.spec.template.spec.containers[0];
    expect(op.args).toEqual(['operator', '--namespace=tollgate', '--grpc-port=50051', '--metrics-port=9091', '--lease-name=tollgate-operator']);
    const proxy = byKind(docs, 'Deployment', 'tollgate-proxy')!;
    expect(proxy.spec.replicas).toBe(2);
    expect(proxy.spec.template.spec.containers[0].args).toContain('--config-from=grpc://tollgate-operator:50051');
    expect(proxy.spec.template.spec.containers[0].resources).toEqual({ requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } });
    expect(byKind(docs, 'Service', 'tollgate-operator')!.spec.ports[0]).toMatchObject({ name: 'grpc', port: 50051 });
  });

  it('with TLS and autoscaling: grpcs:// with the CA, TLS flags on the operator, an HPA instead of fixed replicas', async () => {
    const { docs } = await render((v) => {
      v.discovery.existingSecret = 'my-discovery';
      v.discovery.tls = { enabled: true, secretName: 'discovery-tls' };
      v.proxy.autoscaling.enabled = true;
    });
    expect(byKind(docs, 'Secret', 'tollgate-discovery')).toBeUndefined();
    const op = byKind(docs, 'Deployment', 'tollgate-operator')!.spec.template.spec;
    expect(op.containers[0].args).toEqual(expect.arrayContaining(['--tls-cert=/etc/tollgate/tls/tls.crt', '--tls-key=/etc/tollgate/tls/tls.key']));
    expect(op.containers[0].env.find((e: { name: string }) => e.name === 'TOLLGATE_DISCOVERY_TOKEN').valueFrom.secretKeyRef.name).toBe('my-discovery');
    expect(op.volumes[0].secret.secretName).toBe('discovery-tls');
    const proxy = byKind(docs, 'Deployment', 'tollgate-proxy')!;
    expect(proxy.spec.replicas).toBeUndefined();
    expect(proxy.spec.template.spec.containers[0].args).toEqual(
      expect.arrayContaining(['--config-from=grpcs://tollgate-operator:50051', '--discovery-ca=/etc/tollgate/tls/ca.crt']),
    );
    expect(byKind(docs, 'HorizontalPodAutoscaler', 'tollgate-proxy')!.spec).toMatchObject({
      minReplicas: 2,
      maxReplicas: 10,
      scaleTargetRef: { name: 'tollgate-proxy' },
    });
  });

  it('with the billing journal: the proxy gets its directory from an emptyDir volume, next to the TLS CA when both are on', async () => {
    const { docs } = await render((v) => {
      v.discovery.token = 't';
      v.discovery.tls = { enabled: true, secretName: 'discovery-tls' };
      v.proxy.billingJournal.enabled = true;
    });
    const pod = byKind(docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec;
    const c = pod.containers[0];
    expect(c.env).toContainEqual({ name: 'TOLLGATE_BILLING_JOURNAL_DIR', value: '/var/lib/tollgate/billing-journal' });
    expect(c.volumeMounts).toEqual([
      { name: 'tls', mountPath: '/etc/tollgate/tls', readOnly: true },
      { name: 'billing-journal', mountPath: '/var/lib/tollgate/billing-journal' },
    ]);
    expect(pod.volumes.map((v: { name: string }) => v.name)).toEqual(['tls', 'billing-journal']);
    expect(pod.volumes[1].emptyDir).toEqual({ sizeLimit: '1Gi' });
    const off = byKind((await render((v) => (v.discovery.token = 't'))).docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec;
    expect(off.volumes).toBeUndefined();
    expect(off.containers[0].env.map((e: { name: string }) => e.name)).not.toContain('TOLLGATE_BILLING_JOURNAL_DIR');
  });

  it('refuses to render without a discovery token or an existing Secret', async () => {
    await expect(render(() => {})).rejects.toThrow(/discovery.token or discovery.existingSecret/);
  });

  it.skipIf(!existsSync(KUBECTL))('kubectl applies the CRDs and the rendered chart', async () => {
    const api = await startKubeApi();
    try {
      const dir = await mkdtemp(join(tmpdir(), 'tg-chart-'));
      const file = join(dir, 'rendered.yaml');
      await writeFile(file, (await render((v) => (v.discovery.token = 't'))).text);
      const kubectl = async (...args: string[]) =>
        (await promisify(execFile)(KUBECTL, [`--server=${api.url}`, '--cache-dir', join(dir, 'cache'), ...args], { cwd: ROOT })).stdout;
      await kubectl('apply', '--validate=false', '-f', 'charts/tollgate/crds/');
      await kubectl('apply', '--validate=false', '-f', 'examples/cluster/00-namespace.yaml');
      const out = await kubectl('apply', '--validate=false', '-n', 'tollgate', '-f', file);
      expect(out).toContain('deployment.apps/tollgate-operator created');
      expect(out).toContain('rolebinding.rbac.authorization.k8s.io/tollgate-operator created');
    } finally {
      await api.close();
    }
  });
});
