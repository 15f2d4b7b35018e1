import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { publishFile } from '../../simulator/files.js';
import { encodePng } from '../../simulator/png.js';
import { apiKey, group } from '../support/resources.js';
import { storeCases } from '../support/stores.js';
import { C, client, KEY, startReceiver, waitUntil } from '../tasks/support.js';
import { ledgerKinds, mediaRoute, pngDims, SECRET, upstreamBody, useMediaStack, verified } from './support.js';

const gemini = (s: string, model: string) => ({ provider: 'gemini', baseURL: `${s}/gmedia`, model, credentials: { env: 'GEMINI_API_KEY' } });
const vertex = (s: string, model: string) => ({
  provider: 'gemini',
  baseURL: `${s}/gmedia/v1/projects/demo/locations/us-central1`,
  model,
  credentials: { env: 'VERTEX_ACCESS_TOKEN' },
});

function resources(s: string): object[] {
  return [
    mediaRoute('nano-banana-pro', 'image', gemini(s, 'gemini-3-pro-image-preview')),
    mediaRoute('nano-banana', 'image', gemini(s, 'gemini-2.5-flash-image'), { pricing: { perImage: { '1K': '0.02' } } }),
    mediaRoute('nano-banana-vertex', 'image', vertex(s, 'gemini-3-pro-image-preview')),
    group('g', ['nano-banana-pro', 'nano-banana', 'nano-banana-vertex']),
    apiKey('k', KEY, 'g', { account: 'acct' }),
  ];
}

const IMG_2K = 40_000n;

for (const sc of storeCases()) {
  describe(`Gemini image tasks on ${sc.name}`, () => {
    const t = useMediaStack(sc, resources, { acct: 100n * C });
    let c: ReturnType<typeof client>;
    beforeAll(() => {
      c = client(t.gw.url);
    });

    it('text-to-image: IMAGE modality, the tier as imageSize and the ratio as aspectRatio; the inline PNG is stored and served by URL; n images are n calls, charged each', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await c.submit('/v1/images/generations', {
          model: 'nano-banana-pro',
          prompt: 'gem-marker a fox',
          size: '16:9',
          resolution: '2K',
          n: 2,
          negative_prompt: 'fog',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        expect(sub.status).toBe(200);
        expect(sub.json.status).toBe('queued');
        const done = await c.until(sub.json.id);
        expect(done).toMatchObject({ status: 'succeeded', ignored: ['negative_prompt'] });
        expect(done.data).toHaveLength(2);
        const calls = t.sim.recorder.find('gem-marker');
        expect(calls).toHaveLength(2);
        expect(calls[0]!.path).toBe('/gmedia/v1beta/models/gemini-3-pro-image-preview:generateContent');
        expect(calls[0]!.headers['x-goog-api-key']).toBe('sim-gemini-key');
        expect(JSON.parse(calls[0]!.body.toString())).toEqual({
          contents: [{ role: 'user', parts: [{ text: 'gem-marker a fox' }] }],
          generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '16:9', imageSize: '2K' } },
        });
        for (const d of done.data!) {
          expect(d.url.startsWith(t.gw.url)).toBe(true);
          const f = await fetch(d.url);
          expect(f.headers.get('content-type')).toBe('image/png');
          expect(pngDims(Buffer.from(await f.arrayBuffer()))).toEqual({ width: 2048, height: 1152 });
        }
        expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 2n * IMG_2K, held: before.held });
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toMatchObject({ id: sub.json.id, status: 'succeeded' });
      } finally {
        await rx.close();
      }
    });

    it('a ratio Gemini does not take goes as the nearest it does; 2.5 Flash Image gets no imageSize', async () => {
      const sub = await c.submit('/v1/images/generations', { model: 'nano-banana', prompt: 'flash-marker', size: '1200x500' });
      expect((await c.until(sub.json.id)).status).toBe('succeeded');
      expect(upstreamBody(t.sim, 'flash-marker').generationConfig).toEqual({ responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '21:9' } });
    });

    it('edits and inpainting send the downloaded image and mask as inline parts', async () => {
      const photo = encodePng(320, 240, 7);
      const mask = encodePng(320, 240, 8);
      const photoUrl = publishFile(t.sim.context, 'gem-photo.png', photo);
      const maskUrl = publishFile(t.sim.context, 'gem-mask.png', mask);
      const edit = await c.submit('/v1/images/edits', { model: 'nano-banana-pro', prompt: 'edit-marker add a hat', image_urls: [photoUrl] });
      const paint = await c.submit('/v1/images/inpaint', { model: 'nano-banana-pro', prompt: 'paint-marker a window', image: photoUrl, mask_url: maskUrl });
      expect(edit.status).toBe(200);
      expect(paint.status).toBe(200);
      expect((await c.until(edit.json.id)).status).toBe('succeeded');
      expect((await c.until(paint.json.id)).status).toBe('succeeded');
      const img = { inlineData: { mimeType: 'image/png', data: photo.toString('base64') } };
      expect((upstreamBody(t.sim, 'edit-marker').contents as unknown[])[0]).toEqual({ role: 'user', parts: [{ text: 'edit-marker add a hat' }, img] });
      expect((upstreamBody(t.sim, 'paint-marker').contents as unknown[])[0]).toEqual({
        role: 'user',
        parts: [
          { text: 'paint-marker a window' },
          img,
          { text: expect.stringContaining('white marks the area') },
          { inlineData: { mimeType: 'image/png', data: mask.toString('base64') } },
        ],
      });
    });

    it('Vertex AI: the same codec on publishers/google/models with a bearer token', async () => {
      const sub = await c.submit('/v1/images/generations', { model: 'nano-banana-vertex', prompt: 'vertex-marker', size: '1:1' });
      expect((await c.until(sub.json.id)).status).toBe('succeeded');
      const call = t.sim.recorder.find('vertex-marker')[0]!;
      expect(call.path).toBe('/gmedia/v1/projects/demo/locations/us-central1/publishers/google/models/gemini-3-pro-image-preview:generateContent');
      expect(call.headers.authorization).toBe('Bearer sim-vertex-token');
      expect(call.headers['x-goog-api-key']).toBeUndefined();
    });

    it('an image refused by the safety system fails the task (content_blocked) and refunds it; so does an answer without an image', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const a = await c.submit('/v1/images/generations', {
          model: 'nano-banana-pro',
          prompt: 'nope [sim:blocked]',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        const b = await c.submit('/v1/images/generations', { model: 'nano-banana', prompt: 'text only [sim:fail]' });
        const [da, db] = await Promise.all([c.until(a.json.id), c.until(b.json.id)]);
        expect(da).toMatchObject({ status: 'failed', error: { code: 'content_blocked', message: expect.stringContaining('IMAGE_SAFETY') } });
        expect(db).toMatchObject({ status: 'failed', error: { code: 'no_image', message: expect.stringContaining('could not make') } });
        expect(await ledgerKinds(t.store, a.json.id)).toEqual(['hold', 'refund']);
        expect(await accountState(t.store, 'acct')).toEqual(before);
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: a.json.id, status: 'failed', error: da.error });
      } finally {
        await rx.close();
      }
    });

    it('a rate-limited upstream (429) is asked again with backoff while the task waits; cancel then refunds it', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await c.submit('/v1/images/generations', { model: 'nano-banana', prompt: 'busy-marker [sim:429]' });
      await waitUntil(() => t.sim.recorder.find('busy-marker').length >= 2, 10_000, 'two attempts');
      expect(['queued', 'processing']).toContain((await c.get(sub.json.id)).json.status);
      const cancelled = await c.cancel(sub.json.id);
      expect(cancelled.json.status).toBe('cancelled');
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}
