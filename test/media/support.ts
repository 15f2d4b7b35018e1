import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { chatFeature } from '../../proxy/chat/feature.js';
import { defaultBilling } from '../../proxy/front/features.js';
import { startGateway, type Gateway } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import { readSettings } from '../../kernel/settings.js';
import type { Store } from '../../proxy/store/index.js';
import { tasksFeature } from '../../proxy/tasks/feature.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { API } from '../support/resources.js';
import { compileOrThrow } from '../support/stack.js';
import { disposeStore, type StoreCase } from '../support/stores.js';
import { FAST, grant, type Received } from '../tasks/support.js';

/** The upstream keys the media tests' ModelRoutes name as {env: ...}, as `tollgate serve` would read them. */
export const UPSTREAM_KEYS = { FAL_KEY: 'sim-fal-key', GEMINI_API_KEY: 'sim-gemini-key', VERTEX_ACCESS_TOKEN: 'sim-vertex-token', ARK_API_KEY: 'sim-ark-key' };

export const SECRET = 'whsec-media-test';

/** Prices of these tests, micro-credits: images 1K 0.02 / 2K 0.04 / 4K 0.08; video per second 720p 0.10, 1080p 0.20, audio 0.02. */
export const IMG_1K = 20_000n;
export const IMG_2K = 40_000n;
export const P720 = 100_000n;
export const P1080 = 200_000n;
export const AUDIO = 20_000n;

/** A ModelRoute of one backend of `provider`, with the prices above and `spec` merged over the defaults. */
export function mediaRoute(
  name: string,
  type: 'image' | 'video',
  backend: { provider: string; baseURL: string; model: string; credentials?: object },
  spec: Record<string, unknown> = {},
) {
  const defaults =
    type === 'image'
      ? { pricing: { perImage: { '1K': '0.02', '2K': '0.04', '4K': '0.08' } }, capabilities: { inpaint: true } }
      : {
          pricing: { perSecond: { '480p': '0.05', '720p': '0.10', '1080p': '0.20' }, audioPerSecond: '0.02' },
          capabilities: {
            firstFrame: true,
            lastFrame: true,
            referenceImages: true,
            referenceVideo: true,
            audio: true,
            resolutions: ['480p', '720p', '1080p'],
            minDuration: 4,
            maxDuration: 20,
          },
        };
  return { apiVersion: API, kind: 'ModelRoute', metadata: { name }, spec: { type, backends: [backend], ...defaults, ...spec } };
}

export async function startMediaGateway(store: Store, sim: Simulator, resources: (sim: string) => object[]): Promise<Gateway> {
  return startGateway({
    source: new StaticConfigSource(compileOrThrow(resources(sim.url))),
    store,
    port: 0,
    adminPort: 0,
    adminToken: 'test-admin',
    log: createLogger({}, 'silent'),
    settings: readSettings(UPSTREAM_KEYS),
    billing: defaultBilling,
    features: [chatFeature, tasksFeature(FAST)],
    options: { allowLoopbackURLs: true, workerIntervalMs: 25 },
  });
}

export interface MediaStack {
  store: Store;
  sim: Simulator;
  gw: Gateway;
}

/** For the calling describe: a store, the simulator and a gateway on `resources`, with `credits` granted. */
export function useMediaStack(sc: StoreCase, resources: (sim: string) => object[], credits: Record<string, bigint>): MediaStack {
  const t = {} as MediaStack;
  beforeAll(async () => {
    t.store = await sc.open();
    t.sim = await startSimulator();
    t.gw = await startMediaGateway(t.store, t.sim, resources);
    for (const [account, amount] of Object.entries(credits)) await grant(t.store, account, amount);
  });
  afterAll(async () => {
    await t.gw?.close();
    await t.sim?.close();
    if (t.store) await disposeStore(t.store);
  });
  return t;
}

/** The webhook's signature checked the way a receiver would: HMAC-SHA256 of the raw bytes, constant-time compare. */
export function verified(r: Received, secret = SECRET): boolean {
  const want = Buffer.from(`sha256=${createHmac('sha256', secret).update(r.body).digest('hex')}`);
  const got = Buffer.from(String(r.headers['x-service-signature'] ?? ''));
  return got.length === want.length && timingSafeEqual(got, want);
}

export async function ledgerKinds(store: Store, taskId: string): Promise<string[]> {
  const r = await store.query<{ kind: string }>('SELECT kind FROM ledger WHERE operation_id = $1 OR hold_id = $1 ORDER BY id', [`task:${taskId}`]);
  return r.rows.map((x) => x.kind);
}

export async function chargedOf(store: Store, taskId: string): Promise<bigint> {
  const r = await store.query<{ charged_micro: string | null }>('SELECT charged_micro FROM tasks WHERE id = $1', [taskId]);
  return BigInt(r.rows[0]!.charged_micro ?? -1);
}

/** The JSON body of the one upstream request whose body contains `marker` (and whose path matches `path`, when given). */
export function upstreamBody(sim: Simulator, marker: string, path?: RegExp): Record<string, unknown> {
  const found = sim.recorder.find(marker).filter((r) => !path || path.test(r.path));
  expect(found, `upstream requests carrying ${marker}`).toHaveLength(1);
  return JSON.parse(found[0]!.body.toString()) as Record<string, unknown>;
}

/** A PNG's width and height, read from its IHDR (independently of the simulator's writer). */
export function pngDims(b: Buffer): { width: number; height: number } {
  expect(b.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(b.toString('latin1', 12, 16)).toBe('IHDR');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}
