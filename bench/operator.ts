/**
 * `npx tsx bench/operator.ts`: how fast a change made with the Kubernetes API reaches a proxy,
 * and what a snapshot costs as keys grow. Rewrites the "## Operator" section of bench/RESULTS.md.
 *
 * 1. Propagation: the kube-API test server (its own process, as `npm run kube-api` runs it), the
 *    operator in this process, one proxy-side GrpcConfigSource. Each round patches a ModelRoute's
 *    price and times until the source has swapped in the snapshot carrying it.
 * 2. Snapshot cost: compile() of N ApiKeys (+ a route and a group), encoded size, and the proxy's
 *    decode + check + runtime build, for N in BENCH_KEYS.
 *
 * Settings (environment): BENCH_ROUNDS (default 50), BENCH_DEBOUNCE_MS (default "10,50"),
 * BENCH_KEYS (default "1000,10000,50000").
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  ApiextensionsV1Api,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { decodeSnapshot, encodeSnapshot } from '../api/snapshot/discovery.js';
import { compile, type RawResource } from '../api/snapshot/index.js';
import { Operator } from '../operator/operator.js';
import { acceptSnapshot, GrpcConfigSource } from '../proxy/config/grpc-source.js';
import { RuntimeConfig } from '../proxy/config/runtime.js';
import { publish } from './results.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SECTION = '## Operator';
const rounds = Number(process.env.BENCH_ROUNDS ?? 50);
const debounces = (process.env.BENCH_DEBOUNCE_MS ?? '10,50').split(',').map(Number);
const keyCounts = (process.env.BENCH_KEYS ?? '1000,10000,50000').split(',').map(Number);
const silent = { info() {}, warn() {}, error() {}, child: () => silent };

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function startKubeApiProcess(): Promise<{ url: string; stop(): void }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/kube-api/main.ts', '--port', '0'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stderr!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(buf);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`kube-api exited with ${code}`)));
  });
  return { url, stop: () => child.kill('SIGTERM') };
}

async function propagation(debounceMs: number): Promise<{ p50: number; p99: number; max: number }> {
  const kube = await startKubeApiProcess();
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: kube.url, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  for (const f of ['apikeys', 'groups', 'modelroutes']) {
    await ext.createCustomResourceDefinition({ body: parseYaml(readFileSync(`${ROOT}crds/${f}.tollgate.dev.yaml`, 'utf8')) as V1CustomResourceDefinition });
  }
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  await core.createNamespace({ body: { metadata: { name: 'bench' } } });
  const cr = (plural: string, body: object) =>
    custom.createNamespacedCustomObject({ group: 'tollgate.dev', version: 'v1alpha1', namespace: 'bench', plural, body });
  await cr('modelroutes', {
    apiVersion: 'tollgate.dev/v1alpha1',
    kind: 'ModelRoute',
    metadata: { name: 'm' },
    spec: { type: 'chat', backends: [{ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1' }], pricing: { inputPerMillion: '1', outputPerMillion: '1' } },
  });
  await cr('groups', { apiVersion: 'tollgate.dev/v1alpha1', kind: 'Group', metadata: { name: 'g' }, spec: { models: ['m'] } });
  const op = new Operator({
    kubeConfig: kc,
    namespace: 'bench',
    grpcPort: 0,
    grpcHost: '127.0.0.1',
    metricsPort: null,
    debounceMs,
    lease: { identity: 'bench', retryMs: 200 },
    log: silent,
  });
  const { grpcPort } = await op.start();
  const source = new GrpcConfigSource({ url: `grpc://127.0.0.1:${grpcPort}`, log: silent, nodeId: 'bench' });
  let waiting: { price: string; resolve: () => void } | undefined;
  source.onUpdate((c) => {
    if (waiting && c.groups.g?.models.m?.inputPerMillion === waiting.price) waiting.resolve();
  });
  await source.start();
  while (!source.current()?.groups.g) await new Promise((r) => setTimeout(r, 20));
  const times: number[] = [];
  for (let i = 0; i < rounds + 3; i++) {
    const credits = `${i + 2}`;
    const arrived = new Promise<void>((resolve) => (waiting = { price: String(BigInt(credits) * 1_000_000n), resolve }));
    const t0 = performance.now();
    await custom.patchNamespacedCustomObject(
      {
        group: 'tollgate.dev',
        version: 'v1alpha1',
        namespace: 'bench',
        plural: 'modelroutes',
        name: 'm',
        body: { spec: { pricing: { inputPerMillion: credits } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await arrived;
    if (i >= 3) times.push(performance.now() - t0); // the first rounds warm the paths up
    await op.idle();
  }
  await source.stop();
  await op.stop();
  kube.stop();
  return { p50: pct(times, 50), p99: pct(times, 99), max: Math.max(...times) };
}

function snapshotCost(keys: number) {
  const resources: RawResource[] = [
    {
      object: {
        apiVersion: 'tollgate.dev/v1alpha1',
        kind: 'ModelRoute',
        metadata: { name: 'm' },
        spec: { type: 'chat', backends: [{ provider: 'openai', baseURL: 'http://127.0.0.1:1/v1' }], pricing: { inputPerMillion: '1', outputPerMillion: '1' } },
      },
    },
    { object: { apiVersion: 'tollgate.dev/v1alpha1', kind: 'Group', metadata: { name: 'g' }, spec: { models: ['m'] } } },
  ];
  for (let i = 0; i < keys; i++) {
    const hash = createHash('sha256').update(`sk-service-bench-${i}`).digest('hex');
    resources.push({
      object: {
        apiVersion: 'tollgate.dev/v1alpha1',
        kind: 'ApiKey',
        metadata: { name: `key-${i}` },
        spec: { group: 'g', account: `account-${i % 100}`, keyHash: `sha256:${hash}` },
      },
    });
  }
  let t = performance.now();
  const { config, errors } = compile(resources, { cluster: true });
  const compileMs = performance.now() - t;
  if (errors.length) throw new Error(JSON.stringify(errors[0]));
  t = performance.now();
  const bytes = encodeSnapshot(config);
  const encodeMs = performance.now() - t;
  t = performance.now();
  const checked = acceptSnapshot({ version_info: config.version, nonce: 'n', config_json: bytes });
  if ('error' in checked) throw new Error(checked.error);
  const acceptMs = performance.now() - t;
  t = performance.now();
  decodeSnapshot(bytes);
  const decodeMs = performance.now() - t;
  t = performance.now();
  new RuntimeConfig(checked.config);
  const runtimeMs = performance.now() - t;
  return { keys, compileMs, encodeMs, bytes: bytes.length, acceptMs, decodeMs, runtimeMs };
}

const f = (n: number) => n.toFixed(1);
const lines: string[] = [];
lines.push(SECTION, '');
lines.push(
  `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npx tsx bench/operator.ts\` on ${cpus().length} × ${cpus()[0]?.model.split(' ').slice(0, 2).join(' ') ?? 'CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}; the machine is shared, so read the figures as orders of magnitude.`,
  '',
);
lines.push(`### Change -> proxy (${rounds} price patches, one after another)`, '');
lines.push(
  'From sending the PATCH to the kube-API test server (own process) until a proxy-side config source has swapped in the snapshot with the new price: watch event, debounce, compile, gRPC push, check, swap.',
  '',
);
lines.push('| debounce ms | p50 ms | p99 ms | max ms |', '|---:|---:|---:|---:|');
for (const d of debounces) {
  const r = await propagation(d);
  lines.push(`| ${d} | ${f(r.p50)} | ${f(r.p99)} | ${f(r.max)} |`);
  process.stderr.write(`debounce ${d}: p50 ${f(r.p50)} ms p99 ${f(r.p99)} ms\n`);
}
lines.push('', '### Snapshot cost by number of keys', '');
lines.push(
  'Operator: compile (every resource parsed and checked) and encode. Proxy: decode and check (content hash), and the whole accept (check + runtime build) before a swap.',
  '',
);
lines.push(
  '| keys | compile ms | encode ms | snapshot KiB | proxy decode+hash ms | proxy accept ms | runtime build ms |',
  '|---:|---:|---:|---:|---:|---:|---:|',
);
snapshotCost(500); // warm-up: the first pass pays for JIT compilation
for (const n of keyCounts) {
  const r = snapshotCost(n);
  lines.push(`| ${n} | ${f(r.compileMs)} | ${f(r.encodeMs)} | ${Math.round(r.bytes / 1024)} | ${f(r.decodeMs)} | ${f(r.acceptMs)} | ${f(r.runtimeMs)} |`);
  process.stderr.write(`keys ${n}: compile ${f(r.compileMs)} ms, ${Math.round(r.bytes / 1024)} KiB\n`);
}
lines.push('');

publish(SECTION, lines.join('\n'));
