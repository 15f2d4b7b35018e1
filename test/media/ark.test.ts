import { beforeAll, describe, expect, it } from 'vitest';
import { accountState, verifyLedger } from '../../proxy/billing/ledger.js';
import { startSimulator } from '../../simulator/index.js';
import { apiKey, group } from '../support/resources.js';
import { disposeStore, storeCases } from '../support/stores.js';
import { C, client, grant, KEY, startReceiver, waitUntil } from '../tasks/support.js';
import { mp4Boxes, videoClient } from '../tasks/videos-support.js';
import {
  AUDIO,
  chargedOf,
  IMG_2K,
  ledgerKinds,
  mediaRoute,
  P1080,
  P720,
  pngDims,
  SECRET,
  startMediaGateway,
  upstreamBody,
  useMediaStack,
  verified,
} from './support.js';

const FRAME = 'https://media.example.com/first.png';
const LAST = 'https://media.example.com/last.png';
const REF = 'https://media.example.com/ref.png';

const ark = (s: string, model: string) => ({ provider: 'ark', baseURL: `${s}/ark/api/v3`, model, credentials: { env: 'ARK_API_KEY' } });

function resources(s: string): object[] {
  return [
    mediaRoute('seedream', 'image', ark(s, 'seedream-4-0-250828'), { capabilities: {} }),
    mediaRoute('seedance', 'video', ark(s, 'seedance-1-0-pro-250528')),
    mediaRoute('seedance-audio', 'video', ark(s, 'seedance-1-5-pro-251215')),
    group('g', ['seedream', 'seedance', 'seedance-audio']),
    apiKey('k', KEY, 'g', { account: 'acct' }),
  ];
}

for (const sc of storeCases()) {
  describe(`ModelArk tasks on ${sc.name}`, () => {
    const t = useMediaStack(sc, resources, { acct: 100n * C });
    let v: ReturnType<typeof videoClient>;
    let img: ReturnType<typeof client>;
    beforeAll(() => {
      v = videoClient(t.gw.url);
      img = client(t.gw.url);
    });

    it('Seedream: pixels as size (scaled up to its minimum area), reference images by URL, one call per image, the PNGs copied and charged per image', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await img.submit('/v1/images/edits', { model: 'seedream', prompt: 'dream-marker', image_urls: [FRAME, REF], size: '2048x1152', n: 2 });
      expect(sub.status).toBe(200);
      const done = await img.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      expect(done.data).toHaveLength(2);
      const calls = t.sim.recorder.find('dream-marker');
      expect(calls).toHaveLength(2);
      expect(calls[0]!.path).toBe('/ark/api/v3/images/generations');
      expect(calls[0]!.headers.authorization).toBe('Bearer sim-ark-key');
      expect(JSON.parse(calls[0]!.body.toString())).toEqual({
        model: 'seedream-4-0-250828',
        prompt: 'dream-marker',
        size: '2048x1152',
        image: [FRAME, REF],
        sequential_image_generation: 'disabled',
        response_format: 'url',
        watermark: false,
      });
      for (const d of done.data!) expect(pngDims(Buffer.from(await (await fetch(d.url)).arrayBuffer()))).toEqual({ width: 2048, height: 1152 });
      expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 2n * IMG_2K, held: before.held });

      const small = await img.submit('/v1/images/generations', { model: 'seedream', prompt: 'dream-small', size: '16:9' });
      expect((await img.until(small.json.id)).status).toBe('succeeded');
      expect(upstreamBody(t.sim, 'dream-small').size).toBe('1280x720'); // 1024x576 is below Seedream 4's minimum
    });

    it('Seedream refusing the prompt fails the task as content_blocked and refunds it', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await img.submit('/v1/images/generations', { model: 'seedream', prompt: 'dream-nope [sim:blocked]' });
      const done = await img.until(sub.json.id);
      expect(done).toMatchObject({
        status: 'failed',
        error: { code: 'content_blocked', message: expect.stringContaining('InputTextSensitiveContentDetected') },
      });
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('Seedance: a content task with first and last frame roles, polled, the MP4 copied, charged on its own duration, webhook signed', async () => {
      const rx = await startReceiver();
      try {
        const before = await accountState(t.store, 'acct');
        const sub = await v.submit({
          model: 'seedance',
          prompt: 'dance-marker [sim:short]',
          image_url: FRAME,
          last_image_url: LAST,
          reference_image_urls: [REF],
          duration: 8,
          resolution: '1080p',
          aspect_ratio: '12:5',
          generate_audio: false,
          negative_prompt: 'rain',
          webhook_url: rx.url,
          webhook_secret: SECRET,
        });
        expect(sub.status).toBe(200);
        const call = t.sim.recorder.find('dance-marker')[0]!;
        expect(call.path).toBe('/ark/api/v3/contents/generations/tasks');
        expect(call.headers.authorization).toBe('Bearer sim-ark-key');
        expect(JSON.parse(call.body.toString())).toEqual({
          model: 'seedance-1-0-pro-250528',
          content: [
            { type: 'text', text: 'dance-marker [sim:short]' },
            { type: 'image_url', image_url: { url: FRAME }, role: 'first_frame' },
            { type: 'image_url', image_url: { url: LAST }, role: 'last_frame' },
          ],
          resolution: '1080p',
          ratio: '21:9',
          duration: 8,
          watermark: false,
        });
        const done = await v.until(sub.json.id);
        expect(done).toMatchObject({ status: 'succeeded', mode: 'image-to-video', ignored: ['negative_prompt', 'reference_image_urls'] });
        expect(mp4Boxes(Buffer.from(await (await fetch(done.data![0]!.url)).arrayBuffer())).seconds).toBe(6);
        expect(await chargedOf(t.store, sub.json.id)).toBe(6n * P1080);
        expect(await accountState(t.store, 'acct')).toEqual({ balance: before.balance - 6n * P1080, held: before.held });
        await waitUntil(() => rx.received.length === 1, 10_000, 'the webhook');
        expect(verified(rx.received[0]!)).toBe(true);
        expect(JSON.parse(rx.received[0]!.body.toString())).toEqual({ id: sub.json.id, status: 'succeeded', data: [{ url: expect.any(String) }] });
      } finally {
        await rx.close();
      }
    });

    it('reference images alone go with the reference_image role; a model that makes sound gets generate_audio and is charged for it', async () => {
      const sub = await v.submit({ model: 'seedance-audio', prompt: 'dance-refs', reference_images: [REF, FRAME], duration: 4 });
      const done = await v.until(sub.json.id);
      expect(done.status).toBe('succeeded');
      const body = upstreamBody(t.sim, 'dance-refs');
      expect(body.content).toEqual([
        { type: 'text', text: 'dance-refs' },
        { type: 'image_url', image_url: { url: REF }, role: 'reference_image' },
        { type: 'image_url', image_url: { url: FRAME }, role: 'reference_image' },
      ]);
      expect(body.generate_audio).toBe(true);
      expect(await chargedOf(t.store, sub.json.id)).toBe(4n * (P720 + AUDIO));
    });

    it('a prompt refused at creation is a 400 with nothing held; a refused output fails the task and refunds it', async () => {
      const before = await accountState(t.store, 'acct');
      const tasks = (await t.store.query('SELECT id FROM tasks')).rows.length;
      const r = await v.submit({ model: 'seedance', prompt: 'dance-nope [sim:blocked]' });
      expect(r.status).toBe(400);
      expect(r.json.error).toMatchObject({ param: 'prompt', message: expect.stringMatching(/safety policy.*InputTextSensitiveContentDetected/) });
      expect((await t.store.query('SELECT id FROM tasks')).rows).toHaveLength(tasks);
      const sub = await v.submit({ model: 'seedance', prompt: 'dance-doomed [sim:fail]' });
      expect(sub.status).toBe(200);
      const done = await v.until(sub.json.id);
      expect(done).toMatchObject({ status: 'failed', error: { code: 'OutputVideoSensitiveContentDetected' } });
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('cancel refunds a queued task and deletes it upstream', async () => {
      const before = await accountState(t.store, 'acct');
      const sub = await v.submit({ model: 'seedance', prompt: 'dance-long [sim:slow=20000]' });
      expect((await v.cancel(sub.json.id)).json).toMatchObject({ status: 'cancelled' });
      expect(t.sim.recorder.all().some((r) => r.method === 'DELETE' && /^\/ark\/api\/v3\/contents\/generations\/tasks\/cgt-/.test(r.path))).toBe(true);
      expect(await ledgerKinds(t.store, sub.json.id)).toEqual(['hold', 'refund']);
      expect(await accountState(t.store, 'acct')).toEqual(before);
    });

    it('keeps the ledger consistent', async () => {
      expect(await verifyLedger(t.store)).toEqual([]);
    });
  });
}

for (const sc of storeCases()) {
  describe(`ModelArk across a restart on ${sc.name}`, () => {
    it('a Seedance task created by one gateway is polled to the end by the next and settled once', async () => {
      const store = await sc.open();
      const sim = await startSimulator();
      try {
        await grant(store, 'acct', 10n * C);
        const first = await startMediaGateway(store, sim, resources);
        const sub = await videoClient(first.url).submit({ model: 'seedance', prompt: 'dance-restart [sim:slow=800]', duration: 5, generate_audio: false });
        expect(sub.status).toBe(200);
        await first.close();
        const second = await startMediaGateway(store, sim, resources);
        try {
          expect((await videoClient(second.url).until(sub.json.id)).status).toBe('succeeded');
          expect(sim.recorder.find('dance-restart')).toHaveLength(1);
          expect(await ledgerKinds(store, sub.json.id)).toEqual(['hold', 'capture']);
          expect(await accountState(store, 'acct')).toEqual({ balance: 10n * C - 5n * P720, held: 0n });
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
