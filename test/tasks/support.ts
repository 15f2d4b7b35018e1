import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import { billingFeature } from '../../proxy/admin/billing.js';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { chatFeature } from '../../proxy/chat/feature.js';
import { defaultBilling } from '../../proxy/front/features.js';
import { startGateway, type Gateway } from '../../proxy/front/gateway.js';
import { credit } from '../../proxy/billing/ledger.js';
import { createLogger } from '../../kernel/log.js';
import type { Store } from '../../proxy/store/index.js';
import { tasksFeature } from '../../proxy/tasks/feature.js';
import type { TaskSettings } from '../../proxy/tasks/settings.js';
import type { GatewayOptions } from '../../proxy/http/deps.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { API, apiKey, group } from '../support/resources.js';
import { compileOrThrow } from '../support/stack.js';
import { disposeStore, type StoreCase } from '../support/stores.js';

export const C = 1_000_000n; // one credit in micro-credits

/** Task settings that keep tests fast: short leases, polls and backoffs, and retries in milliseconds. */
export const FAST: Partial<TaskSettings> = {
  leaseMs: 3_000,
  pollIntervalMs: 30,
  submitBackoffBaseMs: 30,
  submitBackoffMaxMs: 200,
  webhookRetryScheduleS: [0.05, 0.1, 0.1, 0.1, 0.1],
  webhookTimeoutMs: 2_000,
  stopGraceMs: 0,
};

/**
 * A task ModelRoute with one backend: `defaults` (pricing, capabilities) unless `spec` overrides
 * them; `spec.model` is the backend's upstream model.
 */
export function taskRoute(
  type: 'image' | 'video',
  name: string,
  provider: 'openai' | 'replicate',
  baseURL: string,
  defaults: Record<string, unknown>,
  spec: Record<string, unknown> = {},
) {
  const { model, ...rest } = spec as { model?: string };
  return {
    apiVersion: API,
    kind: 'ModelRoute',
    metadata: { name },
    spec: { type, backends: [{ provider, baseURL, ...(model ? { model } : {}) }], ...defaults, ...rest },
  };
}

export function imageRoute(name: string, provider: 'openai' | 'replicate', baseURL: string, spec: Record<string, unknown> = {}) {
  return taskRoute(
    'image',
    name,
    provider,
    baseURL,
    {
      pricing: { perImage: { '1K': '0.02', '2K': '0.04', '2K:high': '0.06', '4K': '0.08' } },
      capabilities: { inpaint: true, qualities: ['low', 'medium', 'high'] },
    },
    spec,
  );
}

/** The quickstart-like manifests of these tests: two image models on the simulator, two keys of one account. */
export function taskResources(sim: string): object[] {
  return [
    imageRoute('img-openai', 'openai', `${sim}/v1`, { model: 'image-sim' }),
    imageRoute('img-replicate', 'replicate', `${sim}/v1`, { model: 'sim/flux' }),
    imageRoute('img-plain', 'openai', `${sim}/v1`, { capabilities: {}, pricing: { perImage: { '1K': '0.01' } } }),
    group('g', ['img-openai', 'img-replicate', 'img-plain']),
    apiKey('k', KEY, 'g', { account: 'acct' }),
    apiKey('other', OTHER_KEY, 'g', { account: 'other-acct' }),
  ];
}
export const KEY = 'sk-service-tasks-test';
export const OTHER_KEY = 'sk-service-tasks-other';

export async function startTasksGateway(o: {
  store: Store;
  sim: Simulator;
  resources?: (sim: string) => object[];
  settings?: Partial<TaskSettings>;
  options?: Partial<GatewayOptions>;
}): Promise<Gateway> {
  return startGateway({
    source: new StaticConfigSource(compileOrThrow((o.resources ?? taskResources)(o.sim.url))),
    store: o.store,
    port: 0,
    adminPort: 0,
    adminToken: 'test-admin',
    log: createLogger({}, 'silent'),
    billing: defaultBilling,
    features: [chatFeature, tasksFeature({ ...FAST, ...o.settings }), billingFeature],
    options: { allowLoopbackURLs: true, workerIntervalMs: 25, ...o.options },
  });
}

export interface TasksStack {
  store: Store;
  sim: Simulator;
  gw: Gateway;
}

/**
 * For the calling describe: an empty store of the case, the simulator and a tasks gateway, started
 * before its tests (then `credits` granted, micro-credits by account) and closed after them. The
 * fields are set once beforeAll has run.
 */
export function useTasksStack(
  sc: StoreCase,
  o: Omit<Parameters<typeof startTasksGateway>[0], 'store' | 'sim'> & { credits?: Record<string, bigint> } = {},
): TasksStack {
  const { credits = {}, ...gateway } = o;
  const t = {} as TasksStack;
  beforeAll(async () => {
    t.store = await sc.open();
    t.sim = await startSimulator();
    t.gw = await startTasksGateway({ store: t.store, sim: t.sim, ...gateway });
    for (const [account, amount] of Object.entries(credits)) await grant(t.store, account, amount);
  });
  afterAll(async () => {
    await t.gw?.close();
    await t.sim?.close();
    if (t.store) await disposeStore(t.store);
  });
  return t;
}

export async function grant(store: Store, account: string, amount: bigint, id = `grant-${Date.now()}-${Math.random()}`): Promise<void> {
  await store.tx((q) => credit(q, { account, operationId: id, amount }));
}

export interface TaskBody {
  id: string;
  status: string;
  created?: number;
  data?: { url: string }[];
  error?: { code: string; message: string };
  ignored?: string[];
}

/** A small client for the task endpoints (no SDK covers them). */
export function client(base: string, key = KEY) {
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const r = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await r.text();
    return {
      status: r.status,
      headers: r.headers,
      json: (text ? JSON.parse(text) : undefined) as TaskBody & { error: { message: string; param: string | null; code: string; type: string } },
    };
  };
  return {
    call,
    submit: (path: string, body: unknown, headers?: Record<string, string>) => call('POST', path, body, headers),
    get: (id: string) => call('GET', `/v1/images/generations/${id}`),
    cancel: (id: string) => call('POST', `/v1/images/generations/${id}/cancel`),
    /** Polls until the task ends (succeeded, failed, cancelled) or the deadline passes. */
    async until(id: string, ms = 15_000): Promise<TaskBody> {
      const end = performance.now() + ms;
      for (;;) {
        const r = await call('GET', `/v1/images/generations/${id}`);
        if (r.status !== 200) throw new Error(`GET ${id}: ${r.status} ${JSON.stringify(r.json)}`);
        if (['succeeded', 'failed', 'cancelled'].includes(r.json.status)) return r.json;
        if (performance.now() > end) throw new Error(`task ${id} still ${r.json.status} after ${ms} ms`);
        await new Promise((res) => setTimeout(res, 20));
      }
    },
  };
}

export interface Received {
  body: Buffer;
  headers: IncomingHttpHeaders;
}

/**
 * A real HTTP webhook receiver: records every POST; `answer` decides each one by its number
 * (from 1): a status, 'drop' (connection destroyed without an answer) or 'hang' (no answer).
 */
export async function startReceiver(
  answer: (n: number) => number | 'drop' | 'hang' = () => 200,
): Promise<{ url: string; received: Received[]; close(): Promise<void>; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ body: Buffer.concat(chunks), headers: req.headers });
      const a = answer(received.length);
      if (a === 'drop') req.socket.destroy();
      else if (a !== 'hang') {
        res.writeHead(a);
        res.end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook?source=test`,
    received,
    server,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export async function waitUntil(pred: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const end = performance.now() + ms;
  while (!(await pred())) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
