import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StaticConfigSource } from '../../proxy/config/folder-source.js';
import { chatFeature } from '../../proxy/chat/feature.js';
import { defaultBilling } from '../../proxy/front/features.js';
import { startGateway, type Gateway } from '../../proxy/front/gateway.js';
import { createLogger } from '../../kernel/log.js';
import { readSettings } from '../../kernel/settings.js';
import type { Store } from '../../proxy/store/index.js';
import { tasksFeature } from '../../proxy/tasks/feature.js';
import { simServiceAccount, tokenExchanges } from '../../simulator/gemini-vertex.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { mediaRoute } from '../media/support.js';
import { apiKey, group } from '../support/resources.js';
import { compileOrThrow } from '../support/stack.js';
import { disposeStore, openPglite } from '../support/stores.js';
import { C, client, FAST, grant, KEY } from '../tasks/support.js';

/**
 * Google's media models on Vertex AI (Nano Banana images, Veo videos) with a service account key
 * as the credential: the key is exchanged for an access token as Vertex chat does (signed JWT at
 * the key's token_uri, the token cached), and the token goes in Authorization; the key itself is
 * never sent upstream nor shown on the task.
 */
let store: Store;
let sim: Simulator;
let gw: Gateway;

const vertex = (s: string, model: string) => ({
  provider: 'gemini',
  baseURL: `${s}/gmedia/v1/projects/sim-project/locations/us-central1`,
  model,
  credentials: { env: 'VERTEX_SA' },
});

beforeAll(async () => {
  store = await openPglite();
  sim = await startSimulator();
  gw = await startGateway({
    source: new StaticConfigSource(
      compileOrThrow([
        mediaRoute('nb-vertex-sa', 'image', vertex(sim.url, 'gemini-3-pro-image-preview')),
        mediaRoute('veo-vertex-sa', 'video', vertex(sim.url, 'veo-3.0-generate-001'), {
          capabilities: { firstFrame: true, audio: true, resolutions: ['720p'], minDuration: 4, maxDuration: 8 },
        }),
        group('g', ['nb-vertex-sa', 'veo-vertex-sa']),
        apiKey('k', KEY, 'g', { account: 'acct' }),
      ]),
    ),
    store,
    port: 0,
    adminPort: 0,
    adminToken: 'test-admin',
    log: createLogger({}, 'silent'),
    settings: readSettings({ VERTEX_SA: JSON.stringify(simServiceAccount(sim.url)) }),
    billing: defaultBilling,
    features: [chatFeature, tasksFeature(FAST)],
    options: { allowLoopbackURLs: true, workerIntervalMs: 25 },
  });
  await grant(store, 'acct', 100n * C);
});
afterAll(async () => {
  await gw?.close();
  await sim?.close();
  if (store) await disposeStore(store);
});

describe('Vertex media with a service account key', () => {
  it('an image and a video task each call with a Bearer token the key was exchanged for, one exchange for both', async () => {
    const c = client(gw.url);
    const before = tokenExchanges.get(sim.context) ?? 0;
    const img = await c.submit('/v1/images/generations', { model: 'nb-vertex-sa', prompt: 'vx-sa-image', size: '1:1' });
    expect(img.status).toBe(200);
    expect((await c.until(img.json.id)).status).toBe('succeeded');
    const vid = await c.call('POST', '/v1/videos/generations', { model: 'veo-vertex-sa', prompt: 'vx-sa-video [sim:short]', duration: 8, resolution: '720p' });
    expect(vid.status).toBe(200);
    const deadline = performance.now() + 20_000;
    let state = vid.json;
    while (!['succeeded', 'failed', 'cancelled'].includes(state.status) && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      state = (await c.call('GET', `/v1/videos/generations/${vid.json.id}`)).json;
    }
    expect(state.status).toBe('succeeded');

    const calls = sim.recorder.all().filter((q) => q.path.startsWith('/gmedia/v1/projects/sim-project/'));
    expect(calls.map((q) => q.path)).toEqual(
      expect.arrayContaining([
        '/gmedia/v1/projects/sim-project/locations/us-central1/publishers/google/models/gemini-3-pro-image-preview:generateContent',
        '/gmedia/v1/projects/sim-project/locations/us-central1/publishers/google/models/veo-3.0-generate-001:predictLongRunning',
        '/gmedia/v1/projects/sim-project/locations/us-central1/publishers/google/models/veo-3.0-generate-001:fetchPredictOperation',
      ]),
    );
    for (const q of calls) {
      expect(q.headers.authorization).toMatch(/^Bearer ya29\.sim-/);
      expect(q.body.toString()).not.toContain('PRIVATE KEY');
    }
    expect((tokenExchanges.get(sim.context) ?? 0) - before).toBe(1);
    expect(JSON.stringify(state)).not.toContain('PRIVATE KEY');
  });
});
