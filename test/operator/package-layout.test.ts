import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { startKubeApi, type KubeApi } from '../kube-api/server.js';
import { k8sTools } from '../support/k8s-tools.js';
import { NODE24 } from '../support/node24.js';
import { deadPort } from '../support/ports.js';
import { keyHash } from '../support/resources.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { ROOT } from './harness.js';

/**
 * The image's layout without a container engine, as the Dockerfile builds it: `npm run build`
 * output in a temp folder with bin/ and package.json, `npm ci --omit=dev` there (no tsx, no
 * TypeScript), then the operator and a proxy started from it with exactly the args and env the
 * chart's Deployments render (the Service's DNS name read as 127.0.0.1, the in-cluster
 * ServiceAccount as a kubeconfig, the ports free ones passed through the chart's values).
 */

const run = promisify(execFile);
type Obj = Record<string, any>;

interface Started {
  child: ChildProcess;
  lines: Obj[];
  /** The exit code, however early the process ends. */
  exited: Promise<number | null>;
}

function start(cwd: string, args: string[], env: Record<string, string>, ready: (l: Obj) => boolean, timeoutMs = 60_000): Promise<Started> {
  // Only what a pod would have: PATH for node, HOME; nothing inherited from the test process.
  const child = spawn(process.execPath, ['bin/tollgate.js', ...args], { cwd, env: { PATH: process.env.PATH ?? '', HOME: cwd, ...env } });
  const lines: Obj[] = [];
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`not ready within ${timeoutMs} ms: ${JSON.stringify(lines.slice(-5))}${buf}`)), timeoutMs);
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${JSON.stringify(lines.slice(-5))}${buf}`)));
    child.stderr.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) !== -1) {
        const text = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let line: Obj;
        try {
          line = JSON.parse(text) as Obj;
        } catch {
          line = { text };
        }
        lines.push(line);
        if (ready(line)) {
          clearTimeout(timer);
          resolve({ child, lines, exited });
        }
      }
    });
  });
}

/** The env of a rendered container, resolved as the kubelet would (fieldRefs, secretKeyRefs). */
function envOf(container: Obj, pod: string, secrets: Map<string, Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of container.env as Obj[]) {
    if (e.value !== undefined) out[e.name] = String(e.value);
    else if (e.valueFrom?.fieldRef) out[e.name] = e.valueFrom.fieldRef.fieldPath === 'metadata.name' ? pod : 'tollgate';
    else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const v = secrets.get(ref.name)?.[ref.key];
      if (v === undefined && !ref.optional) throw new Error(`${e.name}: Secret ${ref.name} has no ${ref.key}`);
      if (v !== undefined) out[e.name] = v;
    }
  }
  return out;
}

describe('the Dockerfile', () => {
  it('builds on the Node 24 the suite runs on (npm run test:node24), Debian slim', async () => {
    const dockerfile = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
    const base = /^ARG NODE_IMAGE=(\S+)$/m.exec(dockerfile)?.[1];
    // Pinned by the index digest, so a re-pushed tag cannot change the image (see the Dockerfile's comment).
    expect(base).toMatch(new RegExp(`^node:${NODE24.version.replace(/\./g, '\\.')}-bookworm-slim@sha256:[0-9a-f]{64}$`));
    expect(dockerfile.match(/^FROM \$\{NODE_IMAGE\}/gm)).toHaveLength(3);
  });
});

describe('the built package (the image layout)', () => {
  let dir: string;
  let api: KubeApi;
  let sim: Simulator;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tg-layout-'));
    await run(process.execPath, [join(ROOT, 'scripts/build.js'), join(dir, 'dist')], { cwd: ROOT, timeout: 240_000 });
    for (const f of ['package.json', 'package-lock.json', 'bin']) await cp(join(ROOT, f), join(dir, f), { recursive: true });
    await run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir, timeout: 400_000, maxBuffer: 16 << 20 });
    api = await startKubeApi();
    sim = await startSimulator();
  }, 700_000);
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await sim?.close();
    await api?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('holds the compiled output, the migrations and production dependencies only', () => {
    expect(existsSync(join(dir, 'dist/cli/main.js'))).toBe(true);
    expect(existsSync(join(dir, 'dist/proxy/store/migrations/001_meta.sql'))).toBe(true);
    expect(existsSync(join(dir, 'dist/api/snapshot/config_discovery.proto'))).toBe(true);
    expect(existsSync(join(dir, 'cli'))).toBe(false);
    for (const dev of ['tsx', 'typescript', 'vitest']) expect(existsSync(join(dir, 'node_modules', dev)), dev).toBe(false);
  });

  it('serve --quickstart runs from it and answers', async () => {
    const [port, adminPort, simPort] = [await deadPort(), await deadPort(), await deadPort()];
    const serve = await start(
      dir,
      ['serve', '--quickstart', '--port', String(port), '--admin-port', String(adminPort), '--simulator-port', String(simPort), '--data', join(dir, 'data')],
      { TOLLGATE_LOG_LEVEL: 'info' },
      (l) => l.msg === 'gateway listening',
    );
    children.push(serve.child);
    expect((await fetch(`http://127.0.0.1:${adminPort}/healthz`)).status).toBe(200);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
  }, 120_000);

  it('the operator and a proxy started with the args and env the chart renders serve a chat call', async () => {
    const { helm } = await k8sTools();
    const [grpcPort, metricsPort, port, adminPort] = [await deadPort(), await deadPort(), await deadPort(), await deadPort()];
    const { stdout } = await run(helm, [
      'template',
      'tollgate',
      join(ROOT, 'charts/tollgate'),
      '--namespace',
      'tollgate',
      ...['--set', 'discovery.token=layout-token', '--set', `operator.grpcPort=${grpcPort}`, '--set', `operator.metricsPort=${metricsPort}`],
      ...['--set', `proxy.port=${port}`, '--set', `proxy.adminPort=${adminPort}`],
    ]);
    const docs = parseAllDocuments(stdout)
      .map((d) => d.toJS() as Obj | null)
      .filter((d): d is Obj => d !== null);
    const container = (name: string) => docs.find((d) => d.kind === 'Deployment' && d.metadata.name === name)!.spec.template.spec.containers[0] as Obj;
    const discovery = docs.find((d) => d.kind === 'Secret')!;
    const secrets = new Map<string, Record<string, string>>([
      ['tollgate-discovery', { token: Buffer.from(discovery.data.token as string, 'base64').toString() }],
      // In memory (PGlite): the shared test database is the store suites'.
      ['tollgate-proxy', { databaseUrl: '', adminToken: 'layout-admin' }],
    ]);

    // The cluster side: CRDs, the namespace, an upstream Secret, a route, a group and a key.
    const kubeconfig = await api.kubeconfig(join(dir, 'kubeconfig'), 'tollgate');
    const kubectl = (await k8sTools()).kubectl;
    const key = 'sk-service-layout-key';
    await writeFile(
      join(dir, 'cluster.yaml'),
      `apiVersion: v1
kind: Namespace
metadata: {name: tollgate}
---
apiVersion: v1
kind: Secret
metadata: {name: upstream, namespace: tollgate}
stringData: {apiKey: sk-upstream}
---
apiVersion: tollgate.dev/v1alpha1
kind: ModelRoute
metadata: {name: sim-gpt, namespace: tollgate}
spec:
  type: chat
  backends: [{provider: openai, baseURL: "${sim.url}/v1", model: gpt-sim, credentials: {secretRef: {name: upstream, key: apiKey}}}]
  pricing: {inputPerMillion: "0.50", outputPerMillion: "1.50"}
---
apiVersion: tollgate.dev/v1alpha1
kind: Group
metadata: {name: default, namespace: tollgate}
spec: {models: [sim-gpt]}
---
apiVersion: tollgate.dev/v1alpha1
kind: ApiKey
metadata: {name: layout, namespace: tollgate}
spec: {group: default, account: demo, keyHash: "${keyHash(key)}"}
`,
    );
    await run(kubectl, ['--kubeconfig', kubeconfig, 'apply', '--validate=false', '-f', join(ROOT, 'crds/')]);
    await run(kubectl, ['--kubeconfig', kubeconfig, 'apply', '--validate=false', '-f', join(dir, 'cluster.yaml')]);

    const opC = container('tollgate-operator');
    const t0 = performance.now();
    const op = await start(
      dir,
      opC.args as string[],
      { ...envOf(opC, 'tollgate-operator-0', secrets), KUBECONFIG: kubeconfig },
      (l) => l.msg === 'operator started',
    );
    children.push(op.child);
    await expect.poll(async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status, { timeout: 30_000 }).toBe(200);
    const opReadyMs = performance.now() - t0;

    const pxC = container('tollgate-proxy');
    const args = (pxC.args as string[]).map((a) => a.replace('//tollgate-operator:', '//127.0.0.1:').replace('--host=0.0.0.0', '--host=127.0.0.1'));
    expect(args).toEqual(['serve', `--config-from=grpc://127.0.0.1:${grpcPort}`, '--host=127.0.0.1', `--port=${port}`, `--admin-port=${adminPort}`]);
    const px = await start(dir, args, envOf(pxC, 'tollgate-proxy-0', secrets), (l) => l.msg === 'gateway listening');
    children.push(px.child);
    await expect.poll(async () => (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).status, { timeout: 30_000 }).toBe(200);
    const grant = await fetch(`http://127.0.0.1:${adminPort}/admin/v1/accounts/demo/grants`, {
      method: 'POST',
      headers: { authorization: 'Bearer layout-admin', 'content-type': 'application/json' },
      body: JSON.stringify({ credits: '5' }),
    });
    expect(grant.status).toBe(200);
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }], stream: false });
    expect(answer.choices[0]!.message.content).toBeTruthy();
    // The figures the README quotes: the operator's memory once Ready and its time to Ready.
    const rss = Number((await run('ps', ['-o', 'rss=', '-p', String(op.child.pid)])).stdout.trim()) / 1024;
    console.log(`compiled operator: ready ${opReadyMs} ms after start, ${rss.toFixed(0)} MB RSS`);

    for (const c of [px.child, op.child]) c.kill('SIGTERM');
    expect(await px.exited).toBe(0);
    expect(await op.exited).toBe(0);
  }, 180_000);
});
