import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { publishFile } from '../../simulator/files.js';
import { encodePng } from '../../simulator/png.js';
import { startSimulator } from '../../simulator/index.js';
import { apiKey, group } from '../support/resources.js';
import { disposeStore, storeCases } from '../support/stores.js';
import { C, grant, KEY, startReceiver, waitUntil } from '../tasks/support.js';
import { mp4Boxes, videoClient } from '../tasks/videos-support.js';
import { AUDIO, chargedOf, ledgerKinds, mediaRoute, P1080, P720, SECRET, startMediaGateway, upstreamBody, useMediaStack, verified } from './support.js';

const gemini = (s: string, model: string) => ({ provider: 'gemini', baseURL: `${s}/gmedia`, model, credentials: { env: 'GEMINI_API_KEY' } });
const vertex = (s: string, model: string) => ({
  provider: 'gemini',
  baseURL: `${s}/gmedia/v1/projects/demo/locations/us-central1`,
  model,
  credentials: { env: 'VERTEX_ACCESS_TOKEN' },
});
const caps = { firstFrame: true, lastFrame: true, referenceImages: true, audio: true, resolutions: ['720p', '1080p'], minDuration: 4, maxDuration: 8 };

function resources(s: string): object[] {
  return [
    mediaRoute('veo', 'video', gemini(s, 'veo-3.1-generate-preview'), { capabilities: caps }),
    mediaRoute('veo-vertex', 'video', vertex(s, 'veo-3.0-generate-001'), { capabilities: caps }),
    group('g', ['veo', 'veo-vertex']),
    apiKey('k', KEY, 'g', { account: 'acct' }),
  ];
}

const b64 = (b: Buffer) => ({ bytesBase64Encoded: b.toString('base64'), mimeType: 'image/png' });

for (const sc of storeCases()) {
  describe(`Veo tasks on ${sc.name}`, () => {
    const t = useMediaStack(sc, resources, { acct: 100n * C });
    let v: ReturnType<typeof videoClient>;
    const first = encodePng(160, 90, 1);
    const last = encodePng(160, 90, 2);
    const ref = encodePng(64, 64, 3);
    let urls: { first: string; last: string; ref: string };
    beforeAll(() => {
      v = videoClient(t.gw.url);
      urls = {
        first: publishFile(t.sim.context, 'veo-first.png', first),
        last: publishFile(t.sim.context, 'veo-last.png', last),
        ref: publishFile(t.sim.context, 'veo-ref.png', ref),
      };
    });

    it('text-to-video: predictLongRunning, the operation polled, the file fetched with the key through its redirect, charged on the seconds the MP4 holds, webhook signed', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await v.submit({
          model: 'veo',
          prompt: 'veo-marker a whale',
          duration: 8,
          resolution: '1080p',
          aspect_ratio: '9:16',
          negative_prompt: 'boats',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        expect(sub.status).toBe(200);
        expect(sub.json.status).toBe('processing');
        const call = t.sim.recorder.find('veo-marker')[0]!;
        expect(call.path).toBe('/gmedia/v1beta/models/veo-3.1-generate-preview:predictLongRunning');
        expect(call.headers['x-goog-api-key']).toBe('sim-gemini-key');
        expect(JSON.parse(call.body.toString())).toEqual({
          instances: [{ prompt: 'veo-marker a whale' }],
          parameters: { aspectRatio: '9:16', durationSeconds: 8, resolution: '1080p', negativePrompt: 'boats' },
        });
        const done = await v.until(sub.json.id);
        expect(done).toMatchObject({ status: 'succeeded', mode: 'text-to-video', data: [{ url: expect.any(String) }] });
        const polls = t.sim.recorder
          .all()
          .filter((r) => r.method === 'GET' && /^\/gmedia\/v1beta\/models\/veo-3\.1-generate-preview\/operations\/\w+$/.test(r.path));
        expect(polls.length).toBeGreaterThan(0);
        const downloads = t.sim.recorder.all().filter((r) => /^\/gmedia\/v1beta\/files\/\w+:download$/.test(r.path));
        expect(downloads.at(-1)!.headers['x-goog-api-key']).toBe('sim-gemini-key');
        const f = await fetch(done.data![0]!.url);
        expect(f.headers.get('content-type')).toBe('video/mp4');
        expect(mp4Boxes(Buffer.from(await f.arrayBuffer()))).toEqual({ types: ['ftyp', 'mdat', 'moov'], seconds: 8 });
        expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 8n * (P1080 + AUDIO), held: before.held });
        expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'capture']);
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: sub.json.id, status: 'succeeded', data: [{ url: expect.any(String) }] });
      } finally {
        await rx.close();
      }
    });

    it('a shorter video than asked is charged for what the file holds; a duration Veo does not take goes as the longest below it', async () => {
      const before = await accountState(t.store, 'acct');
      const a = await v.submit({ model: 'veo', prompt: 'veo-short [sim:short]', duration: 6, generate_audio: false });
      const b = await v.submit({ model: 'veo', prompt: 'veo-five', duration: 5, generate_audio: false });
      const [da, db] = await Promise.all([v.until(a.json.id), v.until(b.json.id)]);
      expect([da.status, db.status]).toEqual(['succeeded', 'succeeded']);
      expect((upstreamBody(t.sim, 'veo-five').parameters as Record<string, unknown>).durationSeconds).toBe(4);
      expect(await chargedOf(t.store, a.json.id)).toBe((45n * P720) / 10n); // 4.5 s of 6
      expect(await chargedOf(t.store, b.json.id)).toBe(4n * P720);
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - (45n * P720) / 10n - 4n * P720, held: before.held });
    });

    it('first and last frame go inline as image and lastFrame; reference images beside a frame are ignored, alone they go as assets', async () => {
      const a = await v.submit({
        model: 'veo',
        prompt: 'veo-frames',
        image_url: urls.first,
        last_frame_url: urls.last,
        reference_images: [urls.ref],
        duration: 4,
      });
      const b = await v.submit({ model: 'veo', prompt: 'veo-refs', reference_image_urls: [urls.ref, urls.first], duration: 4 });
      const [da, db] = await Promise.all([v.until(a.json.id), v.until(b.json.id)]);
      expect(da).toMatchObject({ status: 'succeeded', mode: 'image-to-video', ignored: ['reference_image_urls'] });
      expect(db).toMatchObject({ status: 'succeeded', mode: 'image-to-video' });
      expect(db.ignored).toBeUndefined();
      expect((upstreamBody(t.sim, 'veo-frames').instances as unknown[])[0]).toEqual({ prompt: 'veo-frames', image: b64(first), lastFrame: b64(last) });
      expect((upstreamBody(t.sim, 'veo-refs').instances as unknown[])[0]).toEqual({
        prompt: 'veo-refs',
        referenceImages: [
          { image: b64(ref), referenceType: 'asset' },
          { image: b64(first), referenceType: 'asset' },
        ],
      });
    });

    it('Vertex AI: generateAudio sent, fetchPredictOperation polled with a bearer token, the inline video stored and measured', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await v.submit({ model: 'veo-vertex', prompt: 'vertex-veo [sim:short]', duration: 8, generate_audio: false });
      const done = await v.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      const call = t.sim.recorder.find('vertex-veo')[0]!;
      expect(call.path).toBe('/gmedia/v1/projects/demo/locations/us-central1/publishers/google/models/veo-3.0-generate-001:predictLongRunning');
      expect(call.headers.authorization).toBe('Bearer sim-vertex-token');
      expect(JSON.parse(call.body.toString()).parameters).toEqual({
        aspectRatio: '16:9',
        durationSeconds: 8,
        resolution: '720p',
        generateAudio: false,
        sampleCount: 1,
      });
      const fetches = t.sim.recorder.all().filter((r) => r.path.endsWith('veo-3.0-generate-001:fetchPredictOperation'));
      expect(JSON.parse(fetches[0]!.body.toString())).toEqual({
        operationName: expect.stringMatching(/^projects\/demo\/locations\/us-central1\/.*\/operations\/\w+$/),
      });
      expect(mp4Boxes(Buffer.from(await (await fetch(done.data![0]!.url)).arrayBuffer())).seconds).toBe(6);
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 6n * P720, held: before.held });
    });

    it('a video removed by the safety filter, and a failed operation, fail the task and refund it; the failure webhook is signed', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const a = await v.submit({ model: 'veo', prompt: 'veo-nope [sim:blocked]', duration: 4 });
        const b = await v.submit({ model: 'veo', prompt: 'veo-doomed [sim:fail]', duration: 4, webhook_url: rx.url, webhook_secret: SECRET });
        expect([a.status, b.status]).toEqual([200, 200]);
        const [da, db] = await Promise.all([v.until(a.json.id), v.until(b.json.id)]);
        expect(da).toMatchObject({ status: 'failed', error: { code: 'content_blocked', message: expect.stringContaining('policies') } });
        expect(db).toMatchObject({ status: 'failed', error: { code: 'upstream_failed', message: expect.stringContaining('Video generation failed') } });
        expect(await ledgerKinds(t.store, a.json.id)).toEqual(['hold', 'refund']);
        expect(await ledgerKinds(t.store, b.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: b.json.id, status: 'failed', error: db.error });
      } finally {
        await rx.close();
      }
    });

    it('cancel refunds an unfinished video', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await v.submit({ model: 'veo', prompt: 'veo-long [sim:slow=20000]', duration: 4 });
      expect((await v.cancel(sub.json.id)).json).toMatchObject({ status: 'cancelled' });
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}

for (const sc of storeCases()) {
  describe(`Veo across a restart on ${sc.name}`, () => {
    it('an operation started by one gateway is polled to the end by the next and settled once', async () => {
      const store = await sc.open();
      const sim = await startSimulator();
      try {
        await grant(store, 'acct', 10n * C);
        const first = await startMediaGateway(store, sim, resources);
        const sub = await videoClient(first.url).submit({ model: 'veo', prompt: 'veo-restart [sim:slow=800]', duration: 4, generate_audio: false });
        expect(sub.status).toBe(200);
        await first.close();
        const row = await store.query<{ upstream_id: string | null }>('SELECT upstream_id FROM tasks WHERE id = $1', [sub.json.id]);
        expect(row.rows[0]!.upstream_id).toMatch(/^models\/veo-3\.1-generate-preview\/operations\/\w+$/);
        const second = await startMediaGateway(store, sim, resources);
        try {
          expect((await videoClient(second.url).until(sub.json.id)).status).toBe('succeeded');
          expect(sim.recorder.find('veo-restart')).toHaveLength(1);
          expect(await ledgerKinds(store, sub.json.id)).toEqual(['hold', 'capture']);
          expect(await accountState(store, 'acct')).toEqual({ balance: 10n * C - 4n * P720, held: 0n });
        } finally {
          await second.close();
        }
      } finally {
        await sim.close();
        await disposeStore(store);
      }
    });
  });
}
