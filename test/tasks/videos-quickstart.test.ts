import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountState } from '../../proxy/billing/ledger.js';
import { loadManifests } from '../../proxy/config/folder-source.js';
import type { Gateway } from '../../proxy/front/gateway.js';
import type { Store } from '../../proxy/store/index.js';
import { startSimulator, type Simulator } from '../../simulator/index.js';
import { disposeStore, openPglite } from '../support/stores.js';
import { C, grant, startTasksGateway } from './support.js';
import { videoClient } from './videos-support.js';

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart/', import.meta.url));
const QUICKSTART_KEY = 'sk-service-quickstart';
const IMG = 'https://media.example.com/frame.png';

/** The quickstart manifests as shipped, with the simulator's fixed address replaced by this test's. */
async function quickstart(simUrl: string): Promise<object[]> {
  const { resources, errors } = await loadManifests(QUICKSTART);
  expect(errors).toEqual([]);
  return resources.map((r) => JSON.parse(JSON.stringify(r.object).replaceAll('http://127.0.0.1:8090', simUrl)) as object);
}

describe('the quickstart video model', () => {
  let store: Store;
  let sim: Simulator;
  let gw: Gateway;
  let resources: object[];

  beforeAll(async () => {
    store = await openPglite();
    sim = await startSimulator();
    resources = await quickstart(sim.url);
    gw = await startTasksGateway({ store, sim, resources: () => resources });
    await grant(store, 'demo', 10n * C);
  });
  afterAll(async () => {
    await gw?.close();
    await sim?.close();
    if (store) await disposeStore(store);
  });

  it('sim-video is in group default and makes every mode with audio, each input reaching the upstream', async () => {
    const c = videoClient(gw.url, QUICKSTART_KEY);
    const before = await accountState(store, 'demo');
    const bodies = [
      { prompt: 'qs-t2v' },
      { prompt: 'qs-i2v', first_frame_url: IMG, last_frame_url: IMG, reference_images: [IMG] },
      { prompt: 'qs-v2v', video_url: 'https://media.example.com/clip.mp4' },
    ];
    const ids = [];
    for (const b of bodies) {
      const r = await c.submit({ model: 'sim-video', ...b });
      expect(r.status).toBe(200);
      ids.push(r.json.id);
    }
    const done = await Promise.all(ids.map((id) => c.until(id)));
    expect(done.map((d) => [d.status, d.mode, d.ignored])).toEqual([
      ['succeeded', 'text-to-video', undefined],
      ['succeeded', 'image-to-video', undefined],
      ['succeeded', 'video-to-video', undefined],
    ]);
    const inputs = bodies.map((b) => (JSON.parse(sim.recorder.find(b.prompt)[0]!.body.toString()) as { input: Record<string, unknown> }).input);
    expect(inputs.map((i) => i.generate_audio)).toEqual([true, true, true]);
    expect(inputs[1]).toMatchObject({ image: IMG, last_frame: IMG, reference_images: [IMG] });
    expect(inputs[2]).toMatchObject({ video: 'https://media.example.com/clip.mp4' });
    // Three 5 s videos at 720p with audio: 3 x 5 x (0.10 + 0.02) credits.
    expect(await accountState(store, 'demo')).toEqual({ balance: before.balance - 1_800_000n, held: 0n });
  });

  it('a blocked prompt: sim-sora (OpenAI protocol) refuses the submission with a 400, sim-video (Replicate) fails the task content_blocked', async () => {
    const c = videoClient(gw.url, QUICKSTART_KEY);
    const before = await accountState(store, 'demo');
    const refused = await c.submit({ model: 'sim-sora', prompt: 'qs-blocked [sim:blocked]' });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({
      type: 'invalid_request_error',
      param: 'prompt',
      message: expect.stringMatching(/safety policy \(content_blocked\)/),
    });
    const accepted = await c.submit({ model: 'sim-video', prompt: 'qs-flagged [sim:blocked]' });
    expect(accepted.status).toBe(200);
    expect(await c.until(accepted.json.id)).toMatchObject({
      status: 'failed',
      error: { code: 'content_blocked', message: expect.stringContaining('flagged') },
    });
    expect(await accountState(store, 'demo')).toEqual(before);
    const ok = await c.submit({ model: 'sim-sora', prompt: 'qs-sora' });
    expect(ok.status).toBe(200);
    expect((await c.until(ok.json.id)).status).toBe('succeeded');
  });

  it('sim-sora offers 4 to 12 s, as the README says: a longer video is a 404 naming the duration, and holds nothing', async () => {
    const c = videoClient(gw.url, QUICKSTART_KEY);
    const before = await accountState(store, 'demo');
    const r = await c.submit({ model: 'sim-sora', prompt: 'qs-too-long', duration: 100 });
    expect(r.status).toBe(404);
    expect(r.json.error).toMatchObject({ param: 'duration', message: expect.stringContaining('4 to 12 seconds') });
    expect(await accountState(store, 'demo')).toEqual(before);
  });
});
