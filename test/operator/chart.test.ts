import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { startKubeApi } from '../kube-api/server.js';
import { k8sTools, type K8sTools } from '../support/k8s-tools.js';
import { ROOT } from './harness.js';
import { manifestErrors } from './k8s-schema.js';

/**
 * charts/tollgate with the real helm and kubectl (from the npm registry, test/support/k8s-tools.ts):
 * `helm lint --strict` and `helm template` over a matrix of values, every rendered object valid
 * for its kind (test/operator/k8s-schema.ts), and kubectl applying the output.
 */

const CHART = join(ROOT, 'charts/tollgate');
const run = promisify(execFile);
type Obj = Record<string, any>;

/** The values a user would pass, by case: every one must lint and render valid objects. */
export const MATRIX: Record<string, Obj> = {
  defaults: { discovery: { token: 'a-token' } },
  autoscaling: { discovery: { token: 't' }, proxy: { autoscaling: { enabled: true } } },
  'billing journal': { discovery: { token: 't' }, proxy: { billingJournal: { enabled: true } } },
  'billing commit on the path': { discovery: { token: 't' }, proxy: { billingJournal: { table: false } } },
  'node front': { discovery: { token: 't' }, proxy: { httpFront: 'node' } },
  'discovery TLS': { discovery: { token: 't', tls: { enabled: true, secretName: 'discovery-tls' } } },
  'existing secrets': { discovery: { existingSecret: 'my-discovery' }, proxy: { existingSecret: 'my-proxy' } },
  'LoadBalancer API': { discovery: { token: 't' }, proxy: { service: { type: 'LoadBalancer' } } },
  'network policy': { discovery: { token: 't' }, networkPolicy: { enabled: true, database: { to: [{ ipBlock: { cidr: '10.0.5.0/24' } }] } } },
  'Ingress and HTTPRoute': {
    discovery: { token: 't' },
    proxy: {
      ingress: { enabled: true, className: 'nginx', hosts: [{ host: 'gateway.example.com' }], tls: [{ secretName: 'gw-tls', hosts: ['gateway.example.com'] }] },
      httpRoute: { enabled: true, parentRefs: [{ name: 'public', namespace: 'gateway-system' }], hostnames: ['gateway.example.com'] },
    },
  },
  'monitoring on': {
    discovery: { token: 't' },
    monitoring: {
      podMonitor: { enabled: true, labels: { release: 'prom' } },
      prometheusRule: { enabled: true },
      dashboard: { enabled: true, folder: 'Gateways' },
    },
  },
  'CRDs as templates, private registry, scheduling': {
    discovery: { token: 't' },
    crds: { templates: true },
    image: { repository: 'registry.example.com/tollgate', digest: `sha256:${'ab'.repeat(32)}` },
    imagePullSecrets: [{ name: 'registry' }],
    proxy: {
      nodeSelector: { pool: 'gateway' },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'gateway', effect: 'NoSchedule' }],
      databaseSecret: 'tollgate-db-app',
      secretKeys: { databaseUrl: 'uri' },
    },
  },
};

let tools: K8sTools;
let dir: string;

async function valuesFile(values: Obj): Promise<string> {
  const file = join(dir, `values-${Math.random().toString(36).slice(2)}.yaml`);
  // JSON is YAML: numbers stay as written, so helm parses them as a user's values file.
  await writeFile(file, JSON.stringify(values));
  return file;
}

export async function helmTemplate(values: Obj, ...args: string[]): Promise<{ docs: Obj[]; text: string }> {
  const { stdout } = await run(tools.helm, ['template', 'tollgate', CHART, '--namespace', 'tollgate', '-f', await valuesFile(values), ...args], {
    maxBuffer: 16 << 20,
  });
  const docs = parseAllDocuments(stdout).map((d, i) => {
    expect(d.errors, `document ${i}`).toEqual([]);
    return d.toJS() as Obj | null;
  });
  return { docs: docs.filter((d): d is Obj => d !== null), text: stdout };
}

const byKind = (docs: Obj[], kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata.name === name);

beforeAll(async () => {
  tools = await k8sTools();
  dir = await mkdtemp(join(tmpdir(), 'tg-chart-'));
}, 300_000);
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('charts/tollgate with the real helm', () => {
  it('uses the helm and kubectl the npm package carries', async () => {
    expect((await run(tools.helm, ['version', '--short'])).stdout).toMatch(/^v4\./);
    expect((await run(tools.kubectl, ['version', '--client', '-o', 'json'])).stdout).toContain('"gitVersion": "v1.35');
  });

  it('ships the generated CRDs byte for byte', async () => {
    const generated = (await readdir(join(ROOT, 'crds'))).sort();
    expect((await readdir(join(CHART, 'crds'))).sort()).toEqual(generated);
    // npm run crds writes both folders.
    for (const f of generated)
      expect(await readFile(join(CHART, 'crds', f)), `${f} differs from crds/: run npm run crds`).toEqual(await readFile(join(ROOT, 'crds', f)));
  });

  for (const [name, values] of Object.entries(MATRIX)) {
    it(`${name}: helm lint --strict passes and every rendered object is valid for its kind`, async () => {
      const lint = await run(tools.helm, ['lint', '--strict', CHART, '--namespace', 'tollgate', '-f', await valuesFile(values)]);
      expect(lint.stdout).toContain('0 chart(s) failed');
      const { docs } = await helmTemplate(values);
      expect(docs.length).toBeGreaterThan(5);
      expect(docs.flatMap(manifestErrors)).toEqual([]);
    });
  }

  it('monitoring on: a PodMonitor for both admin and metrics ports, the alert rules and the dashboard as the files in the chart', async () => {
    const { docs } = await helmTemplate(MATRIX['monitoring on']!);
    const rule = byKind(docs, 'PrometheusRule', 'tollgate')!;
    const source = parse(await readFile(join(CHART, 'monitoring/rules.yaml'), 'utf8')) as Obj;
    expect(rule.spec.groups).toEqual(source.groups);
    const dash = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.labels?.grafana_dashboard === '1')!;
    expect(dash.metadata.annotations).toMatchObject({ grafana_folder: 'Gateways' });
    const json = Object.values(dash.data as Record<string, string>)[0]!;
    expect(JSON.parse(json)).toEqual(JSON.parse(await readFile(join(CHART, 'dashboards/tollgate.json'), 'utf8')));
    expect(docs.find((d) => d.kind === 'PodMonitor')!.metadata.labels).toMatchObject({ release: 'prom' });
  });

  it('defaults: an operator, RBAC, a proxy, the API Service and the admin port in its own ClusterIP Service', async () => {
    const { docs } = await helmTemplate(MATRIX.defaults!);
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`)).toEqual(
      expect.arrayContaining([
        'Deployment/tollgate-operator',
        'Deployment/tollgate-proxy',
        'Role/tollgate-operator',
        'RoleBinding/tollgate-operator',
        'Secret/tollgate-discovery',
        'Service/tollgate',
        'Service/tollgate-admin',
        'Service/tollgate-operator',
        'ServiceAccount/tollgate-operator',
      ]),
    );
    expect(Buffer.from(byKind(docs, 'Secret', 'tollgate-discovery')!.data.token, 'base64').toString()).toBe('a-token');
    const op = byKind(docs, 'Deployment', 'tollgate-operator')!.spec.template.spec.containers[0];
    expect(op.args).toEqual(['operator', '--namespace=tollgate', '--grpc-port=50051', '--metrics-port=9091', '--lease-name=tollgate-operator']);
    const proxy = byKind(docs, 'Deployment', 'tollgate-proxy')!;
    expect(proxy.spec.replicas).toBe(2);
    expect(proxy.spec.template.spec.containers[0].args).toContain('--config-from=grpc://tollgate-operator:50051');
    expect(proxy.spec.template.spec.containers[0].resources).toEqual({ requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } });
    expect(byKind(docs, 'Service', 'tollgate-operator')!.spec.ports[0]).toMatchObject({ name: 'grpc', port: 50051 });
  });

  it('hardened by default: restricted pod security, probes, a preStop delay, PDBs, spread, no token in proxies, checksums', async () => {
    const { docs } = await helmTemplate(MATRIX.defaults!);
    for (const name of ['tollgate-operator', 'tollgate-proxy']) {
      const d = byKind(docs, 'Deployment', name)!;
      const pod = d.spec.template.spec;
      const c = pod.containers[0];
      expect(pod.securityContext, name).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } });
      expect(c.securityContext, name).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      expect(c.startupProbe, name).toBeDefined();
      expect(pod.volumes.find((v: Obj) => v.name === 'tmp').emptyDir, name).toBeDefined();
      expect(
        pod.topologySpreadConstraints.map((t: Obj) => t.topologyKey),
        name,
      ).toEqual(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']);
      expect(d.spec.template.metadata.annotations['checksum/discovery'], name).toMatch(/^[a-f0-9]{64}$/);
      for (const o of [d, d.spec.template])
        expect(o.metadata.labels, name).toMatchObject({
          'app.kubernetes.io/managed-by': 'Helm',
          'helm.sh/chart': 'tollgate-0.1.0',
          'app.kubernetes.io/component': name.slice('tollgate-'.length),
        });
      expect(byKind(docs, 'PodDisruptionBudget', name)!.spec).toEqual({ maxUnavailable: 1, selector: d.spec.selector });
    }
    const proxy = byKind(docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec;
    expect(proxy).toMatchObject({ serviceAccountName: 'tollgate-proxy', automountServiceAccountToken: false });
    expect(proxy.containers[0].lifecycle).toEqual({ preStop: { sleep: { seconds: 5 } } });
    expect(byKind(docs, 'ServiceAccount', 'tollgate-proxy')!.automountServiceAccountToken).toBe(false);
    // Every object carries the chart's labels.
    for (const d of docs) expect(d.metadata.labels, `${d.kind}/${d.metadata.name}`).toMatchObject({ 'app.kubernetes.io/instance': 'tollgate' });
    // Nothing routes from outside by default.
    expect(docs.filter((d) => ['Ingress', 'HTTPRoute', 'NetworkPolicy', 'CustomResourceDefinition'].includes(d.kind))).toEqual([]);
    // A new discovery token rolls the pods.
    const other = await helmTemplate({ discovery: { token: 'another' } });
    expect(byKind(other.docs, 'Deployment', 'tollgate-proxy')!.spec.template.metadata.annotations['checksum/discovery']).not.toBe(
      byKind(docs, 'Deployment', 'tollgate-proxy')!.spec.template.metadata.annotations['checksum/discovery'],
    );
  });

  it('values.schema.json refuses wrong values before anything renders', async () => {
    await expect(helmTemplate({ discovery: { token: 't' }, proxy: { port: 'http' } })).rejects.toThrow(/\/proxy\/port/);
    await expect(helmTemplate({ discovery: { token: 't' }, proxy: { replica: 3 } })).rejects.toThrow(/additional properties 'replica'/);
    await expect(helmTemplate({ discovery: { token: 't' }, proxy: { service: { type: 'Public' } } })).rejects.toThrow(/\/proxy\/service\/type/);
  });

  it('network policy: the operator takes gRPC from proxies only and alone reaches the API server; proxies reach gRPC, DNS, the database and upstreams', async () => {
    const { docs } = await helmTemplate(MATRIX['network policy']!);
    const op = byKind(docs, 'NetworkPolicy', 'tollgate-operator')!.spec;
    expect(op.ingress[0]).toEqual({
      from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tollgate-proxy', 'app.kubernetes.io/instance': 'tollgate' } } }],
      ports: [{ port: 'grpc', protocol: 'TCP' }],
    });
    expect(op.egress[0].ports.map((p: Obj) => p.port)).toEqual([443, 6443]);
    const px = byKind(docs, 'NetworkPolicy', 'tollgate-proxy')!.spec;
    expect(px.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(px.egress[0].ports).toEqual([{ port: 50051, protocol: 'TCP' }]);
    expect(px.egress[2]).toEqual({
      to: [{ ipBlock: { cidr: '10.0.5.0/24' } }],
      ports: [
        { port: 5432, protocol: 'TCP' },
        { port: 6379, protocol: 'TCP' },
      ],
    });
    // No proxy rule reaches the API server's port 6443.
    expect(px.egress.flatMap((r: Obj) => r.ports ?? []).map((p: Obj) => p.port)).not.toContain(6443);
    // The admin port only from this namespace's pods by default.
    expect(px.ingress[1]).toEqual({ from: [{ podSelector: {} }], ports: [{ port: 'admin', protocol: 'TCP' }] });
  });

  it('Ingress and HTTPRoute route the API port only; CRDs as templates are kept on uninstall; images by digest with pull secrets', async () => {
    const { docs } = await helmTemplate(MATRIX['Ingress and HTTPRoute']!);
    const ing = byKind(docs, 'Ingress', 'tollgate')!.spec;
    expect(ing.rules[0].http.paths[0].backend).toEqual({ service: { name: 'tollgate', port: { name: 'http' } } });
    expect(byKind(docs, 'HTTPRoute', 'tollgate')!.spec.rules[0].backendRefs).toEqual([{ name: 'tollgate', port: 8080 }]);
    const other = (await helmTemplate(MATRIX['CRDs as templates, private registry, scheduling']!)).docs;
    const crds = other.filter((d) => d.kind === 'CustomResourceDefinition');
    expect(crds.map((d) => d.metadata.name).sort()).toEqual(['apikeys.tollgate.dev', 'groups.tollgate.dev', 'modelroutes.tollgate.dev']);
    for (const c of crds) expect(c.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
    const pod = byKind(other, 'Deployment', 'tollgate-proxy')!.spec.template.spec;
    expect(pod.containers[0].image).toBe(`registry.example.com/tollgate:0.1.0@sha256:${'ab'.repeat(32)}`);
    expect(pod.imagePullSecrets).toEqual([{ name: 'registry' }]);
    expect(pod.nodeSelector).toEqual({ pool: 'gateway' });
    // CloudNativePG's app Secret for the URL (examples/cluster/databases), the admin token from the chart's.
    expect(pod.containers[0].env.find((e: Obj) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef).toEqual({ name: 'tollgate-db-app', key: 'uri' });
    expect(pod.containers[0].env.find((e: Obj) => e.name === 'TOLLGATE_ADMIN_TOKEN').valueFrom.secretKeyRef).toEqual({
      name: 'tollgate-proxy',
      key: 'adminToken',
    });
  });

  it('the API Service never carries the admin port, whatever its type; the admin Service stays ClusterIP', async () => {
    const { docs } = await helmTemplate(MATRIX['LoadBalancer API']!);
    const api = byKind(docs, 'Service', 'tollgate')!;
    expect(api.spec.type).toBe('LoadBalancer');
    expect(api.spec.ports.map((p: Obj) => p.port)).toEqual([8080]);
    const admin = byKind(docs, 'Service', 'tollgate-admin')!;
    expect(admin.spec).toMatchObject({ type: 'ClusterIP', ports: [{ name: 'admin', port: 9090, targetPort: 'admin' }] });
  });

  it('a numeric token is a string; integers of a million stay integers; TLS without a Secret name is refused', async () => {
    const numeric = await helmTemplate({}, '--set', 'discovery.token=123456');
    expect(Buffer.from(byKind(numeric.docs, 'Secret', 'tollgate-discovery')!.data.token, 'base64').toString()).toBe('123456');
    const big = await helmTemplate({ discovery: { token: 't' }, proxy: { autoscaling: { enabled: true, maxReplicas: 1000000 } } });
    expect(big.text).not.toMatch(/e\+0\d/);
    expect(byKind(big.docs, 'HorizontalPodAutoscaler', 'tollgate-proxy')!.spec.maxReplicas).toBe(1000000);
    await expect(helmTemplate({ discovery: { token: 't', tls: { enabled: true } } })).rejects.toThrow(/discovery\.tls\.secretName/);
  });

  it('with TLS and autoscaling: grpcs:// with the CA, TLS flags on the operator, an HPA instead of fixed replicas', async () => {
    const { docs } = await helmTemplate({
      discovery: { existingSecret: 'my-discovery', tls: { enabled: true, secretName: 'discovery-tls' } },
      proxy: { autoscaling: { enabled: true } },
    });
    expect(byKind(docs, 'Secret', 'tollgate-discovery')).toBeUndefined();
    const op = byKind(docs, 'Deployment', 'tollgate-operator')!.spec.template.spec;
    expect(op.containers[0].args).toEqual(expect.arrayContaining(['--tls-cert=/etc/tollgate/tls/tls.crt', '--tls-key=/etc/tollgate/tls/tls.key']));
    expect(op.containers[0].env.find((e: { name: string }) => e.name === 'TOLLGATE_DISCOVERY_TOKEN').valueFrom.secretKeyRef.name).toBe('my-discovery');
    expect(op.volumes.find((v: Obj) => v.name === 'tls').secret.secretName).toBe('discovery-tls');
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
    const { docs } = await helmTemplate({
      discovery: { token: 't', tls: { enabled: true, secretName: 'discovery-tls' } },
      proxy: { billingJournal: { enabled: true } },
    });
    const pod = byKind(docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec;
    const c = pod.containers[0];
    expect(c.env).toContainEqual({ name: 'TOLLGATE_BILLING_JOURNAL_DIR', value: '/var/lib/tollgate/billing-journal' });
    expect(c.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'tls', mountPath: '/etc/tollgate/tls', readOnly: true },
        { name: 'billing-journal', mountPath: '/var/lib/tollgate/billing-journal' },
      ]),
    );
    expect(pod.volumes.find((v: Obj) => v.name === 'billing-journal').emptyDir).toEqual({ sizeLimit: '1Gi' });
    const off = byKind((await helmTemplate(MATRIX.defaults!)).docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec;
    expect((off.volumes ?? []).map((v: Obj) => v.name)).not.toContain('billing-journal');
    expect(off.containers[0].env.map((e: { name: string }) => e.name)).not.toContain('TOLLGATE_BILLING_JOURNAL_DIR');
  });

  it('proxy.httpFront: the lean front by default, node:http when asked, nothing else', async () => {
    const envOf = async (values: Obj) =>
      byKind((await helmTemplate(values)).docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec.containers[0].env as { name: string; value?: string }[];
    expect((await envOf(MATRIX.defaults!)).map((e) => e.name)).not.toContain('TOLLGATE_HTTP_FRONT');
    expect(await envOf(MATRIX['node front']!)).toContainEqual({ name: 'TOLLGATE_HTTP_FRONT', value: 'node' });
    await expect(helmTemplate({ discovery: { token: 't' }, proxy: { httpFront: 'uws' } })).rejects.toThrow(/\/proxy\/httpFront/);
  });

  it("the journal table is the gateway's own default; false commits on the path; both journals at once do not render", async () => {
    const envOf = async (values: Obj) =>
      byKind((await helmTemplate(values)).docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec.containers[0].env as { name: string; value?: string }[];
    // Unset: the gateway picks the table on PostgreSQL (unless a directory is set).
    expect((await envOf(MATRIX.defaults!)).map((e) => e.name)).not.toContain('TOLLGATE_BILLING_JOURNAL_TABLE');
    const onPath = byKind((await helmTemplate(MATRIX['billing commit on the path']!)).docs, 'Deployment', 'tollgate-proxy')!.spec.template.spec;
    expect(onPath.containers[0].env).toContainEqual({ name: 'TOLLGATE_BILLING_JOURNAL_TABLE', value: 'false' });
    expect((onPath.volumes ?? []).map((v: Obj) => v.name)).not.toContain('billing-journal');
    expect(await envOf({ discovery: { token: 't' }, proxy: { billingJournal: { table: true } } })).toContainEqual({
      name: 'TOLLGATE_BILLING_JOURNAL_TABLE',
      value: 'true',
    });
    const dir = (await envOf({ discovery: { token: 't' }, proxy: { billingJournal: { enabled: true } } })).map((e) => e.name);
    expect(dir).toContain('TOLLGATE_BILLING_JOURNAL_DIR');
    expect(dir).not.toContain('TOLLGATE_BILLING_JOURNAL_TABLE');
    await expect(helmTemplate({ discovery: { token: 't' }, proxy: { billingJournal: { enabled: true, table: true } } })).rejects.toThrow(
      /two journals; set one/,
    );
  });

  it('refuses to render without a discovery token or an existing Secret', async () => {
    await expect(helmTemplate({})).rejects.toThrow(/discovery.token or discovery.existingSecret/);
  });

  it('kubectl applies the CRDs and the rendered chart to the kube-API test server', async () => {
    const api = await startKubeApi();
    try {
      const file = join(dir, 'rendered.yaml');
      await writeFile(file, (await helmTemplate(MATRIX.defaults!)).text);
      const kubectl = async (...args: string[]) =>
        (await run(tools.kubectl, [`--server=${api.url}`, '--cache-dir', join(dir, 'cache'), ...args], { cwd: ROOT })).stdout;
      await kubectl('apply', '--validate=false', '-f', 'charts/tollgate/crds/');
      await kubectl('apply', '--validate=false', '-f', 'examples/cluster/00-namespace.yaml');
      const out = await kubectl('apply', '--validate=false', '-n', 'tollgate', '-f', file);
      expect(out).toContain('deployment.apps/tollgate-operator created');
      expect(out).toContain('rolebinding.rbac.authorization.k8s.io/tollgate-operator created');
      expect(out).toContain('service/tollgate-admin created');
      expect(out).toContain('poddisruptionbudget.policy/tollgate-proxy created');
      // Applied again: nothing changes. (kubectl re-sends a PDB's selector every time, its patch
      // strategy being replace, and says "configured" as against a real API server.)
      const rv = api.resourceVersion();
      const again = await kubectl('apply', '--validate=false', '-n', 'tollgate', '-f', file);
      expect(again.split('\n').filter((l) => /created|configured/.test(l) && !l.startsWith('poddisruptionbudget'))).toEqual([]);
      expect(api.resourceVersion()).toBe(rv);
      expect(parse(await kubectl('get', '-n', 'tollgate', 'deployment', 'tollgate-proxy', '-o', 'yaml')).spec.template.spec.containers[0].image).toBe(
        'tollgate:0.1.0',
      );
    } finally {
      await api.close();
    }
  });
});

describe('helm install, upgrade and rollback against the kube-API test server', () => {
  it('installs the chart (CRDs, objects, the protobuf release Secret), upgrades it and rolls it back', async () => {
    const api = await startKubeApi();
    try {
      const kubeconfig = await api.kubeconfig(join(dir, 'helm-kubeconfig'), 'tollgate');
      const env = {
        ...process.env,
        KUBECONFIG: kubeconfig,
        HELM_CACHE_HOME: join(dir, 'helm/cache'),
        HELM_CONFIG_HOME: join(dir, 'helm/config'),
        HELM_DATA_HOME: join(dir, 'helm/data'),
      };
      const helm = async (...args: string[]) => (await run(tools.helm, args, { env, cwd: ROOT, maxBuffer: 16 << 20 })).stdout;
      await run(tools.kubectl, ['--kubeconfig', kubeconfig, 'apply', '--validate=false', '-f', 'examples/cluster/00-namespace.yaml'], { cwd: ROOT });
      const deployment = () => api.get('apps/v1', 'deployments', 'tollgate', 'tollgate-proxy')!;
      // The test server serves no OpenAPI document, which helm would validate against.
      const common = ['-n', 'tollgate', '--disable-openapi-validation'];

      const installed = await helm('install', 'tollgate', 'charts/tollgate', ...common, '--set', 'discovery.token=t');
      expect(installed).toContain('STATUS: deployed');
      // The notes say how to reach the admin port (never public) and call the API with a minted key.
      expect(installed).toContain('kubectl -n tollgate port-forward svc/tollgate-admin 9090');
      expect(installed).toContain("get secret tollgate-proxy -o jsonpath='{.data.adminToken}'");
      expect(installed).toContain('/v1/chat/completions -H "Authorization: Bearer $KEY"');
      expect(api.get('apiextensions.k8s.io/v1', 'customresourcedefinitions', undefined, 'modelroutes.tollgate.dev')).toBeDefined();
      expect(deployment().spec.replicas).toBe(2);
      const release = api.get('v1', 'secrets', 'tollgate', 'sh.helm.release.v1.tollgate.v1')!;
      expect(release).toMatchObject({ type: 'helm.sh/release.v1', metadata: { labels: { owner: 'helm', name: 'tollgate', status: 'deployed' } } });

      await helm('upgrade', 'tollgate', 'charts/tollgate', ...common, '--set', 'discovery.token=t', '--set', 'proxy.replicas=3', '--set', 'image.tag=0.2.0');
      const upgraded = deployment().spec.template.spec.containers[0];
      expect(deployment().spec.replicas).toBe(3);
      expect(upgraded.image).toBe('tollgate:0.2.0');
      // Merged by key, not replaced: env, ports and probes are all still there.
      expect(upgraded.env.map((e: Obj) => e.name)).toEqual(['POD_NAME', 'TOLLGATE_DISCOVERY_TOKEN', 'DATABASE_URL', 'REDIS_URL', 'TOLLGATE_ADMIN_TOKEN']);
      expect(upgraded.ports.map((p: Obj) => p.name)).toEqual(['http', 'admin']);
      expect(upgraded.startupProbe).toBeDefined();

      await helm('rollback', 'tollgate', '1', '-n', 'tollgate');
      expect(deployment().spec.replicas).toBe(2);
      expect(deployment().spec.template.spec.containers[0].image).toBe('tollgate:0.1.0');
      const history = await helm('history', 'tollgate', '-n', 'tollgate', '-o', 'json');
      expect((JSON.parse(history) as { revision: number; status: string }[]).map((r) => [r.revision, r.status])).toEqual([
        [1, 'superseded'],
        [2, 'superseded'],
        [3, 'deployed'],
      ]);
    } finally {
      await api.close();
    }
  });
});
