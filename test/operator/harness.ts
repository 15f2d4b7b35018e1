import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import OpenAI from 'openai';
import { parse as parseYaml } from 'yaml';
import { MICRO } from '../../api/snapshot/money.js';
import { KIND_INFO, type Kind } from '../../api/v1alpha1/index.js';
import { Operator, type OperatorOptions } from '../../operator/operator.js';
import { credit } from '../../proxy/billing/ledger.js';
import { GrpcConfigSource } from '../../proxy/config/grpc-source.js';
import { defaultBilling, defaultFeatures } from '../../proxy/front/features.js';
import { startGateway, type Gateway } from '../../proxy/front/gateway.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { startKubeApi, type KubeApi } from '../kube-api/server.js';

/**
 * The cluster scenarios' parts, all real and in this process: the kube-API test server on an
 * ephemeral port with the generated CRDs applied, the operator talking to it with
 * @kubernetes/client-node, the simulator, and gateways fed by the gRPC config source.
 */

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const NS = 'tollgate';
export const TOKEN = 'test-discovery-token';
/** The account every test ApiKey pays from. */
export const ACCOUNT = 'demo';
export const GROUP = 'tollgate.dev';
export const VERSION = 'v1alpha1';

export interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

/** A logger that keeps JSON lines, so tests can read them and search them for secrets. */
export function memoryLog(base: Record<string, unknown> = {}, sink: LogLine[] = []) {
  const write = (level: string) => (msg: string, fields?: Record<string, unknown>) =>
    void sink.push(JSON.parse(JSON.stringify({ time: Date.now(), level, msg, ...base, ...fields })) as LogLine);
  const log = {
    lines: sink,
    info: write('info'),
    warn: write('warn'),
    error: write('error'),
    child: (f: Record<string, unknown>) => memoryLog({ ...base, ...f }, sink),
  };
  return log;
}

export function kubeConfigFor(url: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // client-node refuses plain HTTP unless TLS verification is off; there is no TLS to verify.
    clusters: [{ name: 'test', server: url, skipTLSVerify: url.startsWith('http:') }],
    users: [{ name: 'test' }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test', namespace: NS }],
    currentContext: 'test',
  });
  return kc;
}

export interface Cluster {
  api: KubeApi;
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  /** Creates, or merge-patches when it exists (what `kubectl apply` amounts to here). */
  apply(obj: { kind: string; metadata: { name: string }; [k: string]: unknown }): Promise<void>;
  patch(kind: Kind, name: string, body: object): Promise<void>;
  remove(kind: Kind, name: string): Promise<void>;
  get(kind: Kind, name: string): Record<string, any> | undefined;
  close(): Promise<void>;
}

/** `crds: false` / `namespace: false` leave those to the test (kubectl applies them). */
export async function startCluster(opts: { historySize?: number; crds?: boolean; namespace?: boolean } = {}): Promise<Cluster> {
  const api = await startKubeApi({ historySize: opts.historySize });
  const kc = kubeConfigFor(api.url);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  const crdDir = join(ROOT, 'crds');
  for (const f of opts.crds === false ? [] : (await readdir(crdDir)).filter((x) => x.endsWith('.yaml')).sort()) {
    await ext.createCustomResourceDefinition({ body: parseYaml(await readFile(join(crdDir, f), 'utf8')) as V1CustomResourceDefinition });
  }
  if (opts.namespace !== false) await core.createNamespace({ body: { metadata: { name: NS } } });
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const plural = (kind: Kind) => KIND_INFO[kind].plural;
  const cluster: Cluster = {
    api,
    kc,
    core,
    custom,
    async apply(obj) {
      if (obj.kind === 'Secret') {
        const exists = api.get('v1', 'secrets', NS, obj.metadata.name);
        if (exists) await core.patchNamespacedSecret({ name: obj.metadata.name, namespace: NS, body: obj }, merge);
        else await core.createNamespacedSecret({ namespace: NS, body: obj });
        return;
      }
      const kind = obj.kind as Kind;
      if (cluster.get(kind, obj.metadata.name)) await cluster.patch(kind, obj.metadata.name, obj);
      else await custom.createNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: plural(kind), body: obj });
    },
    async patch(kind, name, body) {
      await custom.patchNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: plural(kind), name, body }, merge);
    },
    async remove(kind, name) {
      await custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: NS, plural: plural(kind), name });
    },
    get: (kind, name) => api.get(`${GROUP}/${VERSION}`, plural(kind), NS, name),
    close: () => api.close(),
  };
  return cluster;
}

export type TestOperator = Operator & { grpcPort: number; metricsPort?: number; logs: ReturnType<typeof memoryLog> };

export async function startOperator(cluster: Cluster, identity: string, opts: Partial<OperatorOptions> & { grpcPort?: number } = {}): Promise<TestOperator> {
  const log = memoryLog({ operator: identity });
  const op = new Operator({
    kubeConfig: cluster.kc,
    namespace: NS,
    grpcPort: 0,
    grpcHost: '127.0.0.1',
    metricsPort: null,
    token: TOKEN,
    debounceMs: 10,
    lease: { identity, durationMs: 1500, retryMs: 100 },
    log,
    ...opts,
  });
  const ports = await op.start();
  return Object.assign(op, { grpcPort: ports.grpcPort, metricsPort: ports.metricsPort, logs: log });
}

export interface Proxy {
  gw: Gateway;
  source: GrpcConfigSource;
  log: ReturnType<typeof memoryLog>;
  client(key: string): OpenAI;
  close(): Promise<void>;
}

export async function startProxy(grpcPort: number, nodeId = 'proxy-0'): Promise<Proxy> {
  const log = memoryLog({ proxy: nodeId });
  const source = new GrpcConfigSource({ url: `grpc://127.0.0.1:${grpcPort}`, token: TOKEN, nodeId, log, backoff: { initialMs: 20, maxMs: 200 } });
  const gw = await startGateway({
    source,
    port: 0,
    adminPort: 0,
    adminToken: 'test-admin',
    log,
    billing: defaultBilling,
    features: defaultFeatures,
  });
  // Chat is metered: the account the test keys pay from starts with credits, once per store.
  await gw.deps.store.tx((q) => credit(q, { account: ACCOUNT, operationId: `test-grant-${nodeId}`, amount: 1000n * MICRO }));
  return {
    gw,
    source,
    log,
    client: (key) => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 }),
    close: () => gw.close(),
  };
}

export { startSimulator, type Simulator };

export async function waitFor<T>(fn: () => T | Promise<T>, what: string, ms = 10_000): Promise<NonNullable<T>> {
  const end = performance.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The Ready condition of a Tollgate resource, as stored in the cluster. */
export function ready(
  cluster: Cluster,
  kind: Kind,
  name: string,
): { status: string; reason: string; message: string; observedGeneration?: number } | undefined {
  return (cluster.get(kind, name)?.status?.conditions as { type: string; status: string; reason: string; message: string }[] | undefined)?.find(
    (c) => c.type === 'Ready',
  );
}

// ---------- manifests ----------

export const API_VERSION = `${GROUP}/${VERSION}`;

export function secret(name: string, data: Record<string, string>) {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: data };
}

export function modelRoute(name: string, simUrl: string, spec: Record<string, unknown> = {}) {
  return {
    apiVersion: API_VERSION,
    kind: 'ModelRoute',
    metadata: { name },
    spec: {
      type: 'chat',
      backends: [{ provider: 'openai', baseURL: `${simUrl}/v1`, model: 'gpt-sim', credentials: { secretRef: { name: 'upstream', key: 'apiKey' } } }],
      pricing: { inputPerMillion: '0.50', outputPerMillion: '1.50' },
      ...spec,
    },
  };
}

/** A Group manifest: the same one the other suites build. */
export { group as groupOf } from '../support/resources.js';

export function apiKeyOf(name: string, spec: Record<string, unknown>) {
  return { apiVersion: API_VERSION, kind: 'ApiKey', metadata: { name }, spec: { group: 'default', account: ACCOUNT, ...spec } };
}
