import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { loadManifests } from '../../proxy/config/folder-source.js';
import type { Gateway } from '../../proxy/front/gateway.js';
import type { Store } from '../../proxy/store/index.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { disposeStore, openPglite } from '../support/stores.js';
import { C, client, grant } from '../tasks/support.js';
import { mp4Boxes, videoClient } from '../tasks/videos-support.js';
import { pngDims, startMediaGateway } from './support.js';

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/', import.meta.url));
const KEY = 'sk-service-quickstart';

/** The quickstart manifests as shipped, with the simulator's fixed address replaced by this test's. */
async function quickstart(simUrl: string): Promise<object[]> {
  const { resources, errors } = await loadManifests(QUICKSTART);
  expect(errors).toEqual([]);
  return resources.map((r) => JSON.parse(JSON.stringify(r.object).replaceAll('http://127.0.0.1:8090', simUrl)) as object);
}

describe('the quickstart image and video models of fal.ai, Gemini and ModelArk', () => {
  let store: Store;
  let sim: Simulator;
  let gw: Gateway;

  beforeAll(async () => {
    store = await openPglite();
    sim = await startSimulator();
    const resources = await quickstart(sim.url);
    gw = await startMediaGateway(store, sim, () => resources);
    await grant(store, 'demo', 100n * C);
  });
  afterAll(async () => {
    await gw?.close();
    await sim?.close();
    if (store) await disposeStore(store);
  });

  it('each image model makes a PNG of the size asked with the quickstart key, without upstream keys', async () => {
    const c = client(gw.url, KEY);
    const models = ['fal-flux', 'nano-banana-pro', 'seedream-4'];
    const subs = await Promise.all(models.map((model) => c.submit('/v1/images/generations', { model, prompt: `qs-${model}`, size: '1536x1024' })));
    expect(subs.map((s) => s.status)).toEqual([200, 200, 200]);
    const done = await Promise.all(subs.map((s) => c.until(s.json.id)));
    expect(done.map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const sizes = await Promise.all(done.map(async (d) => pngDims(Buffer.from(await (await fetch(d.data![0]!.url)).arrayBuffer()))));
    // Gemini takes ratios and tiers, not pixels: 3:2 at 1K.
    expect(sizes).toEqual([
      { width: 1536, height: 1024 },
      { width: 1024, height: 680 },
      { width: 1536, height: 1024 },
    ]);
  });

  it('each video model makes an MP4 of the duration asked, charged by the second', async () => {
    const c = videoClient(gw.url, KEY);
    const before = await accountState(store, 'demo');
    const asks = [
      { model: 'fal-kling', prompt: 'qs-kling', duration: 5, resolution: '1080p', image_url: 'https://media.example.com/f.png' },
      { model: 'veo-3.1', prompt: 'qs-veo', duration: 4 },
      { model: 'seedance-1-pro', prompt: 'qs-seedance', duration: 6, resolution: '480p' },
    ];
    const subs = await Promise.all(asks.map((a) => c.submit(a)));
    expect(subs.map((s) => s.status)).toEqual([200, 200, 200]);
    const done = await Promise.all(subs.map((s) => c.until(s.json.id)));
    expect(done.map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const seconds = await Promise.all(done.map(async (d) => mp4Boxes(Buffer.from(await (await fetch(d.data![0]!.url)).arrayBuffer())).seconds));
    expect(seconds).toEqual([5, 4, 6]);
    // 5 x 0.09 + 4 x (0.20 + 0.20 audio) + 6 x 0.02 credits.
    expect(await accountState(store, 'demo')).toEqual({ balance: before.balance - 450_000n - 1_600_000n - 120_000n, held: 0n });
    expect(await verifyLedger(store)).toEqual([]);
  });
});
